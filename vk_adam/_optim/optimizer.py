"""The optimizer: param groups -> flat GPU buffers -> one dispatch per buffer set per step.

Layout. A group of NumPy params lives in one flat buffer set (param, grad, one per state
buffer), each param a view at an offset aligned to ``ALIGN_ELEMENTS``; the group is updated by
one dispatch. A param that is a kp tensor the application owns is its own buffer set (kp binds
whole buffers, so one dispatch cannot span several of them); pass one flat kp tensor to get one
dispatch for many logical tensors (see ``vk_adam.lora``).

Per-step values travel as push constants recorded with each dispatch (kp freezes push
constants at record time, so every step re-records its ops, which costs a few microseconds),
so one pipeline serves every step. Every Vulkan call goes through the runtime layer
(``vk_adam._runtime``); each step is bracketed by memory barriers over its buffers, so it runs
after earlier uploads, the application's shaders and earlier steps, and whatever comes next
sees its writes.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from .._errors import OptimizerClosedError
from .._inputs import convert_float_or_refuse
from .._rules.registry import check_rule_object, default_registry
from .._rules.rule import ShaderVariant, UpdateRule
from .._rules.spirv import load_spirv
from .._runtime import MAX_ELEMENTS, Pending, Runtime, is_kp_tensor

Array = npt.NDArray[Any]
F32 = npt.NDArray[np.float32]

#: Each param of a flat buffer starts at a multiple of this many elements (256 bytes: the
#: largest minStorageBufferOffsetAlignment Vulkan allows, and a whole number of vec4s).
ALIGN_ELEMENTS = 64
#: Pipelines cached per buffer set, one per distinct gradient buffer seen. Pipelines used by
#: ``record_step`` are never evicted (a recorded sequence may still use them), so at most this
#: many distinct gradient buffers can be recorded per buffer set.
MAX_PIPELINES_PER_SET = 8
#: At most this many asynchronous steps in flight; the next one waits for the oldest.
MAX_STEPS_IN_FLIGHT = 8


def _align(n: int) -> int:
    return -(-n // ALIGN_ELEMENTS) * ALIGN_ELEMENTS


@dataclass
class _BufferSet:
    """One dispatch's buffers: param, grad, state; ``n`` elements each."""

    param: Any
    grad: Any
    state: dict[str, Any]
    n: int
    update_algo: Any = None
    check_algo: Any = None
    check_op: Any = None  # the non-finite check's dispatch: its push constant (n) never changes
    bound_grad: Any = None  # the grad tensor the current algorithms are bound to
    # id(grad tensor) -> (grad tensor, update algorithm, check algorithm or None)
    pipelines: dict[int, tuple[Any, Any, Any]] = field(default_factory=dict)
    # ids of grad tensors whose pipelines a record_step used: never evicted
    recorded: set[int] = field(default_factory=set)


@dataclass
class _ParamSlot:
    """Where one user-visible param lives: buffer set, offset, shape."""

    buffer_set: int
    offset: int
    size: int
    shape: tuple[int, ...]
    host: F32 | None  # the user's NumPy array (None for kp tensors)


@dataclass
class _Group:
    options: dict[str, Any]  # the user-visible dict (also in param_groups)
    variant: ShaderVariant
    spec: tuple[float, ...]
    slots: list[_ParamSlot]
    sets: list[_BufferSet]
    host_mode: bool
    step: int = 0
    param_staging: list[F32] = field(default_factory=list)
    grad_staging: list[F32] = field(default_factory=list)
    validated: dict[str, Any] | None = None  # options as last validated (skip re-checks)


class StepHandle:
    """The result of :meth:`Optimizer.step`: already finished for a synchronous step.

    ``wait()`` blocks until the GPU finished the step (and, for NumPy params, copies the
    updated values into them). ``skipped`` is True when ``skip_nonfinite`` skipped the step.
    """

    __slots__ = ("_finalize", "_optimizer", "_pending", "done", "skipped", "step")

    def __init__(self, optimizer: Optimizer, step: int) -> None:
        self._optimizer = optimizer
        self._pending: Pending | None = None
        self._finalize: list[_Group] = []  # NumPy groups to copy back once the GPU is done
        self.done = False
        self.skipped = False
        self.step = step

    def wait(self) -> StepHandle:
        """Wait for this step (and every step issued before it) to finish on the GPU."""
        if not self.done:
            self._optimizer._wait_through(self)
        return self

    def __repr__(self) -> str:
        state = "skipped" if self.skipped else ("done" if self.done else "in flight")
        return f"<StepHandle step={self.step} {state}>"


