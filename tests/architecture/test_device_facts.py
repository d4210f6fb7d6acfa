"""Device facts in one place, enforced (docs/architecture.md, "Limits are read, never assumed"):
every module-level constant of vk_adam/ is defined in one module (a Vulkan bit, a limit, a
specialization constant id, an environment variable's name), no two specialization constants
share an id, and only the facts modules (``_runtime/limits.py`` reads a kp properties dict,
``_runtime/facts.py`` asks the device for it) read a limit from one. No Vulkan device needed."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import fields

from vk_adam._runtime.limits import _KP_KEYS, DeviceLimits

from .test_architecture import EXAMPLE_APPLICATION, PACKAGE

#: A constant's name: upper case, private or not (``MAX_WORKGROUPS``, ``_KP_KEYS``).
CONSTANT = re.compile(r"_?[A-Z][A-Z0-9_]*")
#: The modules that may read a device's limits from a kp properties dict, or ask kp for one.
FACTS_MODULES = ("_runtime/limits.py", "_runtime/facts.py")
#: kp's keys of the limits and features (``DeviceLimits``' fields as kp spells them), and the
#: timestamp period (a Vulkan limit DeviceFacts holds); the device's name is not a limit.
LIMIT_KEYS = frozenset(
    {_KP_KEYS.get(f.name, f.name) for f in fields(DeviceLimits)} - {"device_name", "assumed"}
) | {"timestamp_period"}


def _sources() -> dict[str, str]:
    """vk_adam/'s modules (path relative to the package -> source), without the resident
    example the demo runs: an application's code, which defines and reads what an application
    does (test_architecture.py, rule 2)."""
    return {
        str(p.relative_to(PACKAGE)): p.read_text()
        for p in sorted(PACKAGE.rglob("*.py"))
        if "_spirv" not in p.parts and p.relative_to(PACKAGE).parts[:3] != EXAMPLE_APPLICATION
    }


def _is_type(node: ast.AnnAssign | ast.Assign) -> bool:
    """A type alias or type variable (``F32 = npt.NDArray[np.float32]``, ``_T = TypeVar("_T")``):
    a module's own spelling of a type, not a constant."""
    if isinstance(node, ast.AnnAssign) and ast.unparse(node.annotation).endswith("TypeAlias"):
        return True
    value = node.value
    if isinstance(value, ast.Subscript):
        return True
    return isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] in ("TypeVar", "NewType")


def constants(source: str) -> Iterator[tuple[str, int, ast.expr | None]]:
    """(name, line, value) of each constant a module's top level assigns (tuple targets too)."""
    for node in ast.parse(source).body:
        if not isinstance(node, ast.Assign | ast.AnnAssign) or _is_type(node):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            names = target.elts if isinstance(target, ast.Tuple) else [target]
            for i, name in enumerate(names):
                if isinstance(name, ast.Name) and CONSTANT.fullmatch(name.id):
                    value = node.value
                    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
                        value = value.elts[i]
                    yield name.id, node.lineno, value


def second_definitions(sources: Mapping[str, str]) -> list[str]:
    """Each constant defined in more than one module, with every place, and each specialization
    constant id (``*_SPEC_ID``) that two names give."""
    places: dict[str, list[str]] = defaultdict(list)
    spec_ids: dict[object, dict[str, str]] = defaultdict(dict)
    for rel, source in sources.items():
        for name, line, value in constants(source):
            places[name].append(f"{rel}:{line}")
            if name.endswith("_SPEC_ID") and value is not None:
                spec_ids[ast.literal_eval(value)].setdefault(name, f"{rel}:{line}")
    found = [f"{name} is defined in {', '.join(p)}" for name, p in sorted(places.items()) if len(p) > 1]
    for spec_id, names in sorted(spec_ids.items(), key=lambda item: str(item[0])):
        if len(names) > 1:
            found.append(
                f"specialization constant {spec_id} is {' and '.join(f'{n} ({w})' for n, w in names.items())}"
            )
    return found


def _line(source: str, wanted: str) -> int:
    return next(line for name, line, _ in constants(source) if name == wanted)


