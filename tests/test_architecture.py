"""The layout docs/architecture.md describes, enforced: module sizes, imports that only point
down the layers (front -> layout and runtime -> kp), and no import cycles among the modules. No
Vulkan device needed."""

from __future__ import annotations

import ast
import itertools
from collections import deque
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "vk_adam"

# Layer of each top-level part of the package; a module may import its own part or a lower layer.
LAYERS = {
    "_errors": 0,
    "_inputs": 0,
    "_formats": 0,
    "shaderc": 0,
    "_validation": 0,
    "_runtime": 1,
    "_rules": 1,
    "_optim": 2,
    "lora": 3,
    "schedules": 3,
    "testing": 3,
    "interop": 3,
    "pytest_plugin": 3,
    "distributed": 3,
    "_commands": 4,
    "cli": 5,
    "__main__": 5,
    "__init__": 6,
}
# Parts of one layer that must stay apart: the rules know nothing of the device.
APART = {("_rules", "_runtime"), ("_runtime", "_rules")}


def _part(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 or rel.name != "__init__.py" else "__init__"


def _imported_parts(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    depth = len(path.relative_to(PACKAGE).parts) - 1  # packages between vk_adam and the module
    parts: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                up = node.level - 1
                if up < depth:
                    continue  # inside its own part
                target = (node.module or "").split(".")[0]
                names = [target] if target else [a.name for a in node.names]
                parts.update(n for n in names if n)
            elif node.module and node.module.startswith("vk_adam."):
                parts.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            parts.update(a.name.split(".")[1] for a in node.names if a.name.startswith("vk_adam."))
    return parts


def _modules() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if "_spirv" not in p.parts]


def test_imports_point_down_the_layers():
    wrong = []
    for path in _modules():
        own = _part(path)
        for target in _imported_parts(path) - {own}:
            if target not in LAYERS:
                continue  # e.g. __version__ from the package root
            if LAYERS[target] > LAYERS[own] or (own, target) in APART:
                wrong.append(f"{path.relative_to(PACKAGE)} imports {target}")
    assert not wrong, wrong


def test_only_the_runtime_imports_kp():
    for path in _modules():
        tree = ast.parse(path.read_text())
        imports_kp = any(
            (isinstance(n, ast.Import) and any(a.name == "kp" for a in n.names))
            or (isinstance(n, ast.ImportFrom) and n.module == "kp" and not n.level)
            for n in ast.walk(tree)
        )
        assert not imports_kp or path.parent.name == "_runtime", path


def test_no_module_over_400_lines_and_no_class_over_250():
    for path in _modules():
        lines = path.read_text().count("\n")
        assert lines <= 400, f"{path.relative_to(PACKAGE)} has {lines} lines"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                size = node.end_lineno - node.lineno + 1
                assert size <= 250, f"{path.relative_to(PACKAGE)}: class {node.name} has {size} lines"


# -- import cycles ---------------------------------------------------------------------------


def _module_names(package: Path) -> dict[str, Path]:
    """Dotted module name (``vk_adam.lora.peft``; a package by its own name) -> file."""
    names = {}
    for path in package.rglob("*.py"):
        if "_spirv" in path.parts:
            continue
        parts = [package.name, *path.relative_to(package).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _imports(name: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """(module of the package, line) for each import in ``path``: at module level, in a function
    (a lazy import pointing back is a cycle all the same) and under ``if TYPE_CHECKING``. ``from X
    import y`` counts X, or X.y when that is a module; a parent package imported implicitly does
    not count."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                if f"{target}.{alias.name}" in modules:
                    yield f"{target}.{alias.name}", node.lineno
                elif target in modules:
                    yield target, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    yield alias.name, node.lineno


def import_cycles(package: Path) -> list[str]:
    """Each import cycle among the modules of ``package``, one per strongly connected set of
    modules, as ``a (line 3) -> b (line 40) -> a``: the line of each import on the way."""
    modules = _module_names(package)
    graph: dict[str, dict[str, int]] = {name: {} for name in modules}
    for name, path in modules.items():
        for target, line in _imports(name, path, modules):
            if target != name:
                graph[name].setdefault(target, line)
    # Tarjan's strongly connected components, iteratively.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    cycles = []
    for component in components:
        # The shortest way from the first module back to itself, inside the component.
        start, inside = component[0], set(component)
        came_from: dict[str, str] = {}
        queue = deque([start])
        while start not in came_from:
            node = queue.popleft()
            for target in sorted(graph[node]):
                if target in inside and target not in came_from:
                    came_from[target] = node
                    queue.append(target)
        way = [start]
        while way[-1] != start or len(way) == 1:
            way.append(came_from[way[-1]])
        way.reverse()
        steps = [f"{a} (line {graph[a][b]})" for a, b in itertools.pairwise(way)]
        others = sorted(inside - set(way))
        also = f" (in one knot with {', '.join(others)})" if others else ""
        cycles.append(" -> ".join([*steps, start]) + also)
    return cycles


def test_no_import_cycles():
    cycles = import_cycles(PACKAGE)
    assert not cycles, "import cycles (move what both sides share into a module of its own):\n" + "\n".join(
        cycles
    )


def test_import_cycles_are_found_through_lazy_and_relative_imports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .a import A\n")
    (pkg / "sub" / "a.py").write_text("from ..top import T\n\nA = 1\n")
    (pkg / "top.py").write_text("T = 1\n\n\ndef f():\n    from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("import pkg.top\n")
    (pkg / "ok.py").write_text("from . import top\nfrom .sub.a import A\n")
    assert import_cycles(pkg) == ["pkg.sub.b (line 1) -> pkg.top (line 5) -> pkg.sub.b"]


def test_import_vk_adam_is_cheap_and_every_public_name_resolves():
    """The public names load on first use (pytest imports the package for its plugin in every
    session), and each one is there."""
    import subprocess
    import sys

    code = (
        "import sys, vk_adam\n"
        "heavy = [m for m in ('numpy', 'ml_dtypes', 'kp', 'vk_adam._optim') if m in sys.modules]\n"
        "missing = [n for n in vk_adam.__all__ if n not in dir(vk_adam) or getattr(vk_adam, n) is None]\n"
        "print(heavy, missing, vk_adam.lora.__name__, hasattr(vk_adam, 'no_such_name'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "[]", "vk_adam.lora", "False"]
