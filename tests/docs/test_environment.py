"""docs/environment.md is the one table of the environment variables vk-adam reads: every variable
the library's code reads is in it, and every variable in it is read by the library or by the kp
build vk-adam ships (``kp-patches/``)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "environment.md"
NAME = r'"([A-Z][A-Z0-9_]+)"'


def read_by_the_library(source: str) -> set[str]:
    """The variables one module reads: the names its ``*_ENV`` constants hold, and the literal
    names it passes to ``os.environ``, ``os.getenv``, ``env_int`` or an environment mapping."""
    names = set(re.findall(rf"^_?[A-Z0-9_]*_ENV\w* = {NAME}", source, re.M))
    for group in re.findall(r"^_?[A-Z0-9_]*_ENV\w* = \(([^)]*)\)", source, re.M):
        names |= set(re.findall(NAME, group))
    names |= set(re.findall(rf"(?:environ\.get|environ\[|getenv|env_int|env\.get)\(?\s*{NAME}", source))
    return names


def tabled() -> set[str]:
    rows = [line for line in PAGE.read_text().splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split(" | ")[0])}


def test_every_variable_the_library_reads_is_in_the_table():
    read = set()
    for path in sorted((ROOT / "vk_adam").rglob("*.py")):
        read |= read_by_the_library(path.read_text())
    assert {"VK_ADAM_DEVICE", "VK_ADAM_VEC4S", "LOCAL_RANK", "VK_LAYER_PATH"} <= read  # the scan works
    missing = read - tabled()
    assert not missing, f"read by vk_adam/ but not in docs/environment.md: {sorted(missing)}"


def test_every_variable_in_the_table_is_read():
    code = "".join(p.read_text() for p in sorted((ROOT / "vk_adam").rglob("*.py")))
    code += "".join(p.read_text() for p in sorted((ROOT / "kp-patches").glob("*.patch")))
    stale = {name for name in tabled() if name not in code}
    assert not stale, f"in docs/environment.md but read nowhere: {sorted(stale)}"


#: Settings that were once the library's, for tests alone: the tests lower the binding and
#: allocation limits through the device's reported limits, and make ZeRO-1's host mirror stand
#: in for CUDA by calling ``vk_adam._runtime.stand_in_for_cuda``.
TEST_ONLY = ("VK_ADAM_MAX_BINDING_BYTES", "VK_ADAM_MAX_ALLOCATION_BYTES", "VK_ADAM_ZERO_TEST_BRIDGE")


def test_test_only_settings_are_not_read_by_the_library():
    code = "".join(p.read_text() for p in sorted((ROOT / "vk_adam").rglob("*.py")))
    for name in TEST_ONLY:
        assert name not in code, name
        assert name not in tabled(), name


def test_the_scan_finds_each_form():
    source = (
        'SOME_ENV = "VK_ADAM_A"\n'
        'RANKS_ENV = ("B_RANK", "C_RANK")\n'
        'x = os.environ.get("D_VAR", "")\n'
        'y = env_int("E_VAR", 1)\n'
        'z = os.environ["F_VAR"]\n'
        'w = env.get("G_VAR")\n'
    )
    assert read_by_the_library(source) == {
        "VK_ADAM_A",
        "B_RANK",
        "C_RANK",
        "D_VAR",
        "E_VAR",
        "F_VAR",
        "G_VAR",
    }
