"""The layout docs/architecture.md describes, enforced: module sizes, imports that only point
down the layers (front -> layout and runtime -> kp), and no import cycles among the modules. No
Vulkan device needed."""

from __future__ import annotations

import ast
import itertools
from collections import deque
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "vk_adam"

# Layer of each top-level part of the package; a module may import its own part or a lower layer.
LAYERS = {
    "_errors": 0,
    "_inputs": 0,
    "_formats": 0,
    "shaderc": 0,
    "_validation": 0,
    "_values": 0,
    "_lifetime": 0,
    "_runtime": 1,
    "_rules": 1,
    "_optim": 2,
    "lora": 3,
    "schedules": 3,
    "testing": 3,
    "interop": 3,
    "pytest_plugin": 3,
    "_pytest_seeds": 3,
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


# -- one gateway to the device ----------------------------------------------------------------

#: Methods of kp objects (Manager, Sequence, Tensor, Algorithm, semaphores): called only in _runtime.
KP_METHODS = frozenset(
    "sequence tensor tensor_t algorithm eval eval_async eval_async_with eval_await get_timestamps "
    "timeline_semaphore get_device_properties".split()
)
#: Methods of kp tensors and objects with no arguments (other names take arguments there).
KP_NO_ARGUMENT_METHODS = frozenset("data size tensor_type is_init destroy".split())
#: The resident example the demo runs is an application's code: it drives kp itself, as the
#: Vulkan applications it shows do (docs/resident-training.md), and uses vk-adam like one.
EXAMPLE_APPLICATION = ("_commands", "demo", "resident_example")
#: Receivers that are not kp objects though they share method names (``torch.tensor``).
NOT_KP = frozenset({"torch", "np", "numpy"})
#: Packages of vk_adam that other packages enter through their face (``__init__.py``) only.
PACKAGES = ("_optim", "_rules", "_runtime", "distributed", "lora", "schedules", "testing", "_commands")
#: Sub-faces: a module below a package's face that the packages named may import (and only the
#: names it defines), because what it carries serves them alone (its docstring says why).
SUB_FACES = {("_optim", "sharding"): ("distributed",)}


def kp_violations(rel: Path, source: str) -> list[str]:
    """Each place in module ``rel`` (relative to the package) outside ``_runtime/`` that speaks
    to kp: an import of kp or of ``_runtime._kp``, any use of ``kp_module``, a kp ``Op*`` or
    ``Manager`` made, or a kp object's method called."""
    if rel.parts[0] == "_runtime" or rel.parts[:3] == EXAMPLE_APPLICATION:
        return []
    found = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import) and any(
            a.name == "kp" or a.name.startswith("kp.") for a in node.names
        ):
            found.append(f"{rel}:{line} imports kp")
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if not node.level and (module == "kp" or module.startswith("kp.")):
                found.append(f"{rel}:{line} imports kp")
            if module.endswith("_runtime._kp") or (
                module.endswith("_runtime") and any(a.name == "_kp" for a in node.names)
            ):
                found.append(f"{rel}:{line} imports _runtime._kp")
            if any(a.name == "kp_module" for a in node.names):
                found.append(f"{rel}:{line} imports kp_module")
        elif isinstance(node, ast.Name) and node.id == "kp_module":
            found.append(f"{rel}:{line} uses kp_module")
        elif isinstance(node, ast.Attribute) and node.attr == "kp_module":
            found.append(f"{rel}:{line} uses kp_module")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = node.func.attr
            if (name.startswith("Op") and name[2:3].isupper()) or name == "Manager":
                found.append(f"{rel}:{line} makes a kp {name}")
            elif isinstance(node.func.value, ast.Name) and node.func.value.id in NOT_KP:
                continue
            elif name in KP_METHODS or (
                name in KP_NO_ARGUMENT_METHODS and not node.args and not node.keywords
            ):
                found.append(f"{rel}:{line} calls .{name}() of a kp object")
    return found


