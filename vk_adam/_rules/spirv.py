"""Loading compiled shaders, and reading a SPIR-V module's interface (bindings, push constants).

The reflection is deliberately small: it reads exactly what a rule declares, so a plugin whose
shader disagrees with its declaration is rejected when it registers, not at its first step.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from pathlib import Path

from .._errors import ShaderMissingError
from ..shaderc import SUBGROUP_SUFFIX

SPIRV_DIR = Path(__file__).resolve().parent.parent / "_spirv"

_MAGIC = 0x07230203
# Opcodes and enums from the SPIR-V specification (unified1).
_OP_TYPE_INT, _OP_TYPE_FLOAT, _OP_TYPE_VECTOR = 21, 22, 23
_OP_TYPE_ARRAY, _OP_TYPE_RUNTIME_ARRAY, _OP_TYPE_STRUCT, _OP_TYPE_POINTER = 28, 29, 30, 32
_OP_CONSTANT, _OP_SPEC_CONSTANT, _OP_VARIABLE, _OP_DECORATE, _OP_MEMBER_DECORATE = 43, 50, 59, 71, 72
_DEC_ARRAY_STRIDE, _DEC_BINDING, _DEC_DESCRIPTOR_SET, _DEC_OFFSET, _DEC_SPEC_ID = 6, 33, 34, 35, 1
_STORAGE_PUSH_CONSTANT = 9


@dataclass(frozen=True)
class ShaderInterface:
    """What a compute shader expects from the host."""

    bindings: frozenset[int]  # binding numbers used in descriptor set 0
    push_constant_bytes: int  # 0 when the shader has no push-constant block
    spec_ids: frozenset[int]
    #: Size of the block at binding 2 (a rule's status buffer: skip flag and gradient scale);
    #: 0 when absent or not a plain struct.
    status_bytes: int = 0
    #: The default value of the harness's version mark (``VK_ADAM_HARNESS``, SpecId 31): the
    #: version of ``vk_adam_rule.glsl`` the shader was built against; 0 when it declares none.
    harness_version: int = 0


#: The version of ``vk_adam/include/vk_adam_rule.glsl`` (``VK_ADAM_HARNESS_VERSION``): the only
#: one whose shaders vk-adam runs.
HARNESS_VERSION = 11
#: Specialization-constant ids of the storage formats (16..21 formats, 22 the 8-bit loop's vec4s).
FORMAT_SPEC_IDS = frozenset(range(16, 23))
#: ``VK_ADAM_HARNESS``: declared by harness 8 and later, never supplied; its default value is
#: the harness's version (11: one rounding hash per two values; 10: an entry for every float's
#: top 16 bits, ordered bits in the signed map; 9: entries for the buckets of |x| only).
HARNESS_MARK_SPEC_ID = 31
#: Every specialization-constant id of the harness beyond 0: those the optimizer supplies (the
#: storage formats, the loop shape (23: vec4s per invocation; 24: the subgroup variant's
#: subgroup size; 25: the workgroup size), 26: VK_ADAM_PARAM_OUT, 27..30: the step clock of
#: captured steps) and the version mark.
HARNESS_SPEC_IDS = frozenset(range(16, HARNESS_MARK_SPEC_ID + 1))
#: The subgroup size, declared by the subgroup variant only.
SUBGROUP_SIZE_SPEC_ID = 24
#: The status block's bytes: skip flag and gradient scale.
STATUS_BYTES = 8


def is_current_harness(interface: ShaderInterface) -> bool:
    """Whether a rule shader was built against this vk-adam's harness (:data:`HARNESS_VERSION`):
    it declares every specialization constant the optimizer supplies (the subgroup size only in
    the subgroup variant), reads the gradient scale from its status block, and its version mark
    says this version. A shader built against an older ``vk_adam_rule.glsl`` lacks some of the
    constants, or (versions 8 and 9) marks its version: it would read the quantization table
    wrongly."""
    return (
        HARNESS_SPEC_IDS - {SUBGROUP_SIZE_SPEC_ID} <= interface.spec_ids
        and interface.status_bytes >= STATUS_BYTES
        and interface.harness_version == HARNESS_VERSION
    )


def subgroup_spirv(spirv: str | Path) -> str:
    """The subgroup variant of a rule shader (``vk_adam.shaderc`` builds both): a built-in name
    gets ``.subgroups``, a ``.spv`` path becomes ``<stem>.subgroups.spv`` in the same folder."""
    path = Path(spirv)
    if path.suffix != ".spv":
        return f"{spirv}{SUBGROUP_SUFFIX}"
    return str(path.with_name(f"{path.stem}{SUBGROUP_SUFFIX}.spv"))


def load_spirv(name_or_path: str | Path) -> bytes:
    """Return the SPIR-V of a built-in shader (by name) or of a ``.spv`` file (by path)."""
    path = Path(name_or_path)
    if path.suffix != ".spv":
        path = SPIRV_DIR / f"{name_or_path}.spv"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ShaderMissingError(
            f"compiled shader {path} is missing. Shaders are compiled when the package is built: "
            "reinstall it (`pip install .` or `bash scripts/setup.sh`) on a machine with "
            "glslang-tools and spirv-tools installed, or run `python build_shaders.py` in a checkout."
        ) from None
    if len(data) < 20 or len(data) % 4 or struct.unpack_from("<I", data)[0] != _MAGIC:
        raise ShaderMissingError(f"{path} is not a SPIR-V module (bad magic number or length)")
    return data


@functools.lru_cache(maxsize=256)
def reflect(spirv: bytes) -> ShaderInterface:
    """Read descriptor bindings (set 0), push-constant block size and spec-constant ids.

    Cached by content: parsing in Python would otherwise be most of an optimizer's construction,
    devices and pipelines being shared (the result is frozen)."""
    words = struct.unpack(f"<{len(spirv) // 4}I", spirv)
    if words[0] != _MAGIC:
        raise ValueError("not a SPIR-V module (bad magic number)")
    types: dict[int, tuple[int, ...]] = {}  # result id -> (opcode, operands...)
    constants: dict[int, int] = {}
    decorations: dict[tuple[int, int], int] = {}
    member_offsets: dict[tuple[int, int], int] = {}
    variables: list[tuple[int, int, int]] = []  # (type id, result id, storage class)
    spec_ids: set[int] = set()
    spec_defaults: dict[int, int] = {}  # result id of an OpSpecConstant -> its default (one word)
    mark_id = None  # the result id decorated SpecId HARNESS_MARK_SPEC_ID
    i = 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if count == 0:
            raise ValueError("malformed SPIR-V: zero-length instruction")
        ops = words[i + 1 : i + count]
        if opcode in (
            _OP_TYPE_INT,
            _OP_TYPE_FLOAT,
            _OP_TYPE_VECTOR,
            _OP_TYPE_ARRAY,
            _OP_TYPE_RUNTIME_ARRAY,
            _OP_TYPE_STRUCT,
            _OP_TYPE_POINTER,
        ):
            types[ops[0]] = (opcode, *ops[1:])
        elif opcode == _OP_CONSTANT:
            constants[ops[1]] = ops[2]
        elif opcode == _OP_SPEC_CONSTANT and len(ops) == 3:
            spec_defaults[ops[1]] = ops[2]
        elif opcode == _OP_VARIABLE:
            variables.append((ops[0], ops[1], ops[2]))
        elif opcode == _OP_DECORATE and len(ops) >= 3:
            decorations[(ops[0], ops[1])] = ops[2]
            if ops[1] == _DEC_SPEC_ID:
                spec_ids.add(ops[2])
                if ops[2] == HARNESS_MARK_SPEC_ID:
                    mark_id = ops[0]
        elif opcode == _OP_MEMBER_DECORATE and len(ops) >= 4 and ops[2] == _DEC_OFFSET:
            member_offsets[(ops[0], ops[1])] = ops[3]
        i += count

    def size_of(type_id: int) -> int:
        t = types[type_id]
        if t[0] in (_OP_TYPE_INT, _OP_TYPE_FLOAT):
            return t[1] // 8
        if t[0] == _OP_TYPE_VECTOR:
            return t[2] * size_of(t[1])
        if t[0] == _OP_TYPE_ARRAY:
            stride = decorations.get((type_id, _DEC_ARRAY_STRIDE), size_of(t[1]))
            return stride * constants[t[2]]
        if t[0] == _OP_TYPE_STRUCT:
            members = t[1:]
            return max(
                (member_offsets.get((type_id, k), 0) + size_of(m) for k, m in enumerate(members)),
                default=0,
            )
        raise ValueError(f"unsupported type in push-constant block (opcode {t[0]})")

    bindings: set[int] = set()
    push_bytes = status_bytes = 0
    for type_id, var_id, storage in variables:
        if storage == _STORAGE_PUSH_CONSTANT:
            pointee = types[type_id][2]
            push_bytes = size_of(pointee)
        binding = decorations.get((var_id, _DEC_BINDING))
        if binding is not None and decorations.get((var_id, _DEC_DESCRIPTOR_SET), 0) == 0:
            bindings.add(binding)
            if binding == 2:
                try:
                    status_bytes = max(status_bytes, size_of(types[type_id][2]))
                except (KeyError, ValueError):  # e.g. a runtime array: not the harness's block
                    pass
    version = spec_defaults.get(mark_id, 0) if mark_id is not None else 0
    return ShaderInterface(frozenset(bindings), push_bytes, frozenset(spec_ids), status_bytes, version)
