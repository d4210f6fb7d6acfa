"""Compile GLSL compute shaders to validated SPIR-V (build-time tool, standard library only).

vk-adam's own build (``build_shaders.py``) and plugin packages use the same driver, so a rule
shader can ``#include "vk_adam_rule.glsl"`` (the shared buffer interface, shipped in
``vk_adam/include``)::

    from vk_adam.shaderc import compile_shaders
    compile_shaders("glsl", "my_plugin/spirv")

or from a shell: ``python -m vk_adam.shaderc glsl my_plugin/spirv``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["INCLUDE_DIR", "SUBGROUP_SUFFIX", "ShaderBuildError", "compile_shaders", "includes_harness"]

#: Folder holding ``vk_adam_rule.glsl``, the harness every update-rule shader includes.
INCLUDE_DIR = Path(__file__).resolve().parent / "include"

#: Vulkan 1.1 SPIR-V (1.3) runs on every Vulkan 1.1+ driver: lavapipe, NVIDIA, AMD, MoltenVK.
TARGET_ENV = "vulkan1.1"

#: A rule shader (one that includes ``vk_adam_rule.glsl``) is built twice: ``<name>.spv`` runs on
#: any device, ``<name>.subgroups.spv`` (the harness with ``VK_ADAM_SUBGROUPS`` defined) reduces
#: 8-bit state's block maxima with subgroup arithmetic; vk-adam picks one per device.
SUBGROUP_SUFFIX = ".subgroups"
HARNESS = "vk_adam_rule.glsl"
_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)

_TOOLS = {
    "glslangValidator": "glslang-tools (Debian/Ubuntu: apt-get install glslang-tools)",
    "spirv-val": "spirv-tools (Debian/Ubuntu: apt-get install spirv-tools)",
}


class ShaderBuildError(RuntimeError):
    """A shader could not be compiled or validated, or a build tool is missing."""


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ShaderBuildError(
            f"{name} not found on PATH: building vk-adam's shaders needs it. Install {_TOOLS[name]}."
        )
    return path


def includes_harness(source: str | Path, include_dirs: Iterable[str | Path] = ()) -> bool:
    """Whether ``source`` includes ``vk_adam_rule.glsl`` (directly or through its own includes,
    looked up next to the including file, then in ``include_dirs`` and :data:`INCLUDE_DIR`)."""
    dirs = [Path(d) for d in include_dirs] + [INCLUDE_DIR]
    seen: set[Path] = set()
    todo = [Path(source)]
    while todo:
        path = todo.pop()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        for name in _INCLUDE.findall(path.read_text(errors="replace")):
            if Path(name).name == HARNESS:
                return True
            todo += [d / name for d in (path.parent, *dirs)]
    return False


def compile_shaders(
    src_dir: str | Path,
    out_dir: str | Path,
    include_dirs: Iterable[str | Path] = (),
) -> list[Path]:
    """Compile every ``*.comp`` in ``src_dir`` to ``out_dir/<stem>.spv`` and validate it; a rule
    shader (see :func:`includes_harness`) also to ``out_dir/<stem>.subgroups.spv``.

    ``INCLUDE_DIR`` is always on the include path. Raises :class:`ShaderBuildError` with the
    compiler's message when a shader fails, or naming the package to install when a tool is
    missing. Returns the written paths.
    """
    src = Path(src_dir)
    out = Path(out_dir)
    sources = sorted(src.glob("*.comp"))
    if not sources:
        raise ShaderBuildError(f"no *.comp shaders found in {src}")
    glslang = _tool("glslangValidator")
    spirv_val = _tool("spirv-val")
    out.mkdir(parents=True, exist_ok=True)
    include_dirs = list(include_dirs)
    includes = [f"-I{d}" for d in [INCLUDE_DIR, *include_dirs]]
    written: list[Path] = []
    for source in sources:
        builds: list[tuple[Path, list[str]]] = [(out / f"{source.stem}.spv", [])]
        if includes_harness(source, include_dirs):
            builds.append((out / f"{source.stem}{SUBGROUP_SUFFIX}.spv", ["-DVK_ADAM_SUBGROUPS=1"]))
        for target, defines in builds:
            _compile(glslang, spirv_val, source, target, [*includes, *defines])
            written.append(target)
    return written


def _compile(glslang: str, spirv_val: str, source: Path, target: Path, flags: list[str]) -> None:
    tmp = target.with_suffix(".spv.tmp")
    what = f"{source} (subgroup variant)" if target.stem.endswith(SUBGROUP_SUFFIX) else str(source)
    compiled = subprocess.run(
        [glslang, "-V", "--target-env", TARGET_ENV, *flags, str(source), "-o", str(tmp)],
        capture_output=True,
        text=True,
    )
    if compiled.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise ShaderBuildError(f"{what} failed to compile:\n{compiled.stdout}{compiled.stderr}")
    validated = subprocess.run(
        [spirv_val, "--target-env", TARGET_ENV, str(tmp)], capture_output=True, text=True
    )
    if validated.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise ShaderBuildError(f"{what}: spirv-val rejected the SPIR-V:\n{validated.stderr}")
    tmp.replace(target)  # atomic: a reader never sees half a shader


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vk_adam.shaderc", description=__doc__)
    parser.add_argument("src_dir", help="folder of *.comp GLSL compute shaders")
    parser.add_argument("out_dir", help="folder to write <name>.spv into")
    parser.add_argument("-I", dest="include", action="append", default=[], help="include folder")
    args = parser.parse_args(argv)
    try:
        for path in compile_shaders(args.src_dir, args.out_dir, args.include):
            print(path)
    except ShaderBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
