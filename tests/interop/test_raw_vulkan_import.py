"""examples/raw_vulkan_import: a Vulkan application that is not vk-adam and not Kompute (the
``vulkan`` cffi package from PyPI) exports two of its own buffers, and vk-adam steps AdamW on
them (issue #42 item 4)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

kp = pytest.importorskip("kp")

from vk_adam._runtime.external import supported  # noqa: E402
from vk_adam._validation import find_validation_layer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "raw_vulkan_import" / "adam_on_a_raw_vulkan_buffer.py"


@pytest.mark.skipif(not supported(), reason="kp without vk-adam's patch 0017 (stock kp)")
@pytest.mark.skipif(
    importlib.util.find_spec("vulkan") is None,
    reason="the `vulkan` package (PyPI, cffi binding) is not installed: `pip install vulkan`, or "
    "`bash scripts/setup.sh test`, which installs the test extra",
)
def test_a_raw_vulkan_app_steps_adam_on_its_own_buffers():
    """examples/raw_vulkan_import: an app with its own VkInstance and VkDevice (the `vulkan`
    package, not kp) exports two buffers; vk-adam imports them and steps AdamW five times, each
    step compared with NumPy. Under --vk-validation, the app's instance is validated too (its
    messages are counted by the app; vk-adam's reach this session's log)."""
    validate = find_validation_layer() is not None
    command = [sys.executable, str(EXAMPLE), "--steps", "5", *(["--validate"] if validate else [])]
    out = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("max |vk-adam - NumPy|") == 5
    assert "5 steps on the app's own buffers: match NumPy" in out.stdout
    if validate:
        assert "validation (app's instance, core + synchronization): 0 messages" in out.stdout
