"""What moves ZeRO-1's shared buffers between Vulkan and CUDA (``distributed/_nccl``), and orders the two
APIs' work on them: a bridge maps each buffer into CUDA once (``view``), adds the queue family
ownership transfers to a Vulkan submission (``acquire_ops`` / ``release_ops``), and submits it
after CUDA's work so far (``submit``), with CUDA's later work after it.

* :class:`CudaBridge`: host waits. CUDA's stream is synchronized before each Vulkan submission,
  and the submission's fence is waited for before CUDA goes on.
* :class:`SemaphoreBridge`: one timeline semaphore, exported from Vulkan and imported into CUDA
  (kp patch 0019, ``cuImportExternalSemaphore``). Each Vulkan submission waits on the GPU for
  the value CUDA's stream signals after its work, and signals one the stream waits for before
  its next; the host waits only at the end of a step. The default where the device exports
  semaphores: neither API's queue drains at a hand-over (the comparison with host waits:
  ``benchmarks/results/h200-2026-12-03-cuda/``).
  ``$VK_ADAM_NCCL_ORDER=host`` picks host waits.
* :class:`HostMirrorBridge`: a stand-in for CUDA where there is none (lavapipe, gloo: the
  collectives run on CPU tensors over each buffer's host staging, downloaded at each hand-over
  and uploaded at each hand-back), so CI runs every Vulkan submission of the path under
  validation.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from . import external as _ext
from ._kp import kp_features, kp_module

#: Set to 0 to keep NCCL on host staging even where it could run on the Vulkan buffers.
NCCL_ON_VULKAN_ENV = "VK_ADAM_NCCL_ON_VULKAN"
#: How Vulkan's and CUDA's work are ordered: "semaphores" (the default, where the device has
#: them) or "host" (waits).
NCCL_ORDER_ENV = "VK_ADAM_NCCL_ORDER"
#: :class:`HostMirrorBridge` stands in for CUDA (:func:`stand_in_for_cuda`: tests and dry runs).
_host_mirror = False


class CudaBridge:
    """The buffers' CUDA mappings (``vk_adam.interop.as_torch``); CUDA's work is waited for on
    the host (``torch.cuda.synchronize``) before a Vulkan submission, whose fence is waited
    for before CUDA's next work."""

    name = "NCCL on the Vulkan buffers (CUDA external memory)"

    def __init__(self) -> None:
        import torch

        from . import cuda_views

        self._torch, self._views, self._device = torch, cuda_views, None
        #: CUDA work was enqueued on the buffers since the last Vulkan submission
        self.pending = False

    def view(self, tensor: Any) -> Any:
        view = self._views.as_torch(tensor)
        self._device = view.device
        return view

    def submit(self, sequence: Any) -> None:
        """Run the recorded ``sequence`` after CUDA's work so far, before CUDA's next."""
        if self.pending:
            self._torch.cuda.synchronize(self._device)
            self.pending = False
        sequence.eval()

    def finish(self) -> None:
        """Wait for every Vulkan submission made (the host reads or records what it wrote)."""

    def acquire_ops(self, manager: Any, tensors: list[Any]) -> list[Any]:
        return [_ext.ownership_transfer_op(tensors, manager, to_external=False)]

    def release_ops(self, manager: Any, tensors: list[Any]) -> list[Any]:
        return [_ext.ownership_transfer_op(tensors, manager, to_external=True)]

    def close(self) -> None:
        self.finish()


