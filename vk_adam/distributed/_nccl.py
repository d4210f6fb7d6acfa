"""ZeRO-1 with NCCL on the Vulkan buffers themselves: no host copy anywhere in a step.

Used when the params are device buffers (kp tensors) and the torch.distributed group is NCCL on
the Vulkan device's own GPU. The collectives run in place on two buffers: ``grad_send`` (every
gradient in the reduce-scatter's layout; this rank's part becomes the mean of every rank's) and
``param_recv`` (every rank's shard; this rank's part is the all-gather's input). Both are
exportable Vulkan buffers, mapped into CUDA once (``vk_adam.interop.as_torch``), and NCCL runs
on those mappings: NCCL reads this rank's part where it lies and writes no copy of it (at world
size 1 both collectives are no-ops). This rank's shard is updated by an ordinary
:class:`vk_adam.Optimizer` over device pieces (one kp tensor per piece of a buffer set, each a
window of that buffer set). One step:

1. Vulkan: each device gradient into ``grad_send`` and this rank's shard of each param into
   its piece (byte-range copies, as compute dispatches: ``vkCmdCopyBuffer`` ran far below the
   memory bandwidth); ``grad_send`` handed to CUDA;
2. CUDA: NCCL reduce-scatter in place (this rank's part of ``grad_send``), the mean (float32
   division, as the host path computes it) and, with clipping or ``skip_nonfinite``, the
   shard's sum of squares and non-finite count, all-reduced; then the buffers handed back;
3. Vulkan, one submission: the mean into the pieces' gradients, the update (recorded with
   ``Optimizer.record_step``, while NCCL runs when neither clipping nor the non-finite check
   needs its result on the host first), the pieces into this rank's part of ``param_recv``;
4. CUDA: NCCL all-gather in place;
5. Vulkan: every rank's shard into each device param, the gradients read cleared
   (``zero_grad``).

Every Vulkan step is one submission that starts by acquiring the shared buffers it touches from
``VK_QUEUE_FAMILY_EXTERNAL`` and ends by releasing them to it (queue family ownership
transfers, as the Vulkan spec asks of memory another API uses), ordered after CUDA's work and
before CUDA's next by the ``bridge`` (``_runtime/bridges``: host waits, or a timeline semaphore).
Between steps CUDA holds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._rules import load_spirv
from .._runtime import CudaBridge, HostMirrorBridge, Runtime, SemaphoreBridge
from .._runtime import bridge_for as _bridge_for
from ._plan import Unit
from ._shard import Partition

__all__ = ["CudaBridge", "HostMirrorBridge", "NcclOnVulkan", "SemaphoreBridge", "wanted"]


def wanted(comm: Any, units: Sequence[Unit], manager: Any) -> Any:
    """The bridge that runs NCCL on the Vulkan buffers of ``units`` (None: the host path);
    ``_runtime.bridge_for`` decides."""
    return _bridge_for(comm, [u.tensor for u in units], manager)


#: (source kp tensor, destination kp tensor, [(source byte, destination byte, bytes)])
Copy = tuple[Any, Any, list[tuple[int, int, int]]]


class NcclOnVulkan:
    """One rank's step buffers in exportable Vulkan memory and the work of a step (above)."""

    def __init__(
        self, manager: Any, units: Sequence[Unit], partition: Partition, rank: int, bridge: Any
    ) -> None:
        self.manager, self.units, self.partition, self.bridge = manager, units, partition, bridge
        # every buffer, pipeline and sequence below is the runtime's (the manager is the application's)
        self._rt = rt = Runtime(manager=manager)
        size, world = partition.max_shard, partition.world
        self.pieces = partition.pieces(rank)

        def shared(count: int) -> Any:
            return rt.buffer(np.zeros(count, np.float32), exportable=True)

        # the collectives run in place: this rank's part of each buffer, elements [own, own + size)
        self.grad_send, self.param_recv = shared(size * world), shared(size * world)
        self._shared = [self.grad_send, self.param_recv]
        self._own = rank * size
        self.piece_params = [rt.buffer(np.zeros(p.size, np.float32)) for p in self.pieces]
        self.piece_grads = [rt.buffer(np.zeros(p.size, np.float32)) for p in self.pieces]
        # the copies and clears are compute dispatches (glsl/copy_words.comp, fill_words.comp)
        self._pipelines: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # (shader, ids) -> (pipeline, tensors)
        self._recorded = rt.recorded_by_key()  # _vulkan's sequences
        #: The sequence each named submission (``"pull"``, ``"push"``, ...) last ran, for
        #: benchmarks that submit one again alone (``benchmarks/h200/interop_costs.py``).
        self.submissions: dict[str, Any] = {}
        self._host_grads: dict[int, Any] = {}  # unit -> the device buffer its NumPy gradients go through
        self._sequence = rt.new_sequence()
        made = [*self._shared, *self.piece_params, *self.piece_grads]
        # between steps the collectives' side holds the shared buffers
        self._run([rt.upload_op(made), *bridge.release_ops(manager, self._shared)])
        self.views = [bridge.view(t) for t in self._shared]
        # this rank's parts: the reduce-scatter's output, the all-gather's input
        self._grad_own, self._param_own = (v[self._own : self._own + size] for v in self.views)
        # the update's fixed ops, built once (recorded again each step around the update)
        self._update_ops: tuple[list[Any], list[Any], list[Any]] | None = None
        # each unit's byte ranges: (offset in the unit, offset in the collectives' layout, bytes)
        self._segments = {
            i: [(4 * o, 4 * at, 4 * c) for at, o, c in partition.segments(i, 0, u.n)]
            for i, u in enumerate(units)
        }

    # -- the Vulkan submissions ----------------------------------------------------------------

    @property
    def recordings(self) -> int:
        """How many times _vulkan recorded a sequence (once per name while its kp tensors stay)."""
        return self._recorded.recordings

    def _run(self, ops: Sequence[Any]) -> None:
        self.bridge.finish()
        self._rt.run(ops)

    def _barrier(self, tensors: Sequence[Any]) -> Any:
        return self._rt.barrier_op(tensors)

    def _pipeline(self, spirv: str, tensors: tuple[Any, ...], words: int, push: int) -> Any:
        """The pipeline of ``spirv`` over ``tensors``, made once per tensors (sized for ``words``;
        its shader loops over any more)."""
        key = (spirv, *(id(t) for t in tensors))
        made = self._pipelines.get(key)
        if made is None:
            rt = self._rt
            pipeline = rt.pipeline(
                list(tensors), load_spirv(spirv), words, rt.sized_spec(), push, threads=rt.facts.threads
            )
            made = self._pipelines[key] = (pipeline, *tensors)  # the tensors kept: ids stay theirs
        return made[0]

    def _forget(self, old: set[int]) -> None:
        """Destroy the pipelines over the kp tensors of ``old`` (ids) that neither this path nor
        a recorded sequence uses any more: gradients a step took that later steps do not (else
        a new gradient tensor each step would keep every earlier one alive)."""
        used = {id(u.tensor) for u in self.units}
        used |= {id(t) for t in [*self._shared, *self.piece_params, *self.piece_grads]}
        used |= {id(t) for t in self._host_grads.values()}
        used |= {id(t) for key in self._recorded.keys() for t in key}
        gone = old - used
        for key, (pipeline, *tensors) in list(self._pipelines.items()):
            if any(id(t) in gone for t in tensors):
                self._rt.destroy_pipeline(pipeline)
                del self._pipelines[key]

    def _copy_ops(self, copies: list[Copy], clear: Sequence[Any] = ()) -> list[Any]:
        """The byte-range ``copies`` (source, destination, regions), then the kp tensors of
        ``clear`` zeroed, after every earlier write to and use of their buffers, and before every
        later one. Compute dispatches, with a barrier between two that share a buffer one of
        them writes: a dispatch accesses its whole buffers as far as the Vulkan spec (and
        synchronization validation) is concerned, even where the byte ranges do not overlap."""
        touched = list({id(t): t for c in copies for t in c[:2]}.values())
        touched += [t for t in clear if all(t is not u for u in touched)]
        if not touched:
            return []
        ops: list[Any] = [self._barrier(touched)]
        read: set[int] = set()  # the buffers dispatched since the last barrier read and wrote
        written: set[int] = set()

        def dispatch(pipeline: Any, push: Any, reads: Any, writes: Any) -> None:
            if id(writes) in read | written or (reads is not None and id(reads) in written):
                ops.append(self._barrier(touched))
                read.clear()
                written.clear()
            ops.append(
                self._rt.dispatch_op(pipeline, np.array(push, np.uint32).view(np.float32), ordered=True)
            )
            written.add(id(writes))
            if reads is not None:
                read.add(id(reads))

        for src, dst, regions in copies:
            for at_src, at_dst, size in regions:
                assert at_src % 4 == at_dst % 4 == size % 4 == 0, "every buffer here holds 4-byte words"
                pipeline = self._pipeline("copy_words", (src, dst), size // 4, 3)
                dispatch(pipeline, [at_src // 4, at_dst // 4, size // 4], src, dst)
        for tensor in clear:
            words = self._rt.buffer_bytes(tensor) // 4
            dispatch(self._pipeline("fill_words", (tensor,), words, 2), [0, words], None, tensor)
        return [*ops, self._barrier(touched)]

    def _vulkan(self, name: str, key: tuple[Any, ...], shared: list[Any], ops: Any) -> None:
        """One submission: take ``shared`` from the other API (once its work is done), the ops
        ``ops()`` makes, hand ``shared`` back; wait. Recorded once per ``key`` (the kp tensors
        it reads, kept and compared by identity: a fresh ``id()`` int is never ``is`` an earlier
        one) into a sequence of its own, ``name``'s, and submitted again after that."""
        sequence, replaced = self._recorded.get(
            name,
            key,
            lambda: [
                *self.bridge.acquire_ops(self.manager, shared),
                *ops(),
                *self.bridge.release_ops(self.manager, shared),
            ],
        )
        if replaced:
            self._forget({id(t) for t in replaced})
        self.submissions[name] = sequence
        self.bridge.submit(sequence)

    def _param_copies(self) -> list[Copy]:
        """This rank's shard of each param into its piece (the padding past a param stays 0)."""
        copies = []
        for piece, tensor in zip(self.pieces, self.piece_params, strict=True):
            unit = self.units[piece.group]
            if piece.lo < unit.n:
                count = min(piece.hi, unit.n) - piece.lo
                copies.append((unit.tensor, tensor, [(4 * piece.lo, 0, 4 * count)]))
        return copies

    def refresh_pieces(self) -> None:
        """This rank's shard of each param into its piece (a checkpoint's load)."""
        ops = self._copy_ops(self._param_copies())
        if ops:
            self._run(ops)

    def pull(self, grads: Sequence[Any]) -> None:
        """Step 1: each unit's gradient (a kp tensor, or a NumPy array uploaded through a
        device buffer of its own) into ``grad_send``; this rank's shard of each param into its
        piece."""
        uploads, sources = [], []
        for i, grad in enumerate(grads):
            if isinstance(grad, np.ndarray):
                tensor = self._host_grads.get(i)
                if tensor is None:
                    tensor = self._host_grads[i] = self._rt.buffer(np.zeros(self.units[i].n, np.float32))
                self._rt.host_view(tensor)[:] = grad.reshape(-1)
                uploads.append(tensor)
                grad = tensor
            sources.append(grad)
        copies = [(g, self.grad_send, self._segments[i]) for i, g in enumerate(sources)]
        first = [self._rt.upload_op(uploads)] if uploads else []
        self._vulkan(
            "pull",
            tuple(sources),
            [self.grad_send],
            lambda: [*first, *self._copy_ops(copies + self._param_copies())],
        )

    def reduce_scatter(self, comm: Any, world: int) -> None:
        """Step 2: the mean of every rank's gradients, this rank's shard, in this rank's part of
        ``grad_send`` (in place: NCCL reads that part where it lies and copies nothing into it)."""
        recv = self._grad_own
        self.bridge.pending = True
        comm.reduce_scatter_tensors(self.views[0], recv)
        if world > 1:  # float32 / world, as the host path's np.divide (x / 1 is x)
            recv.div_(float(world))

    def norm_terms(self) -> Any:
        """The shard's (sum of squares in float64, count of non-finite values), as a tensor on
        the collectives' device."""
        recv = self._grad_own
        torch = _torch()
        wide = recv.double()
        return torch.stack([torch.dot(wide, wide), (~torch.isfinite(recv)).sum().double()])

    def _fixed_update_ops(self) -> tuple[list[Any], list[Any], list[Any]]:
        """The ops of step 3 around the update, the same every step (built once): the shared
        buffers acquired; the mean into each piece's gradient; the pieces into this rank's part
        of ``param_recv`` and the shared buffers released."""
        if self._update_ops is None:
            own = 4 * self._own
            pieces = list(zip(self.pieces, self.piece_grads, self.piece_params, strict=True))
            take = [(self.grad_send, g, [(own + 4 * p.at, 0, 4 * p.size)]) for p, g, _ in pieces]
            give = [(t, self.param_recv, [(0, own + 4 * p.at, 4 * p.size)]) for p, _, t in pieces]
            shared = [self.grad_send, self.param_recv]
            self._update_ops = (
                self.bridge.acquire_ops(self.manager, shared),
                self._copy_ops(take),
                [*self._copy_ops(give), *self.bridge.release_ops(self.manager, shared)],
            )
        return self._update_ops

    def record_update(self, inner: Any) -> None:
        """Step 3, recorded (no wait: while CUDA runs the reduce-scatter, when nothing on the
        host must see its result first): the mean into each piece's gradient, ``inner``'s
        update of the pieces (its next step, :meth:`vk_adam.Optimizer.record_step`), the pieces
        into this rank's part of ``param_recv``; one submission, by :meth:`run_update`."""
        acquire, take, give = self._fixed_update_ops()
        sequence = self._sequence
        # a recorded step leaves its status buffer (the clipping factor set by the host) to us
        status = inner.internals().stage_status()
        first = [self._rt.upload_op(status)] if status else []
        self._rt.rerecord(sequence, [*acquire, *first, *take])
        inner.record_step(sequence, self.piece_grads)
        self._rt.record(sequence, give)

    def run_update(self) -> None:
        """Step 3, submitted after CUDA's reduce-scatter."""
        self.bridge.submit(self._sequence)

    def all_gather(self, comm: Any) -> None:
        """Step 4: every rank's updated shard into ``param_recv`` (in place: this rank's part is
        the input)."""
        self.bridge.pending = True
        comm.all_gather_tensors(self._param_own, self.views[1])

    def push(self, clear: Sequence[Any]) -> None:
        """Step 5: every rank's shard into each device param; the kp tensors of ``clear`` zeroed."""
        copies = [
            (self.param_recv, u.tensor, [(at, o, n) for o, at, n in self._segments[i]])
            for i, u in enumerate(self.units)
        ]
        self._vulkan("push", tuple(clear), [self.param_recv], lambda: self._copy_ops(copies, clear))
        self.bridge.finish()

    def finish(self) -> None:
        """Wait for every Vulkan submission of the step (a step that ends early: skipped)."""
        self.bridge.finish()

    def close(self) -> None:
        self.bridge.close()
        self.views, self._grad_own, self._param_own, self._update_ops = [], None, None, None
        self._pipelines, self.submissions = {}, {}
        self._rt.close()  # its sequences, pipelines and buffers; the manager is the application's
        self._shared, self.piece_params, self.piece_grads, self._host_grads = [], [], [], {}


def _torch() -> Any:
    import torch

    return torch
