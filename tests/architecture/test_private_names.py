"""No code reaches into another package's private names: an attribute, keyword or ``getattr``
string with one leading underscore (``opt._dev``, ``Optimizer(..., _windows=)``) that a package
of vk_adam defines is used only inside that package. Code that wraps an optimizer uses its
documented interface instead (``Optimizer.internals()``, docs/architecture.md). Checked over
vk_adam/ and over the code that uses vk-adam as an application does (benchmarks/, examples/);
tests/ is counted (``python -m tests.architecture.test_private_names``), not held to it. By
reading the source (AST): no Vulkan device needed.

What counts as defined by a package: the private names its modules define at module level and
in class bodies (functions, classes, assignments), the attributes they set on ``self``/``cls``,
and the private parameters of their functions. A use on ``self``, ``cls`` or ``super()`` is a
class's own (or its base class's, by inheritance) and passes; so does a name the using package
defines too (the check reads no types: a name two packages define is each one's own).
"""

from __future__ import annotations

import ast
import sys

from .test_architecture import PACKAGE, _modules, _part

ROOT = PACKAGE.parent
#: Folders of code that uses vk-adam as an application does, held to the rule too: their source
#: is read, never run (tests/docs/test_docs.py: no test runs a benchmark script).
APPLICATIONS = tuple("benchmarks examples".split())
#: Uses that remain, each in a file whose owner changes it (the fix named); this list only
#: shrinks (an entry no longer found fails), and is empty now: a new use is fixed, not listed.
#: (path from the repository root, name): why.
KNOWN: dict[tuple[str, str], str] = {}
#: What a receiver is when a class uses its own (or an inherited) attribute.
OWN_RECEIVERS = frozenset({"self", "cls"})
#: Built-ins that take an attribute's name as a string.
NAMED_ACCESS = frozenset({"getattr", "setattr", "hasattr", "delattr"})


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def private_names(source: str) -> set[str]:
    """The private names a module defines: module-level and class-level functions, classes and
    assignments, attributes set on ``self``/``cls``, and functions' private parameters."""
    tree = ast.parse(source)
    names: set[str] = set()
    bodies = [tree.body]
    while bodies:
        for node in bodies.pop():
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
                if isinstance(node, ast.ClassDef):
                    bodies.append(node.body)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.attr for t in targets for n in ast.walk(t) if _own_attribute(n))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            names.update(arg.arg for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs])
    return {n for n in names if _private(n)}


def _own_attribute(node: ast.AST) -> bool:
    """Whether ``node`` is an attribute of ``self`` or ``cls``."""
    if not isinstance(node, ast.Attribute):
        return False
    return isinstance(node.value, ast.Name) and node.value.id in OWN_RECEIVERS


def _own_receiver(node: ast.expr) -> bool:
    """Whether ``node`` is ``self``, ``cls`` or ``super()``."""
    if isinstance(node, ast.Name):
        return node.id in OWN_RECEIVERS
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def private_accesses(where: str, source: str, foreign: set[str]) -> list[str]:
    """Each use in ``source`` (the module at ``where``) of a name of ``foreign`` (the private
    names other packages define and its own does not): an attribute read or written on a
    receiver other than ``self``/``cls``/``super()``, a keyword argument, a ``getattr`` string."""
    found: list[tuple[int, int, str]] = []  # (line, column, what), sorted at the end
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in foreign and not _own_receiver(node.value):
            verb = "reads" if isinstance(node.ctx, ast.Load) else "writes"
            found.append((node.lineno, node.end_col_offset or 0, f"{verb} .{node.attr}"))
        elif isinstance(node, ast.Call):
            found += [(k.lineno, k.col_offset, f"passes {k.arg}=") for k in node.keywords if k.arg in foreign]
            if (
                isinstance(node.func, ast.Name)
                and node.func.id in NAMED_ACCESS
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in foreign
                and not _own_receiver(node.args[0])
            ):
                found.append((node.lineno, node.col_offset, f"{node.func.id}s {node.args[1].value!r}"))
    return [f"{where}:{line} {what}" for line, _, what in sorted(found)]


