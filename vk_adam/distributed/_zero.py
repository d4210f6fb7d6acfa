"""ZeRO stage 1: each rank keeps the optimizer state of its own shard of the params only.

The wrapper owns the partition (``_shard``) and the collectives (``_comm``) and delegates the
math to an ordinary :class:`vk_adam.Optimizer` over this rank's shard: one param per piece of a
param group the shard holds, each a window of the group's whole buffer (``_optim.sharding.Window``),
so every rule, plugin, storage format and schedule works unchanged and takes exactly the update
one process would. One step:

1. every rank checks its gradients and hyperparameters; one all-reduce agrees that all did
   (``_comm.agree``), before anything changes;
2. reduce-scatter of the gradients (float32 sum, divided by the world size: the mean);
3. with clipping or ``skip_nonfinite``: one all-reduce of the shard's sum of squares and its
   count of non-finite values; the clipping factor ``min(1, max_norm / (norm + 1e-6))`` is
   computed as the device computes it and handed to the shard's optimizer;
4. the shard's update on this rank's Vulkan device (one dispatch per buffer set);
5. all-gather of the updated params, which every rank writes into its own copies.

Params that are kp tensors (an application's device buffers, or a LoRA adapter's) take the same
path; the GPU copies their gradients into the reduce-scatter's host buffer and the gathered
params back into them, straight to and from host memory it reads and writes (``_device``).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from .._lifetime import Closable
from .._optim import Optimizer, StepHandle
from .._optim.sharding import (
    SHARD_OPTIONS,
    InFlight,
    Window,
    check_options,
    prepare_grads,
    revalidate,
    shard_optimizer,
    spell_out_options,
    split_options,
)
from .._rules import UpdateRule
from .._runtime import DEVICE_ENV, list_devices
from ._access import ShardAccess
from ._comm import Communicator, agree, make_communicator
from ._device import (
    DeviceParams,
    adapter_params,
    check_collective_buffer,
    make_staging,
    taken_grad_buffers,
)
from ._mirror import StateMirror
from ._nccl import NcclOnVulkan, wanted
from ._plan import make_plan
from ._shard import Partition, device_for_rank
from ._state import ShardedStateDict

Array = npt.NDArray[Any]
_T = TypeVar("_T")

#: The phases of a step in ``last_timings``: agree (the all-reduce of every rank's checks),
#: staging (host copies: gradients into the reduce-scatter's buffer, the shard's inputs, params
#: out of and back from the all-gather; device params' GPU copies to and from those buffers;
#: NCCL's CUDA copies), reduce_scatter (with the division that makes the sum a mean),
#: norm (the all-reduce of clipping and the non-finite check), update (this rank's Vulkan step),
#: all_gather.
_PHASES = ("agree", "staging", "reduce_scatter", "norm", "update", "all_gather")
#: Steps of this optimizer are synchronous: their handles are done when returned.
_NO_FLIGHT = InFlight(lambda group: None)


class ZeroRedundancyOptimizer(Closable, ShardedStateDict, ShardAccess):
    """An update rule over replicated params whose optimizer state is sharded across ranks
    (ZeRO stage 1), in the shape of ``torch.distributed.optim.ZeroRedundancyOptimizer``.

    ``params``: what :class:`vk_adam.Optimizer` takes, the same shapes on every rank, updated in
    place: NumPy arrays (float32, float16 or bfloat16), float32 kp tensors on ``manager`` (the
    application's device buffers), or param groups of either; or a ``vk_adam.lora.LoRAAdapter``
    (with ``manager``: its weights move to that device, as ``adapter.optimizer(manager=)``
    moves them; else its host buffer). ``rule``: a registered rule name or an
    :class:`vk_adam.UpdateRule`. ``comm``: an mpi4py communicator; else ``process_group`` (a
    torch.distributed group; None: the default group). ``manager``: the ``kp.Manager`` (or
    ``vk_adam.DeviceHandle``) of kp tensor params; the shard is updated on it too. ``device``:
    the Vulkan device without ``manager``; default ``$VK_ADAM_DEVICE``, else the
    ``local_rank``-th hardware GPU when there are several, else the usual choice. The other
    keywords and hyperparameters are :class:`vk_adam.Optimizer`'s. Construction is collective:
    every rank calls it with the same arguments, and if any rank refuses them, all raise.
    """

    @spell_out_options(SHARD_OPTIONS)
    def __init__(
        self,
        params: Iterable[Any],
        rule: str | UpdateRule = "adamw",
        *,
        comm: Any = None,
        process_group: Any = None,
        manager: Any = None,
        **hyper: Any,
    ) -> None:
        self._closed = True
        options, hyper = split_options(hyper, SHARD_OPTIONS)
        if options["capturable"] is not False:
            raise ValueError(
                "capturable=True is not supported by ZeroRedundancyOptimizer: each ZeRO-1 step "
                "exchanges params between ranks on the host, so it cannot be recorded once and "
                "replayed; step it with step(), or use a single-process vk_adam.AdamW(..., "
                "capturable=True) for recorded steps"
            )
        self._inner: Optimizer | None = None
        self._device: DeviceParams | None = None
        self._nccl: NcclOnVulkan | None = None
        self._consolidated: StateMirror | None = None
        self._last_norm = float("nan")
        #: Seconds of the last step by phase (``_PHASES``) and in all ("total").
        self.last_timings: dict[str, float] = {}
        self._comm: Communicator = make_communicator(comm, process_group)
        self.rank, self.world_size = self._comm.rank, self._comm.size
        error: BaseException | None = None
        plan = None
        try:
            manager = check_options(None, manager)
            params = adapter_params(params, manager)
            plan = make_plan(
                params,
                rule,
                self.world_size,
                has_manager=manager is not None,
                zero_grad=options["zero_grad"],
                skip_nonfinite=options["skip_nonfinite"],
                clip_grad_norm=options["clip_grad_norm"],
                state_dtype=options["state_dtype"],
                stochastic_rounding=options["stochastic_rounding"],
                seed=options["seed"],
                hyper=hyper,
            )
        except Exception as exc:
            error = exc
        agree(self._comm, error, "ZeroRedundancyOptimizer()")
        assert plan is not None
        signatures = self._comm.all_gather_object(plan.signature())
        for r, other in enumerate(signatures):
            if other != signatures[0]:
                raise ValueError(
                    f"ZeroRedundancyOptimizer(): ranks 0 and {r} passed different params or options "
                    f"({signatures[0]} / {other}); every rank passes the same"
                )
        self.rule, self.defaults, self._groups = plan.rule, plan.defaults, plan.groups
        self._units, self._formats, self._storage = plan.units, plan.formats, plan.storage
        self.zeroes_grad, self.skip_nonfinite, self._max_norm = (
            plan.zero_grad,
            plan.skip_nonfinite,
            plan.max_norm,
        )
        #: The param groups (torch's layout); a schedule may change their hyperparameters.
        self.param_groups: list[dict[str, Any]] = [g.options for g in self._groups]
        #: Every rank's shard: ``partition.shards[rank]`` is a range of the flat param vector.
        self.partition: Partition = plan.partition
        try:
            bridge = wanted(self._comm, self._units, manager)
            if bridge is None:
                self._staging, self._device = make_staging(self._units, self.partition, self.rank, manager)
            else:  # NCCL on the Vulkan buffers: the staging's pieces are device pieces
                check_collective_buffer(manager, self.partition, "over NCCL on Vulkan buffers")
                self._device = DeviceParams(manager, self._units, host_import=False, how=bridge.name)
                self._nccl = NcclOnVulkan(manager, self._units, self.partition, self.rank, bridge)
                self._staging = self._nccl  # type: ignore[assignment]
            self._inner = _build_shard(self, options["device"], manager)
        except Exception as exc:
            error = exc
        try:
            agree(self._comm, error, "ZeroRedundancyOptimizer()")
        except BaseException:
            self.close()
            raise
        self._closed = False

    # -- stepping ------------------------------------------------------------------------

    def step(self, grads: Sequence[Any] | None = None, *, wait: bool = True) -> StepHandle:
        """One step with this rank's own gradients (one per param, in param order, not yet
        reduced: NumPy arrays, or kp tensors for kp tensor params; None: every param is a kp
        tensor, and its gradient is in :meth:`grad_buffer`). Collective: every rank calls it.
        Every rank ends with the same params: those one process gets from the mean of the
        ranks' gradients. A bad gradient or hyperparameter on any rank raises the same error on
        every rank, and changes nothing. Steps are synchronous (``wait`` is taken for
        ``vk_adam.Optimizer``'s signature): the handle is done; ``skipped`` says whether
        ``skip_nonfinite`` skipped the step."""
        started = time.perf_counter()
        error: BaseException | None = None
        units: list[list[Any]] = []
        try:
            wait is True or wait is False or check_options(None, None, wait=wait)
            units = self._check_step(grads)
        except Exception as exc:
            error = exc
        agree(self._comm, error, "step()", float(self._groups[0].step) if self._groups else 0.0)
        self._consolidated = None
        times = dict.fromkeys(_PHASES, 0.0)
        times["agree"] = time.perf_counter() - started
        if self._nccl is not None:
            return self._finish(times, started, step_on_vulkan_buffers(self, units, times))
        staging, comm, device = self._staging, self._comm, self._device
        self._timed(times, "staging", staging.stage_grads, units)
        own_ready = None
        if device is not None:  # device gradients, and this rank's shard of the device params
            self._timed(times, "staging", device.pull, units)
            own_ready = device.pulled  # its own part copies while the other parts are sent
        rs = (staging.grad_send, staging.grad_recv, own_ready)
        self._timed(times, "reduce_scatter", comm.reduce_scatter_mean, *rs)
        if device is not None:
            device.pulled()  # (the communicator waited already) the shard's params are in place
        skipped, scale = self._timed(times, "norm", self._norm_and_check)
        if not skipped:
            if self._inner is not None:
                shard_grads = self._timed(times, "staging", self._shard_inputs)
                if self._max_norm is not None:
                    self._inner.internals().set_grad_scale(scale)
                self._timed(times, "update", self._inner.step, shard_grads)
            self._timed(times, "staging", staging.fill_param_send)
            self._timed(times, "all_gather", comm.all_gather, staging.param_send, staging.param_recv)
            self._timed(times, "staging", staging.scatter_params)
            if device is not None:
                self._timed(times, "staging", device.push, self.zeroes_grad)
        return self._finish(times, started, skipped)

    def _finish(self, times: dict[str, float], started: float, skipped: bool) -> StepHandle:
        handle = StepHandle(_NO_FLIGHT, self._groups[0].step + 1)
        handle.done, handle.skipped = True, skipped
        if not skipped:
            for group in self._groups:
                group.step += 1
        times["total"] = time.perf_counter() - started
        self.last_timings = times
        return handle

    def _check_step(self, grads: Sequence[Any] | None) -> list[list[Any]]:
        """Everything ``step`` checks on this rank before the ranks agree to go on; returns the
        gradients per buffer set (``_plan.Unit``)."""
        self._check_open()
        if self._device is not None:
            self._device.refuse_unwritten()
        if grads is None:
            flat = taken_grad_buffers(self._device, len(self._units))
        else:
            prepared = prepare_grads(grads, self._groups)
            assert prepared is not None
            flat = [g for group in prepared for g in group]
        revalidate(self.rule, self._groups, self.zeroes_grad)
        for gi, group in enumerate(self._groups):
            values = self.rule.push_constants(group.options, group.step + 1)
            if len(values) != group.variant.hyper_count:
                raise ValueError(
                    f"rule {self.rule.name!r}: push_constants() returned {len(values)} values for param "
                    f"group {gi}; its shader declares hyper_count={group.variant.hyper_count}"
                )
        return [flat[u.first : u.first + len(u.slots)] for u in self._units]

    def _timed(self, times: dict[str, float], key: str, call: Callable[..., _T], *args: Any) -> _T:
        """``call(*args)``, its seconds added to ``times[key]``, less the communicator's own
        host copies (NCCL's CUDA staging), which count as staging."""
        staged, began = self._comm.staging_seconds, time.perf_counter()
        result = call(*args)
        staged = self._comm.staging_seconds - staged
        times[key] += time.perf_counter() - began - staged
        times["staging"] += staged
        return result

    def _norm_and_check(self) -> tuple[bool, float]:
        """(skip the step?, clipping factor) from one all-reduce over every rank's shard."""
        if self._max_norm is None and not self.skip_nonfinite:
            return False, 1.0
        if self._nccl is not None:  # on the collectives' device
            total = self._comm.all_reduce_tensor(self._nccl.norm_terms())  # type: ignore[attr-defined]
        else:
            recv = self._staging.grad_recv
            shard = recv.astype(np.float64)
            local = np.array([np.dot(shard, shard), np.count_nonzero(~np.isfinite(recv))], np.float64)
            total = self._comm.all_reduce_sum(local)
        self._last_norm = math.sqrt(total[0]) if math.isfinite(total[0]) else float("nan")
        if self.skip_nonfinite and total[1] > 0:
            return True, 1.0
        if self._max_norm is None:
            return False, 1.0
        # as grad_clip_scale.comp computes it, in float32: min(1, max_norm / (norm + 1e-6))
        scale = np.float32(self._max_norm) / (np.float32(self._last_norm) + np.float32(1e-6))
        return False, float(min(np.float32(1.0), scale))

    def _shard_inputs(self) -> list[Array]:
        """The shard optimizer's inputs: this rank's params into its pieces, the hyperparameters
        into its groups; returns the pieces' mean gradients (in the params' dtype)."""
        self._staging.refresh_pieces()
        self._sync_hyper()
        return self._staging.shard_grads()

    def _sync_hyper(self) -> None:
        """The groups' hyperparameters (a schedule may have changed them) into the shard's."""
        assert self._inner is not None
        for piece, options in zip(self._staging.pieces, self._inner.param_groups, strict=True):
            group = self._groups[self._units[piece.group].group]
            options.update({k: group.options[k] for k in self.rule.defaults})

    # -- lifetime ----------------------------------------------------------------------------

    def close(self) -> None:
        """Free this rank's Vulkan objects (not collective)."""
        if self._inner is not None:
            self._inner.close()
        if self._device is not None:
            self._device.close()
        if self._nccl is not None:
            self._nccl.close()
            self._nccl = None
        if hasattr(self, "_comm"):  # made unless the communicator itself was refused
            self._comm.close()
        self._closed = True

    def __repr__(self) -> str:
        lo, hi = self.shard
        name = self.rule.name
        return f"ZeroRedundancyOptimizer({name!r}, rank {self.rank} of {self.world_size}, shard [{lo}, {hi}))"


def step_on_vulkan_buffers(
    zero: ZeroRedundancyOptimizer, units: list[list[Any]], times: dict[str, float]
) -> bool:
    """A step of ``zero`` with NCCL on the Vulkan buffers (``_nccl``), after the ranks agreed;
    returns whether it was skipped. Kept out of the class to keep it short."""
    nccl, timed = zero._nccl, zero._timed
    assert nccl is not None
    grads = [u[0] for u in units]
    timed(times, "staging", nccl.pull, grads)
    timed(times, "reduce_scatter", nccl.reduce_scatter, zero._comm, zero.world_size)
    # the update with its copies in and out, one submission: recorded while NCCL runs unless
    # the host needs the reduce-scatter's result first (the clipping factor, a skip)
    early = zero._inner is not None and zero._max_norm is None and not zero.skip_nonfinite
    if early:
        zero._sync_hyper()
        timed(times, "update", nccl.record_update, zero._inner)
    skipped, scale = timed(times, "norm", zero._norm_and_check)
    if skipped:
        nccl.finish()
        return True
    if zero._inner is not None:
        if not early:
            zero._sync_hyper()
            if zero._max_norm is not None:
                zero._inner.internals().set_grad_scale(scale)
            timed(times, "update", nccl.record_update, zero._inner)
        timed(times, "update", nccl.run_update)
    timed(times, "all_gather", nccl.all_gather, zero._comm)
    cleared = [g for g in grads if not isinstance(g, np.ndarray)] if zero.zeroes_grad else []
    timed(times, "staging", nccl.push, cleared)
    return False


def _build_shard(zero: ZeroRedundancyOptimizer, device: int | str | None, manager: Any) -> Optimizer | None:
    """The optimizer of ``zero``'s shard on this rank (on ``manager`` when given): one param
    group per piece of a buffer set its shard holds, each a window of that buffer set. Kept out
    of the class, which it builds, to keep the class short."""
    staging = zero._staging
    if not staging.pieces:
        return None  # more ranks than blocks: this one owns nothing
    if device is None and manager is None:
        hardware = [d.index for d in list_devices() if not d.is_software]
        local = zero._comm.local_rank if zero._comm.local_rank is not None else zero.rank
        device = device_for_rank(local, hardware, os.environ.get(DEVICE_ENV))
    groups, windows = [], []
    for piece, array in zip(staging.pieces, staging.piece_params, strict=True):
        unit = zero._units[piece.group]
        options = zero._groups[unit.group].options
        groups.append({**{k: options[k] for k in zero.rule.defaults}, "params": [array]})
        windows.append(Window(piece.group, piece.lo, unit.n))
    staging.refresh_pieces()
    st = zero._storage
    # fp32 params take updates exactly whatever the flag says; a shard of fp32 groups only
    # must not pass it (the optimizer refuses stochastic rounding without 16-bit params)
    stochastic = st.stochastic_rounding and any(
        getattr(a, "dtype", np.float32) != np.float32 for a in staging.piece_params
    )
    return shard_optimizer(
        groups,
        zero.rule,
        windows,
        device=device,
        # on the Vulkan buffers the pieces' gradients are copies each step rewrites whole: zeroing
        # them would be a write for nothing (the application's gradients are cleared by the push)
        zero_grad=zero.zeroes_grad and zero._nccl is None,
        state_dtype=st.state_dtype,
        stochastic_rounding=stochastic,
        seed=st.seed,
        manager=manager,
    )
