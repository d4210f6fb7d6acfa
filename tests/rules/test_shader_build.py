"""Shaders are built with the package: present, valid, newer than their sources."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import vk_adam
from vk_adam._rules.spirv import SPIRV_DIR, load_spirv, reflect
from vk_adam.shaderc import INCLUDE_DIR, SUBGROUP_SUFFIX, ShaderBuildError, compile_shaders, includes_harness

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "glsl").glob("*.comp"))
#: The update-rule shaders: each is also built as its subgroup variant, <stem>.subgroups.spv.
RULE_SOURCES = [s for s in SOURCES if includes_harness(s, [ROOT / "glsl"])]
#: Every SPIR-V stem a build of glsl/ writes.
BUILT_STEMS = {s.stem for s in SOURCES} | {f"{s.stem}{SUBGROUP_SUFFIX}" for s in RULE_SOURCES}
#: The resident demo's application: its driver, shaders and their SPIR-V ship in the wheel.
RESIDENT_EXAMPLE = "vk_adam/_commands/demo/resident_example"


def test_every_glsl_source_has_an_installed_spirv_newer_than_its_sources():
    assert SOURCES, "no GLSL sources found"
    headers = [*(ROOT / "glsl").glob("*.glsl"), *INCLUDE_DIR.glob("*.glsl")]
    newest_header = max(h.stat().st_mtime for h in headers)
    for source in SOURCES:
        spv = SPIRV_DIR / f"{source.stem}.spv"
        assert spv.exists(), f"{spv} missing: reinstall (pip install -e .) to rebuild shaders"
        newest = max(source.stat().st_mtime, newest_header)
        assert spv.stat().st_mtime >= newest, (
            f"{spv.name} is older than its sources: rebuild with `python build_shaders.py` "
            "or reinstall the package"
        )
        assert reflect(load_spirv(source.stem)).bindings
    for source in RULE_SOURCES:
        variant = SPIRV_DIR / f"{source.stem}{SUBGROUP_SUFFIX}.spv"
        assert variant.exists() and variant.stat().st_mtime >= newest_header, f"{variant} missing or stale"
        # the variant declares the subgroup-size constant (id 24); the base variant does not
        assert 24 in reflect(load_spirv(variant.stem)).spec_ids
        assert 24 not in reflect(load_spirv(source.stem)).spec_ids


def test_rule_shaders_are_told_apart_from_the_other_shaders():
    """adam/sgd include the harness (through adam_body.glsl); copy and the gradient passes do not."""
    stems = {s.stem for s in RULE_SOURCES}
    assert {"adam", "adam_amsgrad", "sgd", "sgd_momentum"} <= stems
    assert not stems & {"copy", "grad_sumsq", "grad_clip_scale", "nonfinite_check"}


def test_no_spirv_is_tracked_by_git():
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    tracked = subprocess.run(["git", "ls-files", "*.spv"], cwd=ROOT, capture_output=True, text=True).stdout
    assert tracked.strip() == ""


needs_compiler = pytest.mark.skipif(
    shutil.which("glslangValidator") is None, reason="glslang-tools not installed (build-time tool)"
)


def test_missing_compiler_is_a_clear_build_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ShaderBuildError, match="glslang-tools"):
        compile_shaders(ROOT / "glsl", tmp_path / "out")


@needs_compiler
def test_broken_shader_reports_the_compiler_message(tmp_path):
    (tmp_path / "bad.comp").write_text("#version 450\nvoid main() { undefined_thing = 1; }\n")
    with pytest.raises(ShaderBuildError, match=r"bad\.comp failed to compile"):
        compile_shaders(tmp_path, tmp_path / "out")


@needs_compiler
def test_shaderc_command_line_builds_plugin_style_shaders(tmp_path):
    out = tmp_path / "spv"
    result = subprocess.run(
        [sys.executable, "-m", "vk_adam.shaderc", str(ROOT / "glsl"), str(out), f"-I{ROOT / 'glsl'}"],
        capture_output=True,
        text=True,
        env={**os.environ},
    )
    assert result.returncode == 0, result.stderr
    assert {p.stem for p in out.glob("*.spv")} == BUILT_STEMS


def test_package_exports_a_typed_public_surface():
    assert (Path(vk_adam.__file__).parent / "py.typed").exists()
    for name in vk_adam.__all__:
        assert hasattr(vk_adam, name), name


@pytest.mark.slow  # builds an sdist and a wheel
@needs_compiler
def test_sdist_carries_glsl_and_a_wheel_built_from_it_carries_spirv(tmp_path):
    """The packaging contract: GLSL in the sdist (no SPIR-V), SPIR-V compiled into every wheel."""
    import tarfile
    import zipfile

    pytest.importorskip("hatchling")
    build = [sys.executable, "-m", "hatchling", "build", "-d", str(tmp_path / "dist")]
    subprocess.run([*build, "-t", "sdist"], cwd=ROOT, check=True, capture_output=True)
    (sdist,) = (tmp_path / "dist").glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
        tar.extractall(tmp_path / "src", filter="data")
    assert any(n.endswith("glsl/adam.comp") for n in names)
    assert not any(n.endswith(".spv") for n in names)
    (unpacked,) = (tmp_path / "src").iterdir()
    subprocess.run([*build, "-t", "wheel"], cwd=unpacked, check=True, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        spv = {Path(n).stem for n in names if n.startswith("vk_adam/_spirv/") and n.endswith(".spv")}
        assert "vk_adam/py.typed" in names
        assert "vk_adam/include/vk_adam_rule.glsl" in names
        # The resident demo's application is in the package, compiled, so `vk-adam demo` runs.
        example = {n for n in names if n.startswith(f"{RESIDENT_EXAMPLE}/")}
    assert spv == BUILT_STEMS
    assert {Path(n).name for n in example} >= {
        "train.py",
        "forward_backward.comp",
        "weight_grads.comp",
        "saved.glsl",
        "forward_backward.spv",
        "weight_grads.spv",
    }
    assert not any(
        n.endswith(".spv") and not n.startswith(("vk_adam/_spirv/", f"{RESIDENT_EXAMPLE}/spirv/"))
        for n in names
    )
