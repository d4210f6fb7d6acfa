"""The layout docs/architecture.md describes, enforced: module sizes, and imports that only
point down the layers (front -> layout and runtime -> kp). No Vulkan device needed."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "vk_adam"

# Layer of each top-level part of the package; a module may import its own part or a lower layer.
LAYERS = {
    "_errors": 0,
    "_inputs": 0,
    "_formats": 0,
    "shaderc": 0,
    "_runtime": 1,
    "_rules": 1,
    "_optim": 2,
    "lora": 3,
    "schedules": 3,
    "testing": 3,
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


def test_no_module_over_400_lines_and_no_class_over_265():
    for path in _modules():
        lines = path.read_text().count("\n")
        assert lines <= 400, f"{path.relative_to(PACKAGE)} has {lines} lines"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                size = node.end_lineno - node.lineno + 1
                assert size <= 265, f"{path.relative_to(PACKAGE)}: class {node.name} has {size} lines"
