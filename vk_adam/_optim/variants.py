"""Which compiled shader an update dispatch runs on a device, and the shape of its loop.

Every rule shader is built twice (``vk_adam.shaderc``): ``<name>.spv`` runs on any device, and
``<name>.subgroups.spv`` reduces the block maxima of 8-bit state with ``subgroupMax`` instead of
shared-memory atomics and barriers. The host picks the subgroup variant by feature detection:
subgroup arithmetic supported in the compute stage, and a subgroup size the variant handles (a
block of 64 vec4s must split evenly over one subgroup). A rule whose package ships only the base
SPIR-V (compiled without ``vk_adam.shaderc``) runs that everywhere.

Knobs (environment variables, read when an optimizer is built), all bit-identical in results:

* ``VK_ADAM_SUBGROUPS``: ``1`` forces the subgroup variant (an error on a device that cannot run
  it; a rule built without it still runs its base variant), ``0`` forces the base variant; unset
  or ``auto``: detected.
* ``VK_ADAM_INT8_VEC4S`` (1 or 2): the 8-bit path's vec4s per invocation per tile (base
  variant), or blocks per subgroup per iteration (subgroup variant); default 1: fewer registers
  per invocation, so more invocations stay resident (the sweeps behind the default:
  ``benchmarks/results/h200-2026-12-02-bench/``, docs/formats.md).
* ``VK_ADAM_INT8_WORKGROUPS``: at most this many workgroups for the 8-bit path (the rest of the
  work is looped over); default by size: a quarter of the workgroups of one pass, so that each
  loops over at least four tiles, within 2048..32768 (the sweeps behind it:
  ``benchmarks/results/h100-2026-12-06-int8/``, ``benchmarks/results/h100-2026-12-07-grid/``).
* ``VK_ADAM_MAX_WORKGROUPS`` (``vk_adam/_runtime/facts.py``): a cap on every dispatch's
  workgroups, for tuning; unset, an update dispatch runs up to the device's
  ``maxComputeWorkGroupCount[0]`` (one workgroup per tile where it allows), vk-adam's other
  shaders up to 65535.
* ``VK_ADAM_VEC4S`` (1, 2 or 4): vec4s per invocation of the path without 8-bit state; default 1.
* ``VK_ADAM_WORKGROUP_SIZE`` (64, 128, 256, 512 or 1024, at most the device's limit): invocations
  per workgroup of the path without 8-bit state and of the subgroup variant's 8-bit path; default
  256. The base variant's 8-bit path always runs 256 (its shared block maxima assume it).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from .._errors import DeviceCapabilityError
from .._inputs import env_int
from .._rules import subgroup_spirv
from .._runtime import STAGE_COMPUTE, SUBGROUP_ARITHMETIC, SUBGROUP_BASIC, WORKGROUP_SIZE, DeviceInfo
from .storage import GroupFormat, uint_spec

__all__ = [
    "INT8_VEC4S_ENV",
    "INT8_WORKGROUPS_ENV",
    "PARAM_OUT_SPEC_ID",
    "SUBGROUPS_ENV",
    "VEC4S_ENV",
    "WORKGROUP_SIZE_ENV",
    "LoopShape",
    "UpdateLaunch",
    "loop_shape",
    "subgroup_size",
    "subgroup_spirv",
    "subgroup_unsupported",
    "update_launch",
]

SUBGROUPS_ENV = "VK_ADAM_SUBGROUPS"
INT8_VEC4S_ENV = "VK_ADAM_INT8_VEC4S"
INT8_WORKGROUPS_ENV = "VK_ADAM_INT8_WORKGROUPS"
VEC4S_ENV = "VK_ADAM_VEC4S"
WORKGROUP_SIZE_ENV = "VK_ADAM_WORKGROUP_SIZE"

#: Subgroup sizes the variant handles: 64 / size vec4s of a block per lane.
SUBGROUP_SIZES = (8, 16, 32, 64)
#: The specialization constant ``VK_ADAM_PARAM_OUT``: an fp32 update reads the param from the
#: master binding and writes both it and the param binding.
PARAM_OUT_SPEC_ID = 26
#: Workgroup sizes the knob takes, and the harness's own.
WORKGROUP_SIZES = (64, 128, 256, 512, 1024)
DEFAULT_WORKGROUP_SIZE = WORKGROUP_SIZE
#: Vec4s per 8-bit block (256 values).
BLOCK_VEC4S = 64
#: The 8-bit path's workgroup cap where $VK_ADAM_INT8_WORKGROUPS is unset: one pass's workgroups
#: over INT8_PASSES, within these bounds (LoopShape.int8_cap).
INT8_WORKGROUPS_MIN, INT8_WORKGROUPS_MAX = 2048, 32768
INT8_PASSES = 4


def subgroup_unsupported(device: DeviceInfo) -> str | None:
    """Why ``device`` cannot run the subgroup variant, or None when it can."""
    if device.subgroup_size == 0:
        return "the kp build does not report subgroup properties (a kp without vk-adam's patch 0015)"
    if not device.subgroup_stages & STAGE_COMPUTE:
        return "the device supports no subgroup operations in compute shaders"
    needed = SUBGROUP_BASIC | SUBGROUP_ARITHMETIC
    if device.subgroup_operations & needed != needed:
        return "the device supports no subgroup arithmetic"
    if device.subgroup_size not in SUBGROUP_SIZES:
        return f"its subgroup size is {device.subgroup_size}, not one of {SUBGROUP_SIZES}"
    return None


def subgroup_size(device: DeviceInfo) -> int:
    """The subgroup size the 8-bit path's subgroup variant runs with on ``device``, or 0 for the
    base variant (see ``$VK_ADAM_SUBGROUPS`` in the module docstring)."""
    raw = os.environ.get(SUBGROUPS_ENV, "").strip().lower()
    if raw not in ("", "auto", "0", "1"):
        raise ValueError(f"${SUBGROUPS_ENV} must be 0, 1 or auto (got {raw!r})")
    if raw == "0":
        return 0
    reason = subgroup_unsupported(device)
    if reason is None:
        return device.subgroup_size
    if raw == "1":
        raise DeviceCapabilityError(
            f"${SUBGROUPS_ENV}=1, but {device.name} cannot run the subgroup variant: {reason}"
        )
    return 0


@dataclass(frozen=True)
class LoopShape:
    """How the update shader's loop is shaped on one device (specialization constants 22-25 and
    the workgroup count); see the module docstring for each knob."""

    vec4s: int = 1  # per invocation, no 8-bit state
    int8_vec4s: int = 1  # per invocation (base variant) or blocks per subgroup (subgroup variant)
    subgroup_size: int = 0  # 0: the base variant
    int8_workgroups: int | None = None  # the knob's cap; None: by size (int8_cap)
    workgroup_size: int = DEFAULT_WORKGROUP_SIZE  # where the loop allows any (see the knob)
    #: The device's limit: maxComputeWorkGroupInvocations and maxComputeWorkGroupSize[0], the smaller.
    max_workgroup_size: int = 1024

    def invocations(self, n: int, quantized: bool, subgroups: bool) -> int:
        """Invocations that cover ``n`` elements in one pass of the loop (before the workgroup
        cap): the host dispatches no workgroup that would find no work."""
        n_vec4 = -(-n // 4)
        if not quantized:
            per = self.vec4s
        elif subgroups:
            per = BLOCK_VEC4S // self.subgroup_size * self.int8_vec4s
        else:
            per = self.int8_vec4s
        return -(-n_vec4 // per)

    def int8_cap(self, items: int, threads: int) -> int:
        """The 8-bit path's workgroup cap for ``items`` invocations of ``threads`` per workgroup:
        the knob's, else a quarter of one pass's workgroups within INT8_WORKGROUPS_MIN..MAX. Few
        workgroups leave a partial last wave that weighs on a large step; one pass over a small
        step leaves each subgroup no loop to overlap its loads with the previous tile's math."""
        if self.int8_workgroups is not None:
            return self.int8_workgroups
        one_pass = -(-items // threads)
        return min(INT8_WORKGROUPS_MAX, max(INT8_WORKGROUPS_MIN, one_pass // INT8_PASSES))


@dataclass(frozen=True)
class UpdateLaunch:
    """What one buffer set's update pipeline runs: the shader (a built-in name or a ``.spv``
    path), specialization constants 16..26, invocations for one pass, invocations per workgroup
    and a workgroup cap."""

    spirv: str
    spec: tuple[float, ...]
    items: int
    max_groups: int | None
    threads: int = DEFAULT_WORKGROUP_SIZE


def update_launch(
    shape: LoopShape,
    spirv: str,
    form: GroupFormat,
    n: int,
    has_shader: Callable[[str], bool],
    spec_ids: Callable[[str], frozenset[int]] | None = None,
    param_out: bool = False,
) -> UpdateLaunch:
    """The launch of a rule shader ``spirv`` over ``n`` elements stored as ``form``. 8-bit state
    runs the subgroup variant where the device can (``shape.subgroup_size``) and the rule's
    package ships one. ``spec_ids`` is not read: every shader the rule checks accept declares
    the loop's constants (it stays for callers that still pass it)."""
    quantized = form.quantized
    subgroups = quantized and shape.subgroup_size > 0 and has_shader(subgroup_spirv(spirv))
    if subgroups:
        spirv = subgroup_spirv(spirv)
    if subgroups or not quantized:
        threads = shape.workgroup_size  # the knob's (loop_shape keeps it within the device's limit)
    elif shape.max_workgroup_size < DEFAULT_WORKGROUP_SIZE:
        raise DeviceCapabilityError(
            f"this device allows {shape.max_workgroup_size} invocations per workgroup "
            "(maxComputeWorkGroupInvocations / maxComputeWorkGroupSize[0]), and 8-bit state runs "
            "the base variant's loop here, whose shared block maxima need 256 (the subgroup "
            "variant cannot run on this device): use state_dtype='bfloat16' or 'float32'"
        )
    else:
        threads = DEFAULT_WORKGROUP_SIZE  # the base variant's 8-bit loop: its shared block maxima
    spec = (
        *form.spec(shape.int8_vec4s),
        *uint_spec(shape.vec4s, shape.subgroup_size or 32, threads, int(param_out)),
    )
    items = shape.invocations(n, quantized, subgroups)
    max_groups = shape.int8_cap(items, threads) if quantized else None
    return UpdateLaunch(spirv, spec, items, max_groups, threads)


def loop_shape(device: DeviceInfo) -> LoopShape:
    """The loop shape on ``device``: defaults per device kind, then the environment's knobs."""
    return LoopShape(
        vec4s=env_int(VEC4S_ENV, 1, (1, 2, 4)),
        int8_vec4s=env_int(INT8_VEC4S_ENV, 1, (1, 2)),
        subgroup_size=subgroup_size(device),
        int8_workgroups=env_int(INT8_WORKGROUPS_ENV, 0) or None,
        workgroup_size=_workgroup_size(device),
        max_workgroup_size=device.max_workgroup_size,
    )


def _workgroup_size(device: DeviceInfo) -> int:
    # The default: 256, or the largest size the device allows below it (the spec's minimum, 128).
    default = max(n for n in WORKGROUP_SIZES if n <= min(DEFAULT_WORKGROUP_SIZE, device.max_workgroup_size))
    size = env_int(WORKGROUP_SIZE_ENV, default, WORKGROUP_SIZES)
    if size > device.max_workgroup_size:
        raise DeviceCapabilityError(
            f"${WORKGROUP_SIZE_ENV}={size}, but {device.name} runs at most {device.max_workgroup_size} "
            "invocations per workgroup: pick a smaller size, or unset it for the default (256)"
        )
    return size
