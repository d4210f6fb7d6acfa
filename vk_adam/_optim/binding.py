"""The pipelines of a buffer set: one update pipeline (and its gradient pre-pass) per gradient
buffer it was stepped with, cached, since kp binds buffers when a pipeline is made.

Split from ``device`` (the ops of a step) so that each reads in one sitting.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from .. import _formats as fmt
from .._errors import DeviceCapabilityError
from .._rules import MAX_RULE_SPEC_CONSTANTS, ShaderVariant, UpdateRule
from .._runtime import Runtime
from .buffers import BufferSet, Group, GroupBuilder
from .clipping import GradClipper
from .clock import Clock, clock_workgroups
from .storage import rng_offset, uint_spec
from .variants import LoopShape, update_launch
from .windows import ABSMAX, FP32, Chunk, param_bytes, state_bytes, window


class DeviceGroups(Protocol):
    """What binding needs of ``device.DeviceGroups`` (a protocol: ``device`` imports this module)."""

    rt: Runtime
    rule: UpdateRule
    builder: GroupBuilder
    clipper: GradClipper | None
    skip_nonfinite: bool
    status: Any
    unused: Any  # stand-in at writable bindings a set leaves unused
    no_tables: Any  # stand-in at the tables' binding (read-only) without 8-bit state
    shape: LoopShape
    drain: Callable[[], None]
    holds_params: bool  # device_params: the set's own param buffer is the param
    groups: list[Group]
    clock: Clock | None  # capturable: the step clock's words in the status buffer

    def push_words(self, variant: ShaderVariant) -> int: ...

    def quant_tables(self) -> Any: ...

    def forget_barriers(self) -> None: ...


#: Pipelines cached per buffer set, one per distinct gradient buffer seen. Pipelines used by
#: ``record_step`` are never evicted (a recorded sequence may still use them), so at most this
#: many distinct gradient buffers can be recorded per buffer set.
MAX_PIPELINES_PER_SET = 8


def gradient_prepass(
    dev: DeviceGroups, grad: Any, bset: BufferSet, chunk: Chunk, slot: int
) -> tuple[Any, Any]:
    """The pipeline and dispatch op of the pass over one chunk of a buffer set's gradients
    before its update (``slot``: the chunk's among the optimizer's), or (None, None): clipping's
    pass 1 (it also flags non-finite gradients), else ``skip_nonfinite``'s check."""
    grad_format = fmt.PARAM_FORMAT[bset.format.param]
    windows = _windows(dev, [(grad, param_bytes(bset.format)), (None, None)], bset, chunk)
    if dev.clipper is not None:
        return dev.clipper.sumsq_pipeline(grad, chunk.count, slot, grad_format, windows=windows)
    if not dev.skip_nonfinite:
        return None, None
    shader = dev.builder.shader("nonfinite_check")
    spec = dev.rt.sized_spec(uint_spec(grad_format))
    check = dev.rt.pipeline(
        [grad, dev.status], shader, chunk.count, spec, 1, threads=dev.rt.facts.threads, windows=windows
    )
    return check, dev.rt.dispatch_op(check, np.array([chunk.count], np.uint32).view(np.float32))


def _windows(
    dev: DeviceGroups, bindings: list[tuple[Any, tuple[int, int] | None]], bset: BufferSet, chunk: Chunk
) -> list[tuple[int, int]] | None:
    """Each binding's byte window for ``chunk`` (``bindings``: (buffer, bytes per element), or
    None for a buffer bound whole); None when the set is one chunk (every buffer bound whole)."""
    if len(bset.chunks) == 1:
        return None
    return [
        (0, 0) if per is None else window(dev.rt.buffer_bytes(buffer), per, chunk) for buffer, per in bindings
    ]


def bind_pipelines(
    dev: DeviceGroups,
    group: Group,
    bset: BufferSet,
    grad: Any,
    recording: bool,
    param: Any = None,
    n: int = 0,
    host: bool = False,
) -> None:
    """Make the pipelines bound to this grad buffer current (kp binds buffers at creation):
    one update pipeline (and pre-pass) per chunk of the set (``windows``); ``param``: another
    param tensor of ``n`` elements than the set's own (``host.to_device``; sets of one chunk).
    ``host``: ``param`` and ``grad`` may be host arrays' imports (``host.to_device``): the update
    never zeroes such a gradient (it is the application's array, not a gradient buffer), and
    with the device holding the params (``device_params``) it reads the set's own param buffer
    at the master binding and writes both (``VK_ADAM_PARAM_OUT``).

    Pipelines are cached per grad buffer (an application may alternate a few). A pipeline
    is destroyed only when no submitted step still uses it (drained first) and no
    ``record_step`` used it (the application's sequence may still be unevaluated).
    """
    key: int | tuple[int, ...]
    if param is None or param is bset.param:
        param, n, key = bset.param, bset.n, id(grad)
    else:
        key = (id(param), id(grad))
    host_grad = host and grad is not bset.grad
    param_out = host and param is not bset.param and dev.holds_params
    if host_grad or param_out:
        key = (id(param), id(grad), host_grad, param_out)
    cached = bset.pipelines.get(key)
    if cached is None:
        if len(bset.pipelines) >= MAX_PIPELINES_PER_SET:
            check_room([(bset, grad)])
            _evict(dev, bset)
        spans = bset.chunks if n == bset.n else [Chunk(0, n)]
        updates, checks, check_ops = [], [], []
        for i, chunk in enumerate(spans):
            updates.append(
                _update_pipeline(dev, group, bset, param, grad, chunk, host_grad, param_out, bset.slot + i)
            )
            check, op = gradient_prepass(dev, grad, bset, chunk, bset.slot + i)
            checks.append(check)
            check_ops.append(op)
        cached = (grad, updates, checks, check_ops)
        bset.pipelines[key] = cached
    if recording:
        bset.recorded.add(key)
    if bset.bound_grad is not grad or bset.bound_param is not param:
        dev.forget_barriers()
    _, bset.update_algos, _, bset.check_ops = cached
    bset.bound_grad, bset.bound_param = grad, param