def face_violations(rel: Path, source: str) -> list[str]:
    """Each import in module ``rel`` of another package's module below its face (``from
    .._optim.groups import x`` instead of ``from .._optim import x``), and each name imported from
    a face that the face does not define. A sub-face (``SUB_FACES``) counts as a face for the
    packages it serves, and as any module below the face for the others."""
    own = rel.parts[0].removesuffix(".py")
    depth = len(rel.parts) - 1
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level - 1 < depth:
                    continue  # inside its own package
                parts = (node.module or "").split(".")
            elif (node.module or "").startswith("vk_adam."):
                parts = (node.module or "").split(".")[1:]
            else:
                continue
            target = parts[0]
            if target == own or target not in PACKAGES:
                continue
            sub_face = tuple(parts) in SUB_FACES and own in SUB_FACES[tuple(parts)]
            if len(parts) > 1 and not sub_face:
                found.append(f"{rel}:{node.lineno} imports {'.'.join(parts)}: import from {target}'s face")
                continue
            face = _face_names(*parts)
            found += [
                f"{rel}:{node.lineno} imports {a.name} from {'.'.join(parts)}, which its face does not export"
                for a in node.names
                if a.name not in face
            ]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "vk_adam" and len(parts) > 2 and parts[1] in PACKAGES and parts[1] != own:
                    found.append(f"{rel}:{node.lineno} imports {alias.name}: import from {parts[1]}'s face")
    return found


def _face_names(package: str, sub_face: str | None = None) -> set[str]:
    """The names a package's ``__init__.py`` (or its sub-face module) defines or imports."""
    path = PACKAGE / package / (f"{sub_face}.py" if sub_face else "__init__.py")
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def test_only_the_runtime_speaks_to_kp():
    found = [v for p in _modules() for v in kp_violations(p.relative_to(PACKAGE), p.read_text())]
    assert not found, "kp is the runtime's alone (add what you need to vk_adam/_runtime):\n" + "\n".join(
        found
    )


def test_packages_are_entered_through_their_faces():
    found = [v for p in _modules() for v in face_violations(p.relative_to(PACKAGE), p.read_text())]
    assert not found, "\n".join(found)


def test_a_planted_kp_call_and_a_planted_private_import_are_caught():
    """The two rules fail on the mistakes they exist for: a kp op made in interop.py, and a
    lora module importing a private _optim module."""
    interop = (PACKAGE / "interop.py").read_text()
    planted = (
        interop
        + "\n\ndef _upload(mgr, tensor):\n    mgr.sequence().eval(kp_module().OpTensorSyncDevice([tensor]))\n"
    )
    found = kp_violations(Path("interop.py"), planted)
    assert any("makes a kp OpTensorSyncDevice" in v for v in found), found
    assert any("uses kp_module" in v for v in found), found
    assert any("calls .sequence()" in v for v in found), found
    assert not kp_violations(Path("interop.py"), interop)
    adapter = (PACKAGE / "lora" / "adapter.py").read_text()
    planted = adapter + "\nfrom .._optim.groups import prepare_grads\n"
    found = face_violations(Path("lora/adapter.py"), planted)
    assert found == [
        f"lora/adapter.py:{planted.count(chr(10))} imports _optim.groups: import from _optim's face"
    ]
    assert not face_violations(Path("lora/adapter.py"), adapter)


def test_a_sub_face_serves_only_its_packages():
    """``_optim.sharding`` is a face for ``distributed/`` and a private module for the others; the
    names that moved there are no longer on ``_optim``'s face."""
    zero = (PACKAGE / "distributed" / "_zero.py").read_text()
    assert not face_violations(Path("distributed/_zero.py"), zero)
    planted = zero + "\nfrom .._optim.sharding import no_such_name\nfrom .._optim import prepare_grads\n"
    lines = planted.count(chr(10))
    assert face_violations(Path("distributed/_zero.py"), planted) == [
        f"distributed/_zero.py:{lines - 1} imports no_such_name from _optim.sharding, which its face does "
        "not export",
        f"distributed/_zero.py:{lines} imports prepare_grads from _optim, which its face does not export",
    ]
    adapter = (PACKAGE / "lora" / "adapter.py").read_text()
    planted = adapter + "\nfrom .._optim.sharding import shard_optimizer\n"
    assert face_violations(Path("lora/adapter.py"), planted) == [
        f"lora/adapter.py:{planted.count(chr(10))} imports _optim.sharding: import from _optim's face"
    ]


