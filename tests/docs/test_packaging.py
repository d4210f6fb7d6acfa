"""The patched kp's name and version, as docs/packaging.md describes them: vk-adam pins the
exact patch series it was built for, and the series' last patch sets that version. And the
library stands alone: `pip install vk-adam` brings what it imports; `vk-adam demo` and `bench`
need the `demo` extra, and say so when it is missing."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import kp
import pytest

ROOT = Path(__file__).resolve().parents[2]


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


# --- the library stands alone: `pip install vk-adam` brings what it imports, no more -------------

#: Imported only when the user brings them: torch and mpi4py (interop, ZeRO-1's communicators),
#: pytest (the pytest plugin, which only pytest loads).
OPTIONAL_IMPORTS = {"torch", "mpi4py", "pytest", "_pytest"}
#: Optional peers of `vk-adam bench`, which skips their rows with the reason when they are absent
#: (`--cases host`'s DeepSpeedCPUAdam row, and the ninja its op builds with). Allowed only under
#: vk_adam/_commands/bench/, and only inside functions: importing the bench never needs them.
OPTIONAL_BENCH_PEERS = {"deepspeed", "ninja"}


def _requirement_names(requirements: list[str]) -> set[str]:
    return {re.match(r"[A-Za-z0-9_.-]+", r)[0].lower().replace("-", "_") for r in requirements}


def _module_level(tree: ast.AST) -> Iterator[ast.AST]:
    """The nodes that run when the module is imported: all but those inside functions."""
    for node in ast.iter_child_nodes(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield node
            yield from _module_level(node)


def _third_party_imports(paths: list[Path], module_level: bool = False) -> dict[str, str]:
    """Top-level third-party modules imported anywhere in ``paths`` (lazy imports included, or
    with ``module_level`` only the imports that run when the module is imported), each with one
    file that imports it."""
    import sys

    found: dict[str, str] = {}
    for path in paths:
        tree = ast.parse(path.read_text())
        for node in _module_level(tree) if module_level else ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.partition(".")[0]
                if top not in sys.stdlib_module_names and top != "vk_adam":
                    found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def test_the_library_needs_only_its_declared_dependencies_and_the_commands_the_demo_extra():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    dependencies = _requirement_names(project["dependencies"])
    demo = _requirement_names(project["optional-dependencies"]["demo"])
    assert {"kp", "numpy", "pluggy"} <= dependencies
    assert not demo & dependencies, "the demo extra's packages are not dependencies of the library"
    package = ROOT / "vk_adam"
    commands = sorted((package / "_commands").rglob("*.py"))
    library = sorted(set(package.rglob("*.py")) - set(commands))
    undeclared = {
        name: where
        for name, where in _third_party_imports(library).items()
        if name.lower() not in dependencies | OPTIONAL_IMPORTS
    }
    assert not undeclared, f"imported by the library but not in [project].dependencies: {undeclared}"
    undeclared = {
        name: where
        for name, where in _third_party_imports(commands).items()
        if name.lower() not in dependencies | demo | OPTIONAL_IMPORTS | OPTIONAL_BENCH_PEERS
    }
    assert not undeclared, f"imported by vk-adam demo/bench, in neither dependencies nor demo: {undeclared}"
    # the bench's optional peers: imported by the bench alone, and only when a row runs
    bench = package / "_commands" / "bench"
    elsewhere = _third_party_imports([c for c in commands if bench not in c.parents])
    eager = _third_party_imports(commands, module_level=True)
    for found in (elsewhere, eager):
        misplaced = {name: where for name, where in found.items() if name.lower() in OPTIONAL_BENCH_PEERS}
        assert not misplaced, f"optional bench peers imported outside a bench row's function: {misplaced}"


@pytest.mark.parametrize("command", ["demo", "bench"])
def test_demo_and_bench_without_the_demo_extra_say_what_to_install(command, tmp_path):
    """As after `pip install vk-adam` alone: matplotlib and tqdm cannot be imported."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "sys.modules.update(matplotlib=None, tqdm=None)  # import fails, as when not installed\n"
        "from vk_adam.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    out = tmp_path / "out"
    args = [command, "--out", str(out)] + (["--steps", "2"] if command == "demo" else [])
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "pip install 'vk-adam[demo]'" in done.stderr
    assert "matplotlib and tqdm" in done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists(), "the command started before it found the extra missing"