def property_reads(rel: str, source: str) -> list[str]:
    """Each place in module ``rel`` outside the facts modules that asks kp for a device's
    properties dict or reads a limit from one (a subscript or ``.get`` with a limit's key)."""
    if rel in FACTS_MODULES:
        return []
    found = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        key = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "get_device_properties":
                found.append(f"{rel}:{line} calls get_device_properties()")
            elif node.func.attr == "get" and node.args and isinstance(node.args[0], ast.Constant):
                key = node.args[0].value
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
        if isinstance(key, str) and key in LIMIT_KEYS:
            found.append(f"{rel}:{line} reads {key!r}")
    return sorted(found, key=lambda place: int(place.split(":")[1].split()[0]))


def test_every_constant_is_defined_once():
    """A Vulkan bit, limit, specialization constant id or variable name has one definition;
    another module imports it (``variants.py`` imports ``SUBGROUP_ARITHMETIC`` from _runtime)."""
    assert not second_definitions(_sources())


def test_only_the_facts_modules_read_device_properties():
    """Every limit reaches a decision through ``DeviceFacts`` (or ``DeviceLimits``), never from a
    kp properties dict read again somewhere else."""
    found = [place for rel, source in _sources().items() for place in property_reads(rel, source)]
    assert not found, found
    assert LIMIT_KEYS >= {"max_storage_buffer_range", "max_work_group_invocations", "subgroup_size"}


def test_a_planted_second_definition_is_caught():
    """The rule fails on the mistakes it exists for: Vulkan bits declared again beside the code
    that tests them, the workgroup-size spec id copied, and a new spec id that takes one in use.
    A module's own type alias passes."""
    sources = _sources()
    assert not second_definitions(sources)
    variants, limits, runtime = (
        sources[f] for f in ("_optim/variants.py", "_runtime/limits.py", "_runtime/runtime.py")
    )
    lines = variants.count("\n")
    sources["_optim/variants.py"] = variants + (
        "F32 = npt.NDArray[np.float32]\n"
        "STAGE_COMPUTE, SUBGROUP_BASIC = 0x20, 0x1\n"
        "WORKGROUP_SIZE_SPEC_ID = 25\n"
        "PLANTED_SPEC_ID = 26\n"
    )
    assert second_definitions(sources) == [
        f"STAGE_COMPUTE is defined in _optim/variants.py:{lines + 2}, "
        f"_runtime/limits.py:{_line(limits, 'STAGE_COMPUTE')}",
        f"SUBGROUP_BASIC is defined in _optim/variants.py:{lines + 2}, "
        f"_runtime/limits.py:{_line(limits, 'SUBGROUP_BASIC')}",
        f"WORKGROUP_SIZE_SPEC_ID is defined in _optim/variants.py:{lines + 3}, "
        f"_runtime/runtime.py:{_line(runtime, 'WORKGROUP_SIZE_SPEC_ID')}",
        f"specialization constant 26 is PARAM_OUT_SPEC_ID (_optim/variants.py:"
        f"{_line(variants, 'PARAM_OUT_SPEC_ID')}) and PLANTED_SPEC_ID (_optim/variants.py:{lines + 4})",
    ]


def test_a_planted_property_read_is_caught():
    """A module that asks kp for the properties again and reads a limit from them fails, with
    the place; reading a limit through the facts passes."""
    buffers = (PACKAGE / "_optim" / "buffers.py").read_text()
    assert not property_reads("_optim/buffers.py", buffers)
    lines = buffers.count("\n")  # the def is 3 lines on, after two blank lines
    planted = buffers + (
        "\n\ndef _peek(rt, props):\n"
        "    own = rt.manager.get_device_properties()\n"
        "    return own['max_storage_buffer_range'], props.get('subgroup_size', 0)\n"
        "    return rt.facts.max_binding_bytes, props['device_name']\n"
    )
    assert property_reads("_optim/buffers.py", planted) == [
        f"_optim/buffers.py:{lines + 4} calls get_device_properties()",
        f"_optim/buffers.py:{lines + 5} reads 'max_storage_buffer_range'",
        f"_optim/buffers.py:{lines + 5} reads 'subgroup_size'",
    ]
    assert not property_reads("_runtime/facts.py", planted)
