"""The runtime: one kp.Manager and every Vulkan object vk-adam creates on it.

Everything above this layer speaks in the project's terms (buffers, pipelines, ops, run,
submit, wait, barrier); only this package calls kp. It hides the two kp builds it supports:

* **patched** (vk-adam's ``kp-patches/``): a step is one submission; ``barrier`` records a real
  buffer memory barrier (compute and transfer writes -> compute and transfer reads and writes);
  ``submit`` hands a whole recorded sequence to the queue without waiting; waits reuse one fence
  per sequence and poll it briefly before blocking.
* **stock** kp 0.9.0: there is no barrier op in Python, so ``barrier`` records a 4-byte
  device-to-host copy of a bridge buffer whose two barriers (compute -> transfer, transfer ->
  host) chain into the transfer -> compute barrier that kp records before every dispatch. That
  is an execution dependency only; it works on the drivers tested but the spec does not promise
  it. ``submit`` needs one kp sequence per op (stock ``eval_async`` takes one op), and every
  wait creates and destroys a fence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from .._errors import DeviceCapabilityError, NoVulkanDeviceError
from .._lifetime import Closable
from .._values import is_kp_tensor
from . import shared as _shared
from ._kp import KpFeatures, kp_features, kp_module, warn_if_stock
from .barriers import full_barrier_op
from .devices import DeviceInfo
from .external import copy_regions_op, exportable_buffer
from .facts import WORKGROUP_SIZE, DeviceFacts
from .limits import allocation_failure
from .sequences import Pending, RecordedByKey, Sequences, evaluate_async, rerecord
from .shared import as_manager
from .unstaged import DeviceOnly

Array = npt.NDArray[Any]

#: The specialization constant that sizes every shader's workgroup (``local_size_x_id``).
WORKGROUP_SIZE_SPEC_ID = 25


class Dispatch(NamedTuple):
    """One dispatch of ``pipeline`` with push constants ``push`` (float32 words), as a list of
    ops handed to :meth:`Runtime.run`, :meth:`~Runtime.submit` or :meth:`~Runtime.record` carries
    it: the runtime makes the kp op when it records the list (:meth:`Runtime.build_ops`).

    For the ops a step makes anew each time (kp copies push constants into a dispatch op when
    it is made, so a step's dispatches cannot be made once and kept): the step's code lists
    what it needs and the runtime, which it hands the list to anyway, makes them. ``ordered``:
    as :meth:`Runtime.dispatch_op` takes it."""

    pipeline: Any
    push: Array
    ordered: bool = False


class Upload(NamedTuple):
    """:meth:`Runtime.upload_op` of ``buffers``, carried in a list of ops as :class:`Dispatch`
    is (the buffers a step uploads change from one step to the next)."""

    buffers: Sequence[Any]


class Runtime(Closable):
    """Every buffer, pipeline and sequence one user (an optimizer, a check) made on a device.

    ``manager``: the application's ``kp.Manager`` (never destroyed here) or a ``DeviceHandle``, or
    None to use the process's shared device for ``device`` (see :func:`select_device`, :mod:`.shared`):
    :meth:`close` frees this runtime's objects and drops its reference on that device. The kp
    sequences behind :meth:`run` and :meth:`submit` are kept by :class:`.sequences.Sequences`.
    """

    _closed_error = NoVulkanDeviceError
    _closed_message = "this Vulkan runtime was closed"

    def __init__(self, *, manager: Any = None, device: int | str | None = None) -> None:
        self.kp = kp_module()
        self.features: KpFeatures = kp_features()
        warn_if_stock()
        self._shared: _shared.SharedDevice | None = None
        known: DeviceInfo | None = None
        manager = as_manager(manager)
        if manager is None:
            self._shared = _shared.acquire(device)
            manager, known = self._shared.manager, self._shared.info
            _shared.register_closer(self._shared, self)
        elif (handed_back := _shared.lookup(manager)) is not None:
            known = handed_back.info  # vk-adam's own shared manager, handed back to it
        self.manager = manager
        #: Every limit and feature of the device and the decisions made from them, read once
        #: here; whatever depends on the device reads it (``facts.py``).
        self.facts = DeviceFacts.read(manager, known)
        self._buffers: list[Any] = []
        #: buffers with no staging copy, where this kp build copies byte regions (unstaged.py)
        self._device_only = (
            DeviceOnly(self.manager, self.kp) if "storage copies" in self.features.patches else None
        )
        self._pipelines: list[Any] = []
        self._sequences = Sequences(self.manager, self._shared)  # run(), submit() and close() use it
        self._own_sequences: list[Any] = []  # sequence()'s
        self._caches: list[RecordedByKey] = []  # recorded_by_key()'s
        self._closed = False
        # The stock path's ordering op: a 4-byte download whose barriers chain earlier compute.
        self._bridge_op: Any = None
        if not self.features.memory_barriers:
            bridge = self.buffer(np.zeros(1, np.float32))
            self._bridge_op = self.kp.OpTensorSyncLocal([bridge])

    # -- objects ---------------------------------------------------------------------------

    def buffer(self, data: Array, *, exportable: bool = False, staged: bool = True) -> Any:
        """A device buffer (kp tensor) holding a copy of ``data`` in its host staging memory;
        ``exportable``: its device memory a dedicated allocation other devices and processes
        can import (``vk_adam.interop.export_memory``).

        Only the staging copy is filled: upload it (``upload_op``) before a shader reads it.
        ``staged=False``: no staging copy where this kp build allows (device memory only, filled
        here; :meth:`host_words` and :meth:`write_words` reach it); exportable buffers keep one.
        """
        flat = np.ascontiguousarray(data).reshape(-1)
        facts = self.facts
        if flat.nbytes > facts.max_allocation_bytes:
            raise DeviceCapabilityError(
                f"a buffer of {flat.nbytes} bytes is larger than {facts.info.name} allocates at once "
                f"(maxMemoryAllocationSize: {facts.max_allocation_bytes} bytes); split the params "
                "into several groups or kp tensors"
            )
        try:
            if exportable:
                assert facts.sharing is not None and facts.sharing.fd_export, "checked by the optimizer"
                tensor = exportable_buffer(self.manager, flat, facts.sharing)
            elif not staged and self._device_only is not None:
                tensor = self._device_only.make(flat, self.run)
            else:
                tensor = self.manager.tensor_t(flat)
        except RuntimeError as exc:
            failed = allocation_failure(exc, flat.nbytes, facts.info.name)
            if failed is None:
                raise
            raise failed from exc
        self._buffers.append(tensor)
        return tensor

    @property
    def buffers(self) -> list[Any]:
        """Every buffer made by :meth:`buffer` (and not yet freed)."""
        return list(self._buffers)

    def buffer_bytes(self, tensor: Any) -> int:
        """Bytes of a kp tensor's device buffer: every buffer vk-adam makes or accepts holds
        4-byte words (float32, or uint32 words of packed 16- and 8-bit values); kp 0.9.0's
        binding cannot report a tensor's data type."""
        return 4 * int(tensor.size())

    def host_view(self, tensor: Any) -> Array:
        """A NumPy view of a kp tensor's host staging memory (its ``data()``): what an upload
        copies to the device and a download fills."""
        view: Array = tensor.data()
        return view

    def host_words(self, tensors: Sequence[Any]) -> list[Array]:
        """The words of each buffer as the device holds them now: a staged buffer's host view
        after one download for all, a copy of a buffer made with ``staged=False``."""
        only = self._device_only
        staged = [t for t in tensors if only is None or not only.holds(t)]
        if staged:
            self.run([self.download_op(staged)])
        return [
            only.read(t, self.run) if only is not None and only.holds(t) else self.host_view(t)
            for t in tensors
        ]

    def write_words(self, writes: Sequence[tuple[Any, Any, int, Array]]) -> None:
        """Write (buffer, dtype, first element, values) ranges: into a staged buffer's host view,
        then one upload of every staged buffer touched (whole); into a buffer made with
        ``staged=False`` directly. The caller makes sure no work in flight uses them."""
        only = self._device_only
        touched: list[Any] = []
        direct = []
        for tensor, dtype, offset, value in writes:
            if only is not None and only.holds(tensor):
                raw = np.ascontiguousarray(value, dtype).reshape(-1).view(np.uint8)
                direct.append((tensor, offset * np.dtype(dtype).itemsize, raw))
                continue
            self.host_view(tensor).view(dtype)[offset : offset + value.size] = value
            if not any(t is tensor for t in touched):
                touched.append(tensor)
        if touched:
            self.run([self.upload_op(touched)])
        if direct:
            assert only is not None
            only.write(direct, self.run)

    def upload_range(self, tensor: Any, first: int, words: Array) -> None:
        """Write ``words`` (4-byte values) at word ``first`` of a staged buffer, into its staging
        memory and on the device, leaving the device's other words as they are (one region
        copy from its staging memory; vk-adam's kp). The caller makes sure no work in flight
        uses the buffer."""
        raw = np.ascontiguousarray(words).reshape(-1).view(np.uint32)
        self.host_view(tensor).view(np.uint32)[first : first + raw.size] = raw
        barrier = self.barrier_op([tensor])
        span = (4 * first, 4 * first, 4 * raw.size)
        self.run([barrier, copy_regions_op(tensor, tensor, [span], source_staging=True), barrier])

    def has_host_copy(self, tensor: Any) -> bool:
        """Whether a kp tensor has host-visible memory (``data()``): every type but storage."""
        return bool(tensor.tensor_type() != self.kp.TensorTypes.storage)

    def pipeline(
        self,
        buffers: Sequence[Any],
        spirv: bytes,
        items: int,
        spec: Sequence[float],
        push_floats: int,
        *,
        max_groups: int | None = None,
        threads: int = WORKGROUP_SIZE,
        windows: Sequence[tuple[int, int]] | None = None,
        update: bool = False,
    ) -> Any:
        """A compute pipeline over ``buffers`` (bindings 0..k-1) sized for ``items`` invocations.

        ``spec``: specialization constants (float32; kp's binding picks the push dtype from the
        spec dtype, so both stay float32). ``push_floats``: push-constant size in 4-byte words.
        ``max_groups``: a lower workgroup cap for this pipeline (its shader loops over the rest).
        ``threads``: the shader's invocations per workgroup (as specialized).
        ``windows``: binding i is the byte window ``windows[i]`` = (offset, range; range 0: the
        whole buffer) of ``buffers[i]`` (``_optim/windows.py``); None binds every buffer whole.
        ``update``: a rule shader (the harness's loops), capped by ``facts.update_workgroup_cap``
        instead of ``facts.workgroup_cap``.
        """
        facts = self.facts
        if len(buffers) > facts.max_storage_buffers:
            raise DeviceCapabilityError(
                f"this shader binds {len(buffers)} storage buffers, more than {facts.info.name} "
                f"allows one compute pipeline (maxPerStageDescriptorStorageBuffers / "
                f"maxDescriptorSetStorageBuffers: {facts.max_storage_buffers}); it cannot run here"
            )
        cap = facts.update_workgroup_cap if update else facts.workgroup_cap
        cap = cap if max_groups is None else min(cap, max_groups)
        groups = max(1, min(cap, -(-items // threads)))
        args = (
            list(buffers),
            spirv,
            [groups, 1, 1],
            np.asarray(spec, np.float32),
            np.zeros(push_floats, np.float32),
        )
        if windows is not None and any(r for _, r in windows):
            if not self.features.binding_windows:
                raise NoVulkanDeviceError(
                    f"{facts.info.name}: a buffer of more than {facts.max_binding_bytes} bytes "
                    "(maxStorageBufferRange) needs binding windows, which this kp build lacks; "
                    "install the kp wheel built with vk-adam (scripts/build-kp.sh)"
                )
            algo = self.manager.algorithm_windowed(*args, [(int(o), int(r)) for o, r in windows])
        else:
            algo = self.manager.algorithm(*args)
        self._pipelines.append(algo)
        return algo

    def sized_spec(self, spec: Sequence[float] = ()) -> tuple[float, ...]:
        """Specialization constants of one of vk-adam's own shaders (``glsl/*.comp`` with
        ``local_size_x_id = 25``): ``spec`` (ids 0..), then ``facts.threads`` as constant 25."""
        padding = (0.0,) * (WORKGROUP_SIZE_SPEC_ID - len(spec))
        return (*spec, *padding, *np.array([self.facts.threads], np.uint32).view(np.float32).tolist())

    def free_buffer(self, buffer: Any) -> None:
        """Free a buffer made by :meth:`buffer`; no submitted or recorded work may still use it."""
        buffer.destroy()
        self._buffers.remove(buffer)
        if self._device_only is not None:
            self._device_only.forget(buffer)

    def destroy_pipeline(self, pipeline: Any) -> None:
        """Free a pipeline; the caller guarantees no submitted or recorded work still uses it."""
        pipeline.destroy()
        self._pipelines.remove(pipeline)

    # -- ops (built once and reused where their buffers do not change) -----------------------

    def barrier_op(self, buffers: Sequence[Any]) -> Any:
        """Order everything after this point after every earlier compute and transfer write
        to ``buffers`` (and after earlier reads of them, for later writes)."""
        if self._bridge_op is not None:
            return self._bridge_op
        return full_barrier_op(self.kp, buffers)

    def upload_op(self, buffers: Sequence[Any]) -> Any:
        """Copy each buffer's host staging memory to the device."""
        return self.kp.OpTensorSyncDevice(list(buffers))

    def download_op(self, buffers: Sequence[Any]) -> Any:
        """Copy each buffer's device memory to its host staging memory."""
        return self.kp.OpTensorSyncLocal(list(buffers))

    def dispatch_op(self, pipeline: Any, push: Array, *, ordered: bool = False) -> Any:
        """One dispatch of ``pipeline`` with these push constants (float32 words), made now (for
        ops made once and run many times; a step's own dispatches are :class:`Dispatch` records).

        ``ordered``: a barrier op recorded before it already orders it after every earlier
        write to its buffers, with no upload in between, so kp's own transfer -> shader barrier
        at the start of every dispatch is left out (where this kp build allows it)."""
        return self.build_ops([Dispatch(pipeline, push, ordered)])[0]

    def build_ops(self, ops: Sequence[Any]) -> list[Any]:
        """``ops`` as kp records them: each :class:`Dispatch` and :class:`Upload` made a kp op
        (as :meth:`dispatch_op` and :meth:`upload_op` make them), every other op as it is.
        :meth:`run`, :meth:`submit` and :meth:`record` do this themselves; a caller that runs the
        same ops many times builds them once."""
        opt_out: bool | None = None  # this kp build's barrier opt-out, read once, when asked
        built = []
        for op in ops:
            if isinstance(op, Dispatch):
                if op.ordered and opt_out is None:
                    opt_out = self.features.dispatch_barrier_opt_out
                if op.ordered and opt_out:
                    op = self.kp.OpAlgoDispatch(op.pipeline, op.push, False)  # barrier=False
                else:
                    op = self.kp.OpAlgoDispatch(op.pipeline, op.push)
            elif isinstance(op, Upload):
                op = self.kp.OpTensorSyncDevice(list(op.buffers))
            built.append(op)
        return built

    def _eval_once_op(self, message: str) -> Any:
        """An op that makes the sequence holding it refuse every evaluation after the first with
        ``RuntimeError(message)``, before anything of it runs; None where this kp lacks it."""
        op_type = getattr(self.kp, "OpEvalOnce", None)
        return op_type(message) if op_type is not None else None

    # -- running ------------------------------------------------------------------------------

    def run(self, ops: Sequence[Any], *, timestamps: bool = False) -> list[int] | None:
        """Record ``ops`` into one command buffer, submit it and wait for it.

        With ``timestamps``, return the raw GPU timestamps (one before the first op, one after
        each op; multiply tick differences by :attr:`timestamp_period` for nanoseconds).
        """
        if self._closed:  # tested here, not by a call: every step runs through this
            self._refuse_closed()
        return self._sequences.run(self.build_ops(ops), timestamps=timestamps)

    def submit(self, ops: Sequence[Any]) -> Pending:
        """Submit ``ops`` without waiting; they run after everything submitted before."""
        if self._closed:
            self._refuse_closed()
        return self._sequences.submit(self.build_ops(ops), one_submission=self.features.async_submit)

    def record(self, sequence: Any, ops: Sequence[Any], *, once: str | None = None) -> None:
        """Record ``ops`` into the application's own kp.Sequence (not submitted). ``once``: the
        sequence applies once; every evaluation after the first raises ``RuntimeError(once)``
        before anything of it runs (where this kp build can; a stock kp records no guard)."""
        if self._closed:
            self._refuse_closed()
        guard = self._eval_once_op(once) if once is not None else None
        for op in self.build_ops([guard, *ops] if guard is not None else ops):
            sequence.record(op)

    def rerecord(self, sequence: Any, ops: Sequence[Any]) -> None:
        """Clear a sequence (the application's, or :meth:`sequence`'s) and record ``ops`` into it."""
        self._check_open()
        rerecord(self.manager, sequence, self.build_ops(ops))

    def new_sequence(self) -> Any:
        """A kp sequence of this runtime's own, for work recorded by the caller (``record``)
        and evaluated with :meth:`evaluate`; destroyed by :meth:`close` or :meth:`free_sequence`."""
        self._check_open()
        seq = self.manager.sequence()
        self._own_sequences.append(seq)
        return seq

    def evaluate(self, sequence: Any) -> None:
        """Submit a sequence recorded earlier and wait for it."""
        self._check_open()
        sequence.eval()

    def evaluate_async(self, sequence: Any) -> Pending:
        """Submit a sequence recorded earlier without waiting: the host records the next while
        the GPU runs it. Later submissions start after it on the queue (vk-adam's steps order
        themselves by barriers); ``wait()`` on the result before the sequence is cleared,
        recorded into or read. A stock kp evaluates it here, synchronously."""
        self._check_open()
        return evaluate_async(sequence, asynchronous=self.features.async_submit)

    def free_sequence(self, sequence: Any) -> None:
        """Destroy a sequence made by :meth:`new_sequence` (waits for its submitted work)."""
        sequence.destroy()
        self._own_sequences.remove(sequence)

    def recorded_by_key(self) -> RecordedByKey:
        """Sequences recorded once per key and submitted many times (:class:`.sequences.RecordedByKey`),
        destroyed by :meth:`close`."""
        self._check_open()
        cache = RecordedByKey(self.manager)
        self._caches.append(cache)
        return cache

    # -- lifetime ----------------------------------------------------------------------------

    def close(self) -> None:
        """Free every object made here and drop this runtime's reference on the shared device.

        The caller waits for its submitted work first."""
        if self._closed:
            return
        self._closed = True
        shared, self._shared = self._shared, None
        live = shared is None or not shared.closed
        # Sequences first: destroying one waits for its submitted work.
        self._sequences.close(destroy=live)
        if live:
            for cache in self._caches:
                cache.close()
            for seq in self._own_sequences:
                seq.destroy()
            for algo in self._pipelines:
                algo.destroy()
            for tensor in self._buffers:
                tensor.destroy()
        self._pipelines, self._buffers, self._own_sequences, self._caches = [], [], [], []
        self._bridge_op = None
        self.manager = None
        if shared is not None:
            _shared.release(shared)


__all__ = ["WORKGROUP_SIZE_SPEC_ID", "Dispatch", "Pending", "Runtime", "Upload", "is_kp_tensor"]