def _update_pipeline(
    dev: DeviceGroups,
    group: Group,
    bset: BufferSet,
    param: Any,
    grad: Any,
    chunk: Chunk,
    host_grad: bool = False,
    param_out: bool = False,
    slot: int = 0,
) -> Any:
    """The update pipeline of one chunk of a buffer set, with ``param`` and ``grad`` bound;
    ``host_grad``: the grad is a host array's import, never zeroed; ``param_out``: the set's
    own param buffer at the master binding is the param read, ``param`` only written; ``slot``:
    the chunk's among every update dispatch of a step (its count's words in the clock)."""
    states = [bset.state[s.name] for s in group.variant.state]
    tensors = [param, grad, dev.status, *states]
    per_param = param_bytes(bset.format)
    bindings: list[tuple[Any, tuple[int, int] | None]] = [
        (param, per_param),
        (grad, per_param),
        (dev.status, None),
    ]
    bindings += list(zip(states, state_bytes(bset.format) or [FP32] * len(states), strict=True))
    spec = (0.0, *group.spec[1:]) if host_grad else group.spec  # constant 0: zero the grad
    master = bset.param if param_out else bset.master
    absmax = [bset.absmax.get(s.name) for s in group.variant.state]
    tables = dev.quant_tables() if bset.format.quantized else dev.no_tables
    tensors += [*(a or dev.unused for a in absmax), master or dev.unused, tables]
    bindings += [(a, ABSMAX) if a is not None else (dev.unused, None) for a in absmax]
    bindings += [
        (master, FP32) if master is not None else (dev.unused, None),
        (tables, None),
    ]
    padding = (0.0,) * (1 + MAX_RULE_SPEC_CONSTANTS - len(spec))
    rule_spirv, has_shader = str(group.variant.spirv), dev.builder.has_shader
    launch = update_launch(dev.shape, rule_spirv, bset.format, chunk.count, has_shader, param_out=param_out)
    spec = (*spec, *padding, *launch.spec)
    items, groups, threads = launch.items, launch.max_groups, launch.threads
    if dev.clock is not None:  # checked when the optimizer was made: the shader declares them
        # A power-of-two grid, the unit of the clock's count (clock.py); the loop covers the rest.
        needed = -(-items // threads)
        groups = clock_workgroups(needed if launch.max_groups is None else min(needed, launch.max_groups))
        items = groups * threads
        group_index = next(i for i, g in enumerate(dev.groups) if g is group)
        offset = rng_offset(bset.window, chunk.start)
        spec = (*spec, *dev.clock.spec(group_index, slot, groups, offset))
    bset.spirv, bset.spec = launch.spirv, tuple(spec)
    shader, push = dev.builder.shader(launch.spirv), dev.push_words(group.variant)
    if 4 * push > dev.rt.facts.max_push_bytes:
        raise DeviceCapabilityError(
            f"rule {group.variant.spirv}: its {4 * push} bytes of push constants exceed this device's "
            f"maxPushConstantsSize ({dev.rt.facts.max_push_bytes} bytes); the rule cannot run here"
        )
    if len(tensors) > dev.rt.facts.max_storage_buffers:
        # Checked here as well as in Runtime.pipeline so that the refusal names the rule: the
        # binding count is the rule's choice (5 + 2 per state buffer), not the caller's.
        states_n, room = len(group.variant.state), dev.rt.facts.max_storage_buffers
        fits = (
            f"a rule with at most {(room - 5) // 2} state buffers can"
            if room >= 5
            else "no rule can (each binds at least 5: param, grad, status, master, tables)"
        )
        raise DeviceCapabilityError(
            f"rule {dev.rule.name!r} binds {len(tensors)} storage buffers ({states_n} state "
            f"buffers: 5 + 2 x {states_n}), more than {dev.rt.facts.info.name} allows one compute "
            f"pipeline (maxPerStageDescriptorStorageBuffers / maxDescriptorSetStorageBuffers: "
            f"{room}); it cannot run here: {fits}"
        )
    windows = _windows(dev, bindings, bset, chunk)
    return dev.rt.pipeline(
        tensors, shader, items, spec, push, max_groups=groups, threads=threads, windows=windows, update=True
    )


def check_room(grads: Sequence[tuple[BufferSet, Any]]) -> None:
    """Refuse a new gradient buffer of a buffer set (each of ``grads``: a set and the gradient
    buffer it is to be stepped with) when every pipeline the set cached is pinned by record_step."""
    for bset, grad in grads:
        if (
            id(grad) not in bset.pipelines
            and len(bset.pipelines) >= MAX_PIPELINES_PER_SET
            and all(k in bset.recorded for k in bset.pipelines)
        ):
            raise ValueError(
                f"a param buffer was stepped with more than {MAX_PIPELINES_PER_SET} distinct "
                "gradient buffers through record_step; their pipelines must outlive the "
                "sequences you recorded, so no more can be bound. Reuse a few gradient "
                "buffers (for example opt.grad_buffer()), or create a new optimizer"
            )


def _evict(dev: DeviceGroups, bset: BufferSet) -> None:
    evictable = [k for k in bset.pipelines if k not in bset.recorded]
    dev.drain()
    for k in evictable:
        _grad, updates, checks, _ops = bset.pipelines.pop(k)
        for algo in [*updates, *checks]:
            if algo is not None:
                dev.rt.destroy_pipeline(algo)
