"""benchmarks/pipeline_stats: the C tool builds with its own script and answers in JSON, with the
driver's statistics where the driver reports them and a clear "error" (exit 2) where not."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import vk_adam

ROOT = Path(__file__).resolve().parent.parent
SPIRV = Path(vk_adam.__file__).parent / "_spirv"


@pytest.fixture(scope="module")
def tool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("cc") is None:  # scripts/setup.sh installs g++, which brings cc
        pytest.skip("no C compiler (cc) on PATH")
    folder = tmp_path_factory.mktemp("pipeline_stats")
    for name in ("pipeline_stats.c", "build.sh"):
        shutil.copy(ROOT / "benchmarks" / "pipeline_stats" / name, folder / name)
    built = subprocess.run(["sh", str(folder / "build.sh")], capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stdout + built.stderr
    assert "warning" not in built.stderr.lower(), built.stderr
    return folder / "pipeline_stats"


def _run(tool: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(tool), *args], capture_output=True, text=True, timeout=120)


def test_reports_a_pipeline_or_says_why_not(tool):
    # The 8-bit subgroup variant with fp32 params and int8 state (constants 16..24 as kp passes
    # them: uint words in id order, the rule's own constants 0..15 left at 0).
    words = [0] * 16 + [0, 0, 2, 3, 0, 0, 1, 1, 32]
    spec = ",".join(hex(w) for w in np.asarray(words, np.uint32))
    run = _run(tool, "-s", spec, str(SPIRV / "adam.subgroups.spv"))
    report = json.loads(run.stdout)
    assert report["shader"].endswith("adam.subgroups.spv") and report["device"]
    if run.returncode == 2:  # lavapipe (Mesa 22.3) does not implement the extension
        assert report["error"] == "the driver does not report pipeline executable statistics"
    else:
        assert run.returncode == 0, run.stderr
        (executable,) = report["executables"]
        assert executable["subgroup_size"] > 0 and executable["statistics"]


def test_bad_input_is_refused_with_a_message(tool, tmp_path):
    assert "usage: pipeline_stats" in _run(tool).stderr
    not_spirv = tmp_path / "x.spv"
    not_spirv.write_bytes(b"\0" * 16)
    run = _run(tool, str(not_spirv))
    assert run.returncode == 1 and "not a SPIR-V file" in run.stderr
    missing = _run(tool, str(tmp_path / "missing.spv"))
    assert missing.returncode == 1 and "cannot open" in missing.stderr
    no_device = _run(tool, "-d", "99", str(SPIRV / "copy.spv"))
    assert no_device.returncode == 1 and "no device 99" in no_device.stderr