class Optimizer:
    """An update rule from the registry, run on a Vulkan device through kp.

    ``params``: NumPy float32 arrays (updated in place), kp tensors on ``manager``, or param
    groups (dicts with ``"params"`` and per-group hyperparameters), as in torch.optim.
    ``rule``: a registered rule name or an :class:`UpdateRule`. Hyperparameters not given fall
    back to the rule's defaults.

    Keyword options:
      * ``device``: index or name substring (default ``$VK_ADAM_DEVICE``, else the first hardware
        GPU, else lavapipe). Ignored when ``manager`` is given.
      * ``manager``: an existing ``kp.Manager``; required when params are kp tensors.
      * ``zero_grad``: zero the device gradient buffer in the same pass (default True).
      * ``skip_nonfinite``: when any gradient holds NaN/Inf, skip the whole step on the GPU and
        leave params, state and step count untouched (default False: torch's behaviour, the
        NaN propagates).
    """

    def __init__(
        self,
        params: Iterable[Any],
        rule: str | UpdateRule,
        *,
        device: int | str | None = None,
        manager: Any = None,
        zero_grad: bool = True,
        skip_nonfinite: bool = False,
        profile: bool = False,
        **hyper: Any,
    ) -> None:
        self._closed = True  # until fully built: close() must be safe on a half-built object
        self.rule = rule if isinstance(rule, UpdateRule) else default_registry().get(rule)
        # A rule object passed directly gets the checks registration runs (a shader that binds
        # more state buffers than the rule declares would crash the driver).
        check_rule_object(self.rule)
        unknown = set(hyper) - set(self.rule.defaults)
        if unknown:
            raise TypeError(
                f"unknown hyperparameter(s) {sorted(unknown)} for rule {self.rule.name!r}; "
                f"it takes {sorted(self.rule.defaults)}"
            )
        self.defaults: dict[str, Any] = {**self.rule.defaults, **hyper}
        #: Whether each step zeroes the device gradient buffer in the same pass.
        self.zeroes_grad = bool(zero_grad)
        self.skip_nonfinite = bool(skip_nonfinite)
        groups = self._normalize_groups(params)
        for options in groups:
            self.rule.validate(options)

        has_kp = any(is_kp_tensor(p) for g in groups for p in g["params"])
        if has_kp and manager is None:
            raise ValueError(
                "params include kp tensors: pass the kp.Manager that created them as manager=..."
            )
        self._rt = Runtime(manager=manager, device=device)
        self.device = self._rt.device
        self._closed = False
        self._spirv: dict[str, bytes] = {}
        self._in_flight: deque[StepHandle] = deque()
        self._profile = profile
        #: With ``profile=True``: GPU time of the last synchronous step's update dispatches
        #: (Vulkan timestamps) and the host time of that step spent outside the driver's
        #: submit-and-wait (packing, recording, copies).
        self.last_gpu_seconds: float | None = None
        self.last_host_seconds: float | None = None
        self._barrier_before: Any = None  # ops over every buffer a step touches (rebuilt on rebind)
        self._barrier_after: Any = None
        try:
            self._status = self._rt.buffer(np.zeros(1, np.uint32))
            self._status_barrier = self._rt.barrier_op([self._status])
            self._status_download = self._rt.download_op([self._status])
            self._groups = [self._build_group(options) for options in groups]
            self._host_download = (
                self._rt.download_op([g.sets[0].param for g in self._groups if g.host_mode])
                if any(g.host_mode for g in self._groups)
                else None
            )
            # The runtime fills only a buffer's host staging copy: upload them all once.
            self._rt.run([self._rt.upload_op(self._rt.buffers)])
        except BaseException:
            self.close()
            raise
        self.param_groups: list[dict[str, Any]] = [g.options for g in self._groups]

    # -- construction --------------------------------------------------------------------

    def _normalize_groups(self, params: Iterable[Any]) -> list[dict[str, Any]]:
        if isinstance(params, np.ndarray) or is_kp_tensor(params):
            raise TypeError("params must be a list of arrays/tensors or of param-group dicts")
        items = list(params)
        if not items:
            raise ValueError("optimizer got an empty parameter list")
        raw = items if isinstance(items[0], Mapping) else [{"params": items}]
        groups = []
        for index, group in enumerate(raw):
            if not isinstance(group, Mapping) or "params" not in group:
                raise TypeError(f"param group {index} must be a dict with a 'params' key")
            plist = group["params"]
            plist = [plist] if isinstance(plist, np.ndarray) or is_kp_tensor(plist) else list(plist)
            if not plist:
                raise ValueError(f"param group {index} has no params")
            extra = {k: v for k, v in group.items() if k != "params"}
            groups.append({**self.defaults, **extra, "params": plist})
        seen: set[int] = set()
        for gi, group in enumerate(groups):
            for pi, p in enumerate(group["params"]):
                if id(p) in seen:
                    raise ValueError(f"param {pi} of group {gi} appears in more than one place")
                seen.add(id(p))
                if is_kp_tensor(p):
                    continue
                if not isinstance(p, np.ndarray):
                    raise TypeError(
                        f"param {pi} of group {gi} is a {type(p).__name__}; expected a NumPy "
                        "float32 array or a kp tensor"
                    )
                if p.dtype != np.float32 or not p.flags.c_contiguous or not p.flags.writeable:
                    raise TypeError(
                        f"param {pi} of group {gi} must be a writeable, C-contiguous float32 array "
                        f"(got dtype {p.dtype}, contiguous={p.flags.c_contiguous}, "
                        f"writeable={p.flags.writeable}): vk-adam updates params in place, so "
                        "convert it once with np.ascontiguousarray(p, dtype=np.float32) and keep "
                        "that array"
                    )
                if p.size == 0:
                    raise ValueError(f"param {pi} of group {gi} is empty")
        return groups

    def _new_tensor(self, data: Array) -> Any:
        return self._rt.buffer(data)

    def _shader(self, name: str) -> bytes:
        if name not in self._spirv:
            self._spirv[name] = load_spirv(name)
        return self._spirv[name]

    def _build_group(self, options: dict[str, Any]) -> _Group:
        variant = self.rule.variant_for(options)
        spec = (float(self.zeroes_grad), *(float(s) for s in self.rule.spec_constants(options)))
        params = options["params"]
        host_mode = not is_kp_tensor(params[0])
        if any(is_kp_tensor(p) == host_mode for p in params):
            raise TypeError("a param group must hold either NumPy arrays or kp tensors, not both")
        group = _Group(options, variant, spec, [], [], host_mode)
        if host_mode:
            offset = 0
            for p in params:
                group.slots.append(_ParamSlot(0, offset, p.size, tuple(p.shape), p))
                offset += _align(p.size)
            if offset > MAX_ELEMENTS:
                raise ValueError(f"a param group holds {offset} elements; at most {MAX_ELEMENTS}")
            flat = np.zeros(offset, np.float32)
            for slot in group.slots:
                assert slot.host is not None
                flat[slot.offset : slot.offset + slot.size] = slot.host.reshape(-1)
            bset = _BufferSet(
                self._new_tensor(flat),
                self._new_tensor(np.zeros(offset, np.float32)),
                self._new_state(variant, offset),
                offset,
            )
            group.sets.append(bset)
            group.param_staging.append(bset.param.data())
            group.grad_staging.append(bset.grad.data())
        else:
            for index, p in enumerate(params):
                n = int(p.size())
                if n > MAX_ELEMENTS:
                    raise ValueError(f"kp tensor {index} holds {n} elements; at most {MAX_ELEMENTS}")
                if self._rt.has_host_copy(p) and p.data().dtype != np.float32:
                    raise TypeError(f"kp tensor param {index} is {p.data().dtype}; vk-adam needs float32")
                grad = self._new_tensor(np.zeros(n, np.float32))
                group.slots.append(_ParamSlot(index, 0, n, (n,), None))
                group.sets.append(_BufferSet(p, grad, self._new_state(variant, n), n))
        for bset in group.sets:
            self._bind(group, bset, bset.grad)
        return group

    def _new_state(self, variant: ShaderVariant, n: int) -> dict[str, Any]:
        return {s.name: self._new_tensor(np.full(n, s.initial_value, np.float32)) for s in variant.state}

    def _bind(self, group: _Group, bset: _BufferSet, grad: Any, *, recording: bool = False) -> None:
        """Make the pipelines bound to this grad buffer current (kp binds buffers at creation).

        Pipelines are cached per grad buffer (an application may alternate a few). A pipeline
        is destroyed only when no submitted step still uses it (the optimizer drains first) and
        no ``record_step`` used it (the application's sequence may still be unevaluated).
        """
        key = id(grad)
        cached = bset.pipelines.get(key)
        if cached is None:
            if len(bset.pipelines) >= MAX_PIPELINES_PER_SET:
                evictable = [k for k in bset.pipelines if k not in bset.recorded]
                if not evictable:
                    raise ValueError(
                        f"a param buffer was stepped with more than {MAX_PIPELINES_PER_SET} distinct "
                        "gradient buffers through record_step; their pipelines must outlive the "
                        "sequences you recorded, so no more can be bound. Reuse a few gradient "
                        "buffers (for example opt.grad_buffer()), or create a new optimizer"
                    )
                self._drain()
                for k in evictable:
                    _grad, *algos = bset.pipelines.pop(k)
                    for algo in algos:
                        if algo is not None:
                            self._rt.destroy_pipeline(algo)
            tensors = [bset.param, grad, self._status, *(bset.state[s.name] for s in group.variant.state)]
            update = self._rt.pipeline(
                tensors,
                self._shader(str(group.variant.spirv)),
                -(-bset.n // 4),  # one vec4 per invocation
                group.spec,
                1 + group.variant.hyper_count,
            )
            check = None
            if self.skip_nonfinite:
                check = self._rt.pipeline(
                    [grad, self._status], self._shader("nonfinite_check"), bset.n, (), 1
                )
            cached = (grad, update, check)
            bset.pipelines[key] = cached
        if recording:
            bset.recorded.add(key)
        if bset.bound_grad is not grad:
            self._barrier_before = self._barrier_after = None
        _, bset.update_algo, bset.check_algo = cached
        if bset.check_algo is not None:
            bset.check_op = self._rt.dispatch_op(
                bset.check_algo, np.array([bset.n], np.uint32).view(np.float32)
            )
        bset.bound_grad = grad

    def _step_barriers(self) -> tuple[Any, Any]:
        """Barrier ops over every buffer a step touches: one before the step (after earlier
        uploads, the application's shaders and earlier steps), one after it (for whatever the
        queue runs next). Built once per binding, reused every step."""
        if self._barrier_before is None:
            buffers = [
                t for g in self._groups for b in g.sets for t in (b.param, b.bound_grad, *b.state.values())
            ]
            self._barrier_before = self._rt.barrier_op([*buffers, self._status])
            self._barrier_after = self._rt.barrier_op(buffers)
        return self._barrier_before, self._barrier_after

    # -- stepping ------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise OptimizerClosedError("this optimizer was closed; create a new one")

    def _prepare_grads(self, grads: Sequence[Any] | None) -> list[list[Any]] | None:
        """Validate every gradient before anything is written; per group, per param."""
        if grads is None:
            return None
        if isinstance(grads, np.ndarray) or is_kp_tensor(grads):
            grads = [grads]
        grads = list(grads)
        expected = sum(len(g.slots) for g in self._groups)
        if len(grads) != expected:
            raise ValueError(
                f"step() got {len(grads)} gradient(s) for {expected} param(s); pass one per param, "
                "in the order of the params (group by group)"
            )
        out: list[list[Any]] = []
        k = 0
        for gi, group in enumerate(self._groups):
            prepared = []
            for pi, slot in enumerate(group.slots):
                g = grads[k]
                name = f"param {pi} of group {gi}" if len(self._groups) > 1 else f"param {pi}"
                k += 1
                if is_kp_tensor(g):
                    if group.host_mode:
                        raise TypeError(f"grad for {name} is a kp tensor but the param is a NumPy array")
                    if int(g.size()) != slot.size:
                        raise ValueError(
                            f"grad for {name} has {int(g.size())} elements; the param has {slot.size}"
                        )
                    prepared.append(g)
                    continue
                g = np.asarray(g)
                if g.shape != slot.shape and not (not group.host_mode and g.size == slot.size):
                    raise ValueError(f"grad for {name} has shape {g.shape}; the param has shape {slot.shape}")
                if g.dtype != np.float32:
                    convert_float_or_refuse(
                        f"grad for {name}", g.dtype, np.issubdtype(g.dtype, np.floating), stacklevel=3
                    )
                    g = g.astype(np.float32)
                prepared.append(g)
            out.append(prepared)
        return out

    def step(self, grads: Sequence[Any] | None = None, *, wait: bool = True) -> StepHandle:
        """Apply one update to every param.

        ``grads``: one per param in param order; NumPy arrays (uploaded) or kp tensors already
        on the device (bound directly, no host copy). ``None`` uses the gradients already in
        the optimizer's device gradient buffers (:meth:`grad_buffer`), e.g. written there by
        the application's own shaders. A wrong count, shape or size raises ValueError and
        changes nothing.

        ``wait=False`` returns as soon as the work is submitted; the returned handle's
        ``wait()`` finishes it. Later steps are ordered after earlier ones on the GPU.
        """
        started = time.perf_counter()
        self._check_open()
        prepared = self._prepare_grads(grads)
        if not wait and self.skip_nonfinite:
            raise ValueError(
                "skip_nonfinite steps are synchronous (the host must learn whether the step was "
                "skipped before the next step's bias correction); use wait=True"
            )
        self._validate_options()
        if wait:
            return self._step_sync(prepared, started)
        return self._step_async(prepared)

    def _validate_options(self) -> None:
        """Re-check hyperparameters changed since the last step (e.g. by a schedule), before any
        GPU work, like torch's validation. Unchanged groups cost one dict comparison."""
        for group in self._groups:
            if group.options == group.validated:
                continue
            self.rule.validate(group.options)
            if (
                self.rule.variant_for(group.options) is not group.variant
                or (float(self.zeroes_grad), *(float(s) for s in self.rule.spec_constants(group.options)))
                != group.spec
            ):
                raise ValueError(
                    "options that select the shader (e.g. amsgrad, maximize, nesterov, momentum on/off) "
                    "cannot change after construction; create a new optimizer"
                )
            group.validated = dict(group.options)

    def record_step(self, sequence: Any, grads: Sequence[Any] | None = None) -> int:
        """Record the next step into ``sequence`` (the application's own kp.Sequence) without
        submitting it; return the step number recorded. For params on the device (kp tensors).

        This is the GPU-resident path of a Vulkan application: record forward, backward and
        this step into one sequence and submit it once; many steps can be recorded back to
        back. Each recorded step is bracketed by memory barriers over its buffers: it runs after
        everything recorded or submitted before it (e.g. the application's gradient shaders)
        and the application's next shader sees its writes. The step counter advances at record
        time: evaluate every recorded sequence, in order, exactly once. Gradients are the
        optimizer's gradient buffer (``grads=None``) or kp tensors; at most
        ``MAX_PIPELINES_PER_SET`` distinct gradient buffers per param buffer can be recorded
        (their pipelines live as long as the optimizer). NumPy params and gradients, and
        ``skip_nonfinite``, need the host between steps and are refused.
        """
        self._check_open()
        if any(g.host_mode for g in self._groups):
            raise TypeError("record_step needs params on the device (kp tensors); NumPy params use step()")
        if self.skip_nonfinite:
            raise ValueError("skip_nonfinite needs the host to read the check's result: use step()")
        prepared = self._prepare_grads(grads)
        if prepared is not None and any(isinstance(g, np.ndarray) for gs in prepared for g in gs):
            raise TypeError(
                "record_step takes gradients already on the device (kp tensors, or None for the "
                "optimizer's gradient buffer): a NumPy gradient would be uploaded when your sequence "
                "runs, after later calls may have overwritten it. Use step() for NumPy gradients"
            )
        self._validate_options()
        self._stage_inputs(prepared, recording=True)
        before, after = self._step_barriers()
        ops = [before]
        for group in self._groups:
            for bset in group.sets:
                ops.append(self._rt.dispatch_op(bset.update_algo, self._push(group, bset, group.step + 1)))
        ops.append(after)
        self._rt.record(sequence, ops)
        for group in self._groups:
            group.step += 1
        return self._groups[0].step

    def _stage_inputs(self, prepared: list[list[Any]] | None, *, recording: bool = False) -> list[Any]:
        """Copy host params/grads into staging, rebind device grads; return tensors to upload.

        The caller makes sure no submitted work still reads the staging memory written here."""
        upload: list[Any] = []
        for gi, group in enumerate(self._groups):
            grads = prepared[gi] if prepared is not None else None
            if group.host_mode:
                staging_p, staging_g = group.param_staging[0], group.grad_staging[0]
                for pi, slot in enumerate(group.slots):
                    assert slot.host is not None
                    staging_p[slot.offset : slot.offset + slot.size] = slot.host.reshape(-1)
                    if grads is not None:
                        staging_g[slot.offset : slot.offset + slot.size] = grads[pi].reshape(-1)
                bset = group.sets[0]
                upload += [bset.param, bset.grad] if grads is not None else [bset.param]
                continue
            for pi, bset in enumerate(group.sets):
                g = grads[pi] if grads is not None else bset.grad
                if isinstance(g, np.ndarray):
                    bset.grad.data()[:] = g.reshape(-1)
                    upload.append(bset.grad)
                    g = bset.grad
                if g is not bset.bound_grad or recording:
                    self._bind(group, bset, g, recording=recording)
        return upload

    def _push(self, group: _Group, bset: _BufferSet, step: int) -> Array:
        values = self.rule.push_constants(group.options, step)
        push = np.empty(1 + group.variant.hyper_count, np.float32)
        if len(values) != group.variant.hyper_count:
            raise ValueError(
                f"rule {self.rule.name!r}: push_constants() returned {len(values)} values, but the "
                f"shader variant {str(group.variant.spirv)!r} declares hyper_count="
                f"{group.variant.hyper_count}; they must agree (and match the shader's "
                "VK_ADAM_HYPER_COUNT)"
            )
        push.view(np.uint32)[0] = bset.n
        push[1:] = values
        return push

    def _step_ops(self, upload: list[Any]) -> tuple[list[Any], int]:
        """The ops of one step, and the index of its first update dispatch."""
        rt = self._rt
        before, after = self._step_barriers()
        ops = [before]
        if upload:
            ops.append(rt.upload_op(upload))
        if self.skip_nonfinite:
            for group in self._groups:
                for bset in group.sets:
                    ops.append(bset.check_op)
            # The host reads the verdict after the wait; the update dispatches read it on the GPU.
            ops += [self._status_download, self._status_barrier]
        first_dispatch = len(ops)
        for group in self._groups:
            for bset in group.sets:
                ops.append(rt.dispatch_op(bset.update_algo, self._push(group, bset, group.step + 1)))
        ops.append(after)
        if self._host_download is not None:
            ops.append(self._host_download)
        return ops, first_dispatch

    def _step_sync(self, prepared: list[list[Any]] | None, started: float) -> StepHandle:
        self._drain()
        if self.skip_nonfinite:
            self._status.data()[0] = 0
        upload = self._stage_inputs(prepared)
        if self.skip_nonfinite:
            upload.append(self._status)
        ops, first = self._step_ops(upload)
        eval_start = time.perf_counter()
        ticks = self._rt.run(ops, timestamps=self._profile)
        eval_seconds = time.perf_counter() - eval_start
        if ticks is not None:
            # One timestamp before the first op and one after each op.
            last = first + self.dispatches_per_step()
            self.last_gpu_seconds = (ticks[last] - ticks[first]) * self._rt.timestamp_period * 1e-9
        handle = StepHandle(self, self._groups[0].step + 1)
        handle.done = True
        handle.skipped = self.skip_nonfinite and int(self._status.data()[0]) != 0
        if not handle.skipped:
            for group in self._groups:
                group.step += 1
                self._copy_back(group)
        if self._profile:
            self.last_host_seconds = time.perf_counter() - started - eval_seconds
        return handle

    def _copy_back(self, group: _Group) -> None:
        if not group.host_mode:
            return
        staging = group.param_staging[0]
        for slot in group.slots:
            assert slot.host is not None
            slot.host.reshape(-1)[:] = staging[slot.offset : slot.offset + slot.size]

    def _step_async(self, prepared: list[list[Any]] | None) -> StepHandle:
        if len(self._in_flight) >= MAX_STEPS_IN_FLIGHT:
            self._in_flight[0].wait()
        writes_staging = any(g.host_mode for g in self._groups) or (
            prepared is not None and any(isinstance(g, np.ndarray) for gs in prepared for g in gs)
        )
        if writes_staging and self._in_flight:
            # A submitted step's upload may not have read the staging memory yet: rewriting it
            # now would change that step's inputs (each buffer has one staging copy).
            self._drain()
        upload = self._stage_inputs(prepared)
        handle = StepHandle(self, self._groups[0].step + 1)
        ops, _ = self._step_ops(upload)
        handle._pending = self._rt.submit(ops)  # one submission (patched kp)
        for group in self._groups:
            group.step += 1
            if group.host_mode:
                handle._finalize.append(group)
        self._in_flight.append(handle)
        return handle

    def _wait_through(self, target: StepHandle) -> None:
        while self._in_flight:
            handle = self._in_flight.popleft()
            if handle._pending is not None:
                handle._pending.wait()
                handle._pending = None
            for group in handle._finalize:
                self._copy_back(group)
            handle.done = True
            if handle is target:
                return

    def _drain(self) -> None:
        if self._in_flight:
            self._wait_through(self._in_flight[-1])

    def zero_grad(self) -> None:
        """Zero the device gradient buffers the next ``step()`` reads (torch's name; steps
        already do this in their own pass unless the optimizer was made with ``zero_grad=False``)."""
        self._check_open()
        self._drain()
        buffers = []
        for group in self._groups:
            for bset in group.sets:
                grad = bset.bound_grad
                if self._rt.has_host_copy(grad):
                    grad.data()[:] = 0
                    buffers.append(grad)
        if buffers:
            self._rt.run([self._rt.upload_op(buffers)])

    def synchronize(self) -> None:
        """Wait for every asynchronous step issued so far."""
        self._check_open()
        self._drain()

    # -- device buffers (for applications that stay on the GPU) ----------------------------

    def param_buffer(self, group: int = 0, index: int = 0) -> Any:
        """The kp tensor holding a buffer set's params (the flat buffer for NumPy groups)."""
        self._check_open()
        return self._groups[group].sets[index].param

    def grad_buffer(self, group: int = 0, index: int = 0) -> Any:
        """The kp tensor that ``step()`` (without grads) reads gradients from.

        Write gradients into it on the device (your own shaders), then call ``step()``.
        For NumPy groups it is the group's flat gradient buffer (see :meth:`param_offsets`).
        """
        self._check_open()
        return self._groups[group].sets[index].grad

    def param_offsets(self, group: int = 0) -> list[tuple[int, tuple[int, ...]]]:
        """(offset, shape) of each param of a NumPy group inside its flat buffers."""
        return [(s.offset, s.shape) for s in self._groups[group].slots]

    def dispatches_per_step(self) -> int:
        """How many update dispatches one step records (one per buffer set)."""
        return sum(len(g.sets) for g in self._groups)

    # -- state dict ------------------------------------------------------------------------

    def _all_slots(self) -> Iterator[tuple[int, _Group, _ParamSlot]]:
        index = 0
        for group in self._groups:
            for slot in group.slots:
                yield index, group, slot
                index += 1

    def state_dict(self) -> dict[str, Any]:
        """torch.optim's layout: ``{'state': {i: {'step', <state buffers>}}, 'param_groups'}``.

        State arrays are float32 copies shaped like their params; params that have not been
        stepped have no entry (as in torch).
        """
        self._check_open()
        self._drain()
        tensors = [t for g in self._groups for b in g.sets for t in b.state.values()]
        if tensors:
            self._rt.run([self._rt.download_op(tensors)])
        state: dict[int, dict[str, Any]] = {}
        for index, group, slot in self._all_slots():
            if group.step == 0:
                continue
            bset = group.sets[slot.buffer_set]
            entry: dict[str, Any] = {"step": float(group.step)}
            for s in group.variant.state:
                flat = bset.state[s.name].data()[slot.offset : slot.offset + slot.size]
                entry[s.name] = flat.reshape(slot.shape).copy()
            state[index] = entry
        groups = []
        start = 0
        for group in self._groups:
            opts = {k: v for k, v in group.options.items() if k != "params"}
            opts["params"] = list(range(start, start + len(group.slots)))
            start += len(group.slots)
            groups.append(opts)
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Load a :meth:`state_dict` (or torch.optim's, as NumPy). Checked fully before any
        change: on error nothing is modified."""
        self._check_open()
        if (
            not isinstance(state_dict, Mapping)
            or "state" not in state_dict
            or "param_groups" not in state_dict
        ):
            raise ValueError("a state dict has the keys 'state' and 'param_groups'")
        saved_groups = list(state_dict["param_groups"])
        if len(saved_groups) != len(self._groups):
            raise ValueError(
                f"loaded state dict has {len(saved_groups)} param group(s); this optimizer has "
                f"{len(self._groups)}"
            )
        new_options = []
        for gi, (saved, group) in enumerate(zip(saved_groups, self._groups, strict=True)):
            if len(saved["params"]) != len(group.slots):
                raise ValueError(
                    f"param group {gi} of the loaded state dict has {len(saved['params'])} params; "
                    f"this optimizer's has {len(group.slots)}"
                )
            options = {**group.options, **{k: v for k, v in saved.items() if k in self.rule.defaults}}
            if isinstance(options.get("betas"), list):
                options["betas"] = tuple(options["betas"])
            self.rule.validate(options)
            if (
                self.rule.variant_for(options) is not group.variant
                or (float(self.zeroes_grad), *(float(s) for s in self.rule.spec_constants(options)))
                != group.spec
            ):
                raise ValueError(
                    f"param group {gi} was saved with different shader options "
                    f"({ {k: saved.get(k) for k in self.rule.defaults} }); create the optimizer "
                    "with the same options as the one that saved it"
                )
            new_options.append(options)
        state = state_dict["state"]
        steps: list[int] = []
        writes: list[tuple[Any, int, Array]] = []
        params_flat = [(i, g, s) for i, g, s in self._all_slots()]
        for gi, group in enumerate(self._groups):
            ids = list(saved_groups[gi]["params"])
            group_steps = set()
            for local, saved_id in enumerate(ids):
                _, _, slot = params_flat[sum(len(g.slots) for g in self._groups[:gi]) + local]
                entry = state.get(saved_id, state.get(str(saved_id)))
                if entry is None:
                    group_steps.add(0)
                    for s in group.variant.state:
                        writes.append(
                            (
                                group.sets[slot.buffer_set].state[s.name],
                                slot.offset,
                                np.full(slot.size, s.initial_value, np.float32),
                            )
                        )
                    continue
                group_steps.add(int(float(np.asarray(entry.get("step", 0)))))
                for s in group.variant.state:
                    if s.name not in entry:
                        raise ValueError(f"state of param {saved_id} lacks {s.name!r}")
                    value = np.asarray(entry[s.name], dtype=np.float32)
                    if value.size != slot.size:
                        raise ValueError(
                            f"state {s.name!r} of param {saved_id} has {value.size} elements; "
                            f"the param has {slot.size}"
                        )
                    writes.append((group.sets[slot.buffer_set].state[s.name], slot.offset, value.reshape(-1)))
            if len(group_steps) > 1:
                raise ValueError(
                    f"param group {gi} has params at different steps {sorted(group_steps)}; "
                    "vk-adam keeps one step count per group"
                )
            steps.append(group_steps.pop() if group_steps else 0)
        # Everything checked: apply.
        self._drain()
        touched = []
        for tensor, offset, value in writes:
            tensor.data()[offset : offset + value.size] = value
            if tensor not in touched:
                touched.append(tensor)
        if touched:
            self._rt.run([self._rt.upload_op(touched)])
        for group, options, step in zip(self._groups, new_options, steps, strict=True):
            group.options.update({k: v for k, v in options.items() if k != "params"})
            group.step = step

    # -- lifetime ----------------------------------------------------------------------------

    def close(self) -> None:
        """Wait for in-flight work and free every Vulkan object this optimizer created."""
        runtime = getattr(self, "_rt", None)
        if runtime is None or runtime.closed:
            self._closed = True
            return
        if getattr(self, "_in_flight", None):
            try:
                self._drain()
            except Exception:  # closing must not raise on a broken device
                pass
        for group in getattr(self, "_groups", []):
            group.param_staging.clear()
            group.grad_staging.clear()
        self._barrier_before = self._barrier_after = None
        runtime.close()
        self._closed = True

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran; a closed optimizer refuses every call."""
        return self._closed

    def __enter__(self) -> Optimizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        groups = (
            ", ".join(
                f"{{n_params={len(g.slots)}, lr={g.options['lr']}, step={g.step}}}" for g in self._groups
            )
            if hasattr(self, "_groups")
            else "?"
        )
        return (
            f"{type(self).__name__}(rule={self.rule.name!r}, device={self.device.name!r}, groups=[{groups}])"
        )


__all__ = ["Optimizer", "StepHandle"]
