"""The device side of an optimizer: each group's buffers on the runtime, the pipelines bound to
them, and the ops of one step.

A group of NumPy params is one flat buffer set (param, grad, one buffer per state; see
``layout``), updated by one dispatch. A param that is a kp tensor the application owns is its
own buffer set: kp binds whole buffers, so one dispatch cannot span several of them (pass one
flat kp tensor to get one dispatch for many logical tensors, as ``vk_adam.lora`` does).

Every step is bracketed by memory barriers over the buffers it touches. Per-step values are
push constants recorded with each dispatch, so one pipeline serves every step. How each buffer
stores its values (16-bit params, compressed state) is ``storage``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import _formats as fmt
from .._rules import ShaderVariant, UpdateRule
from .._runtime import Dispatch, Runtime, Upload, copy_regions_op, host_view
from .binding import MAX_PIPELINES_PER_SET, bind_pipelines, check_room
from .buffers import BufferSet, Group, GroupBuilder
from .clipping import GradClipper, initial_status
from .clock import Clock
from .host.imports import HostImports
from .host.to_device import HostToDevice
from .host.to_host import DeviceToHost
from .storage import Storage, rng_base_key, rng_key
from .variants import LoopShape, loop_shape

__all__ = ["MAX_PIPELINES_PER_SET", "BufferSet", "DeviceGroups", "Group"]


Array = npt.NDArray[Any]
F32 = npt.NDArray[np.float32]


def constant_values(rule: UpdateRule, group: Group) -> Sequence[float]:
    """The rule's constant push-constant values of a captured step (``capturable_constants``),
    length-checked."""
    assert rule.capturable_constants is not None, "checked when the optimizer was made"
    values = rule.capturable_constants(group.options)
    if len(values) != group.variant.hyper_count:
        raise ValueError(
            f"rule {rule.name!r}: capturable_constants() returned {len(values)} values, but the "
            f"shader variant {str(group.variant.spirv)!r} declares hyper_count="
            f"{group.variant.hyper_count}; they must agree"
        )
    return values


def push_values(rule: UpdateRule, group: Group, step: int) -> Sequence[float]:
    """The rule's per-step push-constant values for ``group``'s next step, as the rule computed
    them (float64; each buffer set's ``_push`` rounds them once to float32), length-checked."""
    values = rule.push_constants(group.options, step)
    if len(values) != group.variant.hyper_count:
        raise ValueError(
            f"rule {rule.name!r}: push_constants() returned {len(values)} values, but the "
            f"shader variant {str(group.variant.spirv)!r} declares hyper_count="
            f"{group.variant.hyper_count}; they must agree (and match the shader's "
            "VK_ADAM_HYPER_COUNT)"
        )
    return values


class DeviceGroups:
    """Every group's buffers and pipelines on one runtime, and the ops of one step.

    ``groups``: checked param-group dicts. ``clip``: clip gradients by global norm on the
    device (``max_norm`` is set by the optimizer). ``drain`` waits for every submitted step:
    called before a pipeline is destroyed."""

    def __init__(
        self,
        rt: Runtime,
        rule: UpdateRule,
        groups: Sequence[dict[str, Any]],
        zero_grad: bool,
        skip_nonfinite: bool,
        *,
        clip: bool = False,
        drain: Callable[[], None],
        storage: Storage | None = None,
        capturable: bool = False,
    ) -> None:
        self.rt, self.rule = rt, rule
        self.storage = storage or Storage()
        self.seed = self.storage.seed
        # The quantization tables of 8-bit state (made with the first 8-bit buffer set: 514 KiB),
        # and stand-ins for bindings a buffer set's formats leave unused (every binding the
        # shader declares must be valid): `unused` at writable ones, `no_tables` at the tables'
        # read-only one. One buffer at both would be written by one dispatch (as far as
        # synchronization validation knows) and read by the next with no barrier between.
        self.qtable: Any = None
        self._uploaded = False
        self.unused = rt.buffer(np.zeros(4, np.float32))
        self.no_tables = rt.buffer(np.zeros(4, np.uint32))
        # The loop's shape here, and the 8-bit path's variant (variants.py: $VK_ADAM_* knobs).
        self.shape: LoopShape = loop_shape(rt.facts.info)
        self.zero_grad, self.skip_nonfinite = zero_grad, skip_nonfinite
        self.drain = drain
        self.builder = GroupBuilder(rt, rule, zero_grad, self.storage)
        self.groups: list[Group] = []
        self.clipper: GradClipper | None = None
        self._clip = clip
        self.max_norm = 0.0
        #: A gradient scale the host sets for the next synchronous steps (ZeRO-1's clipping
        #: factor from the norm over every rank); None: the device's own (1.0 or clipping's).
        self.grad_scale: float | None = None
        self._barrier_before: Any = None  # ops over every buffer a step touches (rebuilt on rebind)
        self._barrier_after: Any = None
        if self.storage.windows and len(self.storage.windows) != len(groups):  # ZeRO-1's shards
            raise ValueError(f"{len(self.storage.windows)} windows for {len(groups)} param groups")
        self.groups = [self.builder.add_group(options) for options in groups]
        self._sets = [bset for group in self.groups for bset in group.sets]  # in dispatch order
        slots = 0  # each chunk's slot among every set's chunks (clipping's partial sums)
        for bset in self._sets:
            bset.slot, slots = slots, slots + len(bset.chunks)
        #: capturable: the step count and lrs on the device (``clock``), in the status buffer.
        self.clock = Clock(rt, [g.options["lr"] for g in self.groups], slots) if capturable else None
        # skip flag, gradient scale, last norm (clipping.py), the clock; every update shader reads it
        self.status = rt.buffer(self.clock.initial_words() if self.clock is not None else initial_status())
        # Its host staging words, read and written around every synchronous step (a view of
        # the buffer's host memory, valid while the buffer lives: as long as these groups).
        self.status_words = host_view(self.status)
        self._status_barrier = rt.barrier_op([self.status])
        self.status_download = rt.download_op([self.status])
        # Captured steps with skip_nonfinite and no clipping: the check pass only ever sets the
        # skip flag, so each step first copies a 0 over it (recorded once, right every time).
        self._clear_skip: list[Any] = []
        if self.clock is not None and skip_nonfinite and not clip:
            zero = rt.buffer(np.zeros(1, np.uint32))
            self._clear_skip = [copy_regions_op(zero, self.status, [(0, 0, 4)]), self._status_barrier]
        if self._clip:
            self.clipper = GradClipper(rt, self.status, slots, skip_nonfinite)
        #: device_params: the set's own param buffers hold the params (``HostToDevice.held``).
        self.holds_params = False
        for group in self.groups:
            for bset in group.sets:
                self.bind(group, bset, bset.grad)
        #: How NumPy groups' arrays reach the device (imports or staging memory) and the ops that
        #: bring them back, and what the host copies into the arrays after a step's wait.
        has_host = any(g.host_mode for g in self.groups)
        imports = HostImports(rt.manager, rt.facts.info.host_import_alignment, has_host)
        self.to_host = DeviceToHost(rt)
        self.to_device = HostToDevice(rt, imports, self.to_host)
        # The update may read a NumPy gradient's import itself only with no pass over the
        # gradients before it. Every NumPy group's shader can write an imported param: the rule
        # checks accept only shaders of this harness, which declares VK_ADAM_PARAM_OUT.
        self.to_device.grads_bindable = self.clipper is None and not skip_nonfinite
        self.to_device.param_out_groups = {gi for gi, g in enumerate(self.groups) if g.host_mode}
        # The runtime fills only a buffer's host staging copy: upload every buffer once.
        rt.run([rt.upload_op(rt.buffers)])
        self._uploaded = True  # buffers made from here on upload themselves

    # -- construction ------------------------------------------------------------------------

    def bind(
        self,
        group: Group,
        bset: BufferSet,
        grad: Any,
        *,
        recording: bool = False,
        param: Any = None,
        n: int = 0,
        host: bool = False,
    ) -> None:
        """Make the pipelines bound to this grad buffer (and ``param`` of ``n`` elements, if not
        the set's own; ``host``: host arrays' imports) current (``binding``)."""
        bind_pipelines(self, group, bset, grad, recording, param, n, host)

    def hold_params(self) -> None:
        """``device_params``: the set's own param buffers hold the params from now on."""
        self.holds_params = True
        self.to_device.hold_params()

    def forget_barriers(self) -> None:
        """The buffers a step touches changed (a new gradient buffer bound): rebuild the barriers."""
        self._barrier_before = self._barrier_after = None

    def _barriers(self) -> tuple[Any, Any]:
        """Barrier ops over every buffer a step touches, before it (after earlier uploads, the
        application's shaders, earlier steps) and after it. Built once per binding."""
        if self._barrier_before is None:
            buffers = [
                t
                for g in self.groups
                for b in g.sets
                for t in (
                    b.param,
                    b.bound_grad,
                    *b.state.values(),
                    *b.absmax.values(),
                    b.master,
                    b.bound_param,
                )
                if t is not None
            ]
            extra = [self.clipper.partials] if self.clipper is not None else []
            # the stand-ins (bound at unused bindings) and the tables: order them too
            buffers += [self.unused, self.no_tables, *([self.qtable] if self.qtable is not None else [])]
            self._barrier_before = self.rt.barrier_op([*buffers, self.status, *extra])
            self._barrier_after = self.rt.barrier_op(buffers)
        return self._barrier_before, self._barrier_after

    def quant_tables(self) -> Any:
        """The quantization-table buffer of 8-bit state, made on first use; uploaded with every
        buffer at the end of construction, or here when made after it."""
        if self.qtable is None:
            self.qtable = self.rt.buffer(fmt.quant_tables())
            if self._uploaded:
                self.rt.run([self.rt.upload_op([self.qtable])])
        return self.qtable

    # -- one step --------------------------------------------------------------------------

    def ops(
        self, prepared: list[list[Any]] | None, *, recording: bool = False, status: bool = False
    ) -> tuple[list[Any], int, int]:
        """The ops of one step over the checked gradients ``prepared`` (and the indices of its
        first and last update op, as :meth:`step_ops`): this step's push constants, its inputs
        staged (uploads, copies, or bound device grads). ``status``: a synchronous step (the host
        sets the status; NumPy arrays may be copied in place); ``recording``: ``record_step``'s
        (no upload: the application's sequence runs it later).

        The caller makes sure no submitted work still reads the staging memory written here."""
        pushes = self.pushes()
        upload = self.stage_inputs(prepared, recording=recording, direct=status)
        if status:
            upload += self.stage_status()
        return self.step_ops([] if recording else upload, pushes)

    def stage_inputs(
        self, prepared: list[list[Any]] | None, *, recording: bool = False, direct: bool = False
    ) -> list[Any]:
        """Stage host params/grads (``to_device``), rebind device grads; return buffers to upload.
        ``direct``: a synchronous step, whose large NumPy arrays the GPU may copy where they lie.

        The caller makes sure no submitted work still reads the staging memory written here."""
        if prepared is not None:  # a refusal must come before any staging memory is written
            device_grads = [
                (bset, g)
                for gi, group in enumerate(self.groups)
                if not group.host_mode
                for bset, g in zip(group.sets, prepared[gi], strict=True)
                if not isinstance(g, np.ndarray)
            ]
            if device_grads:
                check_room(device_grads)
        upload = self.to_device.stage(self.groups, prepared, direct)
        for gi, group in enumerate(self.groups):
            if group.host_mode:
                self._bind_host_param(gi, group)
                continue
            grads = prepared[gi] if prepared is not None else None
            for pi, bset in enumerate(group.sets):
                g = grads[pi] if grads is not None else bset.grad
                if isinstance(g, np.ndarray):
                    host_view(bset.grad)[:] = g.reshape(-1)
                    upload.append(bset.grad)
                    g = bset.grad
                # a recorded step pins its pipelines (``bset.recorded``, keyed by the grad's id)
                if g is not bset.bound_grad or (recording and id(g) not in bset.recorded):
                    self.bind(group, bset, g, recording=recording)
        return upload

    def _bind_host_param(self, gi: int, group: Group) -> None:
        """Bind the param tensor each buffer set's update of a NumPy group uses this step
        (``to_device.bound``) and set its element count in the push constants (made by
        ``pushes``, before this)."""
        for k, bset in enumerate(group.sets):
            param, n, grad = self.to_device.bound.get((gi, k), (bset.param, bset.n, bset.grad))
            if param is not bset.bound_param or grad is not bset.bound_grad:
                self.bind(group, bset, grad, param=param, n=n, host=True)
            if bset.pushes and len(bset.chunks) == 1:
                bset.pushes[0].view(np.uint32)[0] = n

    def stage_status(self) -> list[Any]:
        """The status buffer if a synchronous step's host sets it (skip flag, ``grad_scale``).
        A captured step's clock lives there: the step clears the skip flag itself (``_clear_skip``)."""
        if self.clock is not None or (not self.skip_nonfinite and self.grad_scale is None):
            return []
        words = self.status_words
        if self.skip_nonfinite:
            words[0] = 0
        if self.grad_scale is not None:
            words.view(np.float32)[1] = self.grad_scale
        return [self.status]

    def pushes(self) -> list[list[Array]]:
        """The next step's push constants, one array per chunk of each buffer set. Computed before
        any staging memory is written: a rule whose packing fails then changes nothing."""
        out: list[list[Array]] = []
        for group in self.groups:  # the rule's values depend on the group and step only
            if self.clock is not None:  # captured: the constant values; the step is the device's
                values = constant_values(self.rule, group)
                out += [self._push(group, bset, values, None) for bset in group.sets]
                continue
            values = push_values(self.rule, group, group.step + 1)
            out += [self._push(group, bset, values, group.step + 1) for bset in group.sets]
        return out

    def push_words(self, variant: ShaderVariant) -> int:
        """uint n, the rule's floats, and the uint rng key."""
        return 2 + variant.hyper_count

    def step_ops(
        self, upload: Sequence[Any], pushes: Sequence[Sequence[Array]]
    ) -> tuple[list[Any], int, int]:
        """The ops of the next step, and the span of its GPU work: the index of the first op
        after the upload (clipping's passes, else the first update dispatch) and the index just
        past the last update dispatch (for timestamps: one before each op, one after the last)."""
        before, after = self._barriers()
        ops = [before]
        if upload:
            ops.append(Upload(upload))
        ops += self.to_device.copy_in
        first = len(ops) if self.clipper is not None else -1
        if self.clipper is not None or self.skip_nonfinite:
            ops += self._clear_skip
            ops += [op for bset in self._sets for op in bset.check_ops]
            if self.clipper is not None:
                ops += self.clipper.finish_ops(self.max_norm)
            # The host reads the verdict after the wait; the update dispatches read the status
            # (verdict, gradient scale) on the GPU. A captured step's host learns it from the
            # step count instead (stepping.py).
            if self.skip_nonfinite and self.clock is None:
                ops.append(self.status_download)
            ops.append(self._status_barrier)
        first = first if first >= 0 else len(ops)
        # With no upload in the step, the barrier before it already orders every dispatch after
        # earlier writes to its buffers (an upload needs kp's own barrier per dispatch). The
        # runtime makes each kp dispatch op when it records the step (push constants are copied
        # into an op when it is made, so these are made anew each step).
        ordered = not upload and not self.to_device.copy_in
        ops += [
            Dispatch(algo, push, ordered)
            for b, set_pushes in zip(self._sets, pushes, strict=True)
            for algo, push in zip(b.update_algos, set_pushes, strict=True)
        ]
        last = len(ops)
        ops.append(after)
        ops += self.to_device.copy_out
        return ops, first, last

    def _push(self, group: Group, bset: BufferSet, values: Sequence[float], step: int | None) -> list[Array]:
        if not bset.pushes:  # made once; each chunk's n (and a zero rng key) never change
            for chunk in bset.chunks:
                push = np.zeros(self.push_words(group.variant), np.float32)
                push.view(np.uint32)[0] = chunk.count
                bset.pushes.append(push)
            bset.push_rng = len(bset.pushes[0]) > 1 + len(values) and bset.format.mode == fmt.MODE_STOCHASTIC
        # NumPy rounds each float64 value once to float32 (as astype would), with no array
        # made per step: a step's host time is mostly such overhead.
        if step is None:  # captured: the base key; the device mixes in its step and the offset
            for push in bset.pushes:
                push[1 : 1 + len(values)] = values
                if bset.push_rng:
                    push.view(np.uint32)[-1] = rng_base_key(self.seed, bset.index, bset.window)
            return bset.pushes
        key = rng_key(self.seed, bset.index, bset.window, step) if bset.push_rng else 0
        for chunk, push in zip(bset.chunks, bset.pushes, strict=True):
            push[1 : 1 + len(values)] = values
            if bset.push_rng:  # the rng key: a chunk's stream is its set's from its first element on
                push.view(np.uint32)[-1] = fmt.offset_key(key, chunk.start)
        return bset.pushes

    def zero_grads(self) -> None:
        """Zero every bound gradient buffer that has host memory (the caller drains first)."""
        buffers = [b.bound_grad for g in self.groups for b in g.sets if self.rt.has_host_copy(b.bound_grad)]
        for grad in buffers:
            host_view(grad)[:] = 0
        if buffers:
            self.rt.run([self.rt.upload_op(buffers)])

    def dispatches_per_step(self) -> int:
        return sum(len(b.chunks) for b in self._sets)