#: Names on ``_optim``'s face that one package alone imports (or none: tests only), each with
#: the reason it stays until that package changes. The face carries what the public surface
#: re-exports and what more than one package needs; this list only shrinks.
ONE_PACKAGE = {
    "INT8_VEC4S_ENV": "_commands: the bench reports the loop-shape knobs set (bench/formats.py)",
    "INT8_WORKGROUPS_ENV": "_commands: as INT8_VEC4S_ENV",
    "SUBGROUPS_ENV": "_commands: as INT8_VEC4S_ENV",
    "VEC4S_ENV": "_commands: as INT8_VEC4S_ENV",
    "subgroup_unsupported": "cli: vk-adam info's 8-bit state line",
    "is_signed": "testing: the format check's 8-bit codes",
    "blocks": "lora: checkpoint_verify's absmax shapes",
    "initial_state": "tests/optim/test_build_memory.py imports it from the face (distributed: sharding)",
    "value_words": "as initial_state",
}


def _face_users(package: str) -> dict[str, set[str]]:
    """Name of ``package``'s face -> the parts of vk_adam that import it from the face."""
    users: dict[str, set[str]] = {}
    for path in _modules():
        own = _part(path)
        if own == package:
            continue
        depth = len(path.relative_to(PACKAGE).parts) - 1
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level and node.level - 1 >= depth:
                module = node.module or ""
            elif not node.level and (node.module or "").startswith("vk_adam."):
                module = (node.module or "").removeprefix("vk_adam.")
            else:
                continue
            if module == package:
                for alias in node.names:
                    users.setdefault(alias.name, set()).add(own)
    return users


def _all_of(path: Path) -> set[str]:
    """The names in a module's ``__all__``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            names.update(ast.literal_eval(node.value))
    return names


def _public_re_exports() -> set[str]:
    """The names in ``__all__`` of a public package's face (``vk_adam.testing``, ...)."""
    return set().union(*(_all_of(face) for face in PACKAGE.glob("[!_]*/__init__.py")))


def test_the_optim_face_carries_what_several_packages_need():
    """Every name ``_optim``'s face exports is re-exported by the public surface (``vk_adam`` or a
    public package), or imported by more than one package, or listed in ``ONE_PACKAGE``; and
    each listed name still is a one-package name (remove it once that changed)."""
    users, public = _face_users("_optim"), _public_re_exports()
    exported = _all_of(PACKAGE / "_optim" / "__init__.py")
    assert exported == _face_names("_optim") - {"__all__"}, "the face imports what __all__ leaves out"
    narrow = {
        name
        for name in exported
        if len(users.get(name, set())) < 2 and "__init__" not in users.get(name, set()) and name not in public
    }
    unlisted = narrow - set(ONE_PACKAGE)
    assert not unlisted, {name: sorted(users.get(name, set())) for name in unlisted}
    assert set(ONE_PACKAGE) - narrow == set(), "no longer one package's: remove from ONE_PACKAGE"


def test_modules_stay_readable():
    """A generous backstop, not a target: the rules above shape the code, not line counts."""
    for path in _modules():
        lines = path.read_text().count("\n")
        assert lines <= 600, f"{path.relative_to(PACKAGE)} has {lines} lines"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                size = node.end_lineno - node.lineno + 1
                assert size <= 400, f"{path.relative_to(PACKAGE)}: class {node.name} has {size} lines"


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
