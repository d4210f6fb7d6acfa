"""The patched kp's name and version, as docs/packaging.md describes them: vk-adam pins the
exact patch series it was built for, and the series' last patch sets that version."""

from __future__ import annotations

import re
from pathlib import Path

import kp

ROOT = Path(__file__).resolve().parents[1]


def _pinned_kp() -> str:
    # tomllib is 3.11+; the pin is one quoted requirement line of [project].dependencies.
    pins = re.findall(r'^\s*"kp==([^"]+)"', (ROOT / "pyproject.toml").read_text(), flags=re.MULTILINE)
    assert len(pins) == 1, pins
    return pins[0].strip()


def _series_version() -> str:
    """The version the patch series gives kp's setup.py (the last patch that sets one)."""
    found = []
    for patch in sorted((ROOT / "kp-patches").glob("*.patch")):
        found += re.findall(r"^\+\s*version='([^']+)'", patch.read_text(), flags=re.MULTILINE)
    assert found, "no patch sets kp's version"
    return found[-1]


def test_vk_adam_pins_the_patch_series_it_carries():
    version = _series_version()
    assert re.fullmatch(r"0\.9\.0\+vkadam\.\d+", version), version
    assert _pinned_kp() == version


def test_the_installed_kp_is_that_series():
    assert kp.__version__ == _series_version()
    assert "memory recycling" in kp.patches