class SemaphoreBridge(CudaBridge):
    """:class:`CudaBridge`'s mappings, ordered by one timeline semaphore on the GPU."""

    name = "NCCL on the Vulkan buffers (CUDA external memory, timeline semaphores)"

    def __init__(self, manager: Any, ordinal: int) -> None:
        super().__init__()
        from . import cuda

        self._driver, self._ordinal = cuda.driver(), ordinal
        self._semaphore = manager.timeline_semaphore(0, exportable=True)
        fd = self._semaphore.fd()
        try:
            self._imported = self._driver.import_semaphore(ordinal, fd)
        except Exception:
            os.close(fd)  # CUDA owns the fd only once the import succeeded
            self._semaphore.destroy()
            raise
        self._value = 0  # the last value signalled or to be signalled
        self._running: list[Any] = []

    def _on_stream(self, value: int, *, signal: bool) -> None:
        stream = self._torch.cuda.current_stream(self._device).cuda_stream
        self._driver.semaphore_async(self._ordinal, self._imported, value, stream, signal=signal)

    def submit(self, sequence: Any) -> None:
        waits = []
        if self.pending:  # Vulkan after CUDA's work so far: the stream signals, Vulkan waits
            self._value += 1
            self._on_stream(self._value, signal=True)
            waits = [(self._semaphore, self._value)]
            self.pending = False
        self._value += 1
        sequence.eval_async_with(wait=waits, signal=[(self._semaphore, self._value)])
        self._running.append(sequence)
        self._on_stream(self._value, signal=False)  # CUDA's next work after Vulkan's

    def finish(self) -> None:
        running, self._running = self._running, []
        for sequence in running:
            sequence.eval_await()

    def close(self) -> None:
        self.finish()
        if self._semaphore.is_init():
            self._torch.cuda.synchronize(self._device)  # no stream still waits on it
            self._driver.destroy_semaphore(self._ordinal, self._imported)
            self._semaphore.destroy()


class HostMirrorBridge(CudaBridge):
    """A stand-in for CUDA (tests): CPU tensors over each buffer's host staging memory, uploaded
    as Vulkan takes a buffer back and downloaded as it hands it over."""

    name = "host mirror (tests)"

    def __init__(self) -> None:
        import torch

        self._torch, self._kp = torch, kp_module()
        self.pending = False

    def view(self, tensor: Any) -> Any:
        return self._torch.from_numpy(tensor.data())

    def submit(self, sequence: Any) -> None:
        self.pending = False
        sequence.eval()

    def acquire_ops(self, manager: Any, tensors: list[Any]) -> list[Any]:
        return [*super().acquire_ops(manager, tensors), self._kp.OpTensorSyncDevice(tensors)]

    def release_ops(self, manager: Any, tensors: list[Any]) -> list[Any]:
        return [self._kp.OpTensorSyncLocal(tensors), *super().release_ops(manager, tensors)]


def stand_in_for_cuda(enabled: bool) -> None:
    """For tests and dry runs (lavapipe, gloo), never applications: with ``enabled``, the ZeRO-1
    optimizers made after this in this process run the collectives-on-Vulkan-buffers path with
    :class:`HostMirrorBridge` standing in for CUDA, so every Vulkan submission of the path runs
    under validation without a GPU; False turns it off. A launched rank calls it itself."""
    global _host_mirror
    _host_mirror = bool(enabled)


def wanted(comm: Any, tensors: Sequence[Any], manager: Any) -> Any:
    """The bridge for this optimizer (None: the host path): every param (``tensors``) a kp tensor, the
    group NCCL on the Vulkan device's GPU, kp with external memory and ownership transfers,
    and ``$VK_ADAM_NCCL_ON_VULKAN`` not 0. A timeline semaphore where kp and the device have
    exportable ones and CUDA imports it, unless ``$VK_ADAM_NCCL_ORDER`` is "host"; else host
    waits (``opt.device_staging`` says which). After :func:`stand_in_for_cuda`, the host mirror
    wherever the buffers can be shared, whatever the group."""
    if manager is None or not tensors or any(t is None for t in tensors):
        return None
    if os.environ.get(NCCL_ON_VULKAN_ENV, "1") == "0" or not _ext.ownership_transfers():
        return None
    found = _ext.sharing(manager)
    if found is None or not found.fd_export:
        return None
    if _host_mirror:
        return HostMirrorBridge()
    if not getattr(comm, "cuda", False):
        return None
    from . import cuda

    try:
        device = cuda.device_for_uuid(found.device_uuid)
    except (RuntimeError, ValueError):
        return None
    if device.ordinal != comm.cuda_ordinal():
        return None
    order = os.environ.get(NCCL_ORDER_ENV, "semaphores")
    if order not in ("host", "semaphores"):
        raise ValueError(f"${NCCL_ORDER_ENV} is {order!r}: use 'host' (waits) or 'semaphores'")
    semaphores = "timeline semaphores" in kp_features().patches and manager.has_semaphore_fd_export()
    if order == "semaphores" and semaphores:
        try:
            return SemaphoreBridge(manager, device.ordinal)
        except RuntimeError:  # CUDA would not import it: host waits order the same work
            pass
    return CudaBridge()