def definitions() -> dict[str, set[str]]:
    """Part of vk_adam (``_optim``, ``lora``, ``_formats``, ...) -> the private names it defines."""
    defined: dict[str, set[str]] = {}
    for path in _modules():
        defined.setdefault(_part(path), set()).update(private_names(path.read_text()))
    return defined


def accesses_in(folders: tuple[str, ...], defined: dict[str, set[str]] | None = None) -> list[str]:
    """Every use of another package's private name in ``folders`` (from the repository root):
    for a module of vk_adam, the names other parts define; for any other file (a benchmark, an
    example, a test), every private name of vk_adam that the file does not define itself."""
    defined = definitions() if defined is None else defined
    everything = set().union(*defined.values())
    found = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "_spirv" in path.parts:
                continue
            source = path.read_text()
            if folder == "vk_adam":
                own = _part(path)
                foreign = set().union(*(names for part, names in defined.items() if part != own))
                foreign -= defined[own]
            else:
                foreign = everything - private_names(source)
            found += private_accesses(str(path.relative_to(ROOT)), source, foreign)
    return found


def _known(access: str) -> tuple[str, str] | None:
    """The ``KNOWN`` entry an access is, if any."""
    where, _, what = access.partition(" ")
    name = what.split()[-1].strip(".='\"")
    key = (where.rpartition(":")[0], name)
    return key if key in KNOWN else None


def test_no_package_uses_another_packages_private_names():
    found = accesses_in(("vk_adam", *APPLICATIONS))
    new = [a for a in found if _known(a) is None]
    assert not new, (
        "another package's private name (use its public API, or Optimizer.internals(): "
        "docs/architecture.md):\n" + "\n".join(new)
    )
    stale = set(KNOWN) - {_known(a) for a in found}
    assert not stale, f"fixed: remove from KNOWN {sorted(stale)}"


def test_a_planted_private_access_is_caught():
    """The rule fails on the mistakes it exists for: a lora module reading an optimizer's
    ``_dev`` and ``_groups``, passing ``_windows=`` and ``getattr(opt, "_rt")``; an application's
    script (an example, a benchmark) reading ``_dev``. A class's own ``self._dev`` passes."""
    defined = definitions()
    foreign = set().union(*(n for part, n in defined.items() if part != "lora")) - defined["lora"]
    adapter = (PACKAGE / "lora" / "adapter.py").read_text()
    assert not private_accesses("lora/adapter.py", adapter, foreign)
    lines = adapter.count("\n")  # the def is 3 lines on, after two blank lines
    planted = adapter + (
        "\n\ndef _peek(optimizer, groups):\n"
        "    device, first = optimizer._dev, optimizer._groups[0]\n"
        "    Optimizer(groups, 'adamw', _windows=())\n"
        "    return getattr(optimizer, '_rt'), self._dev\n"
    )
    assert private_accesses("lora/adapter.py", planted, foreign) == [
        f"lora/adapter.py:{lines + 4} reads ._dev",
        f"lora/adapter.py:{lines + 4} reads ._groups",
        f"lora/adapter.py:{lines + 5} passes _windows=",
        f"lora/adapter.py:{lines + 6} getattrs '_rt'",
    ]
    script = "import vk_adam\nopt = vk_adam.AdamW([p])\nops = opt._dev.step_ops([], [])\n"
    everything = set().union(*defined.values())
    assert private_accesses("examples/timing.py", script, everything - private_names(script)) == [
        "examples/timing.py:3 reads ._dev"
    ]


def main() -> None:
    """Print the count of uses of another package's private names in each folder (and, with
    ``-v``, each one)."""
    defined = definitions()
    for folder in ("vk_adam", *APPLICATIONS, "tests"):
        found = accesses_in((folder,), defined)
        print(f"{folder}: {len(found)}")
        if "-v" in sys.argv:
            print("".join(f"  {a}\n" for a in found), end="")


if __name__ == "__main__":
    main()
