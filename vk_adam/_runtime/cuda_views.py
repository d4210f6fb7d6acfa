"""CUDA views of vk-adam's exportable Vulkan buffers (``vk_adam.interop.as_torch``), and the
hand-over that orders the two APIs' work on them (``to_cuda`` / ``to_vulkan``).

A view is the Vulkan buffer's dedicated allocation, exported as an opaque fd and imported once
into CUDA (``cuda``: ctypes on the driver API), wrapped as a torch tensor through
``__cuda_array_interface__`` (torch keeps the mapping alive as long as a tensor over it lives).

Ordering is by host waits plus a queue family ownership transfer, as the Vulkan spec asks of
memory another API uses (``VK_QUEUE_FAMILY_EXTERNAL``):

* ``to_cuda``: a release barrier on the Vulkan queue after its last access, submitted and
  waited for; then CUDA work may be enqueued.
* ``to_vulkan``: ``torch.cuda.synchronize`` (CUDA's work is done), then an acquire barrier on the
  Vulkan queue before its next access.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

from .._values import is_kp_tensor
from . import external as _ext

# id(kp tensor) -> its CUDA mapping, while a torch tensor over it lives: as_torch maps each
# Vulkan allocation into CUDA once.
_MAPPINGS: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
# kp tensors handed to CUDA (to_cuda) and not yet back (to_vulkan).
_WITH_CUDA: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()

# kp.Manager -> the sequence its hand-overs are recorded into, made once (a new kp sequence is a
# command pool, a command buffer and a fence).
_SEQUENCES: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

_TYPESTR = {"float32": "<f4", "uint32": "<u4", "int32": "<i4"}


def as_torch(tensor: Any) -> Any:
    """A CUDA ``torch.Tensor`` over an exportable kp tensor's memory (:func:`exportable_tensor`,
    or an optimizer's buffers with ``exportable=True``), on the CUDA device that is the same GPU
    (matched by deviceUUID): no copy, each API reads and writes the same bytes. Its shape and
    dtype are the kp tensor's. The mapping is made once per kp tensor and lives as long as a
    torch tensor over it does (the kp tensor included).

    Hand the memory over between the APIs with :func:`to_cuda` before CUDA uses it and
    :func:`to_vulkan` before Vulkan does again. Needs NVIDIA's driver (``libcuda.so.1``), torch
    with CUDA, and kp's patch 0018 (queue family ownership transfers)."""
    _check_shareable(tensor, "as_torch")
    mapping = _MAPPINGS.get(id(tensor))
    if mapping is None or mapping.owner is not tensor:
        mapping = _map_into_cuda(tensor)
        _MAPPINGS[id(tensor)] = mapping
    torch = _torch_with_cuda()
    shape, _info, _manager = _ext.described_or_refuse(tensor, "as_torch")
    return torch.as_tensor(mapping, device=f"cuda:{mapping.device.ordinal}").view(shape)


def to_cuda(*tensors: Any) -> None:
    """Hand kp tensors viewed by :func:`as_torch` from Vulkan to CUDA: wait for the Vulkan work
    submitted before on their managers, and release their buffers to ``VK_QUEUE_FAMILY_EXTERNAL``
    (a queue family ownership transfer). CUDA work enqueued afterwards sees Vulkan's writes.
    Tensors already handed to CUDA are skipped."""
    _hand_over(tensors, to_external=True)


def to_vulkan(*tensors: Any) -> None:
    """Hand kp tensors back from CUDA to Vulkan: wait for the CUDA device's work
    (``torch.cuda.synchronize``), then acquire their buffers on the Vulkan queue. Vulkan work
    submitted afterwards (a step, a copy, a read) sees CUDA's writes. Tensors that Vulkan holds
    are skipped."""
    _hand_over(tensors, to_external=False)


def _check_shareable(tensor: Any, what: str) -> None:
    if not is_kp_tensor(tensor):
        raise TypeError(f"{what} takes kp tensors (got {type(tensor).__name__})")
    if not tensor.is_init():
        raise ValueError(f"{what}: this kp tensor was destroyed")
    if not _ext.is_exportable(tensor):
        raise ValueError(
            f"{what}: this kp tensor's memory cannot be shared with CUDA: make it with "
            "interop.exportable_tensor(manager, array), or the optimizer with exportable=True"
        )
    if not _ext.ownership_transfers():
        raise RuntimeError(
            f"{what} needs vk-adam's kp build with patch 0018 (queue family ownership transfers); "
            "run `bash scripts/setup.sh`"
        )


def _torch_with_cuda() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise ImportError("as_torch needs torch with CUDA (pip install torch)") from exc
    if not torch.cuda.is_available():
        raise RuntimeError(
            "as_torch needs torch with CUDA and an NVIDIA GPU; torch.cuda.is_available() is False here"
        )
    return torch


def _map_into_cuda(tensor: Any) -> Any:
    from . import cuda

    _shape, info, _manager = _ext.described_or_refuse(tensor, "as_torch")
    torch = _torch_with_cuda()
    device = cuda.device_for_uuid(info.device_uuid)
    # torch's own context (the device's primary context) made before the mapping goes into it
    torch.cuda.synchronize(device.ordinal)
    fd, allocation_size, _memory_type = _ext.export_fd(tensor)
    dtype = str(tensor.data().dtype)
    try:
        return cuda.CudaMapping(device, fd, allocation_size, 4 * int(tensor.size()), _TYPESTR[dtype], tensor)
    except BaseException:
        os.close(fd)  # a failed import leaves the fd with us (CUDA owns it only on success)
        raise


def _hand_over(tensors: tuple[Any, ...], *, to_external: bool) -> None:
    what = "to_cuda" if to_external else "to_vulkan"
    for tensor in tensors:
        _check_shareable(tensor, what)
    moving = [t for t in tensors if (id(t) in _WITH_CUDA) != to_external]
    if not moving:
        return
    if not to_external:
        mapping = _MAPPINGS.get(id(moving[0]))
        if mapping is not None:
            _torch_with_cuda().cuda.synchronize(mapping.device.ordinal)
    by_manager: dict[int, tuple[Any, list[Any]]] = {}
    for tensor in moving:
        manager = _ext.described_or_refuse(tensor, what)[2]
        by_manager.setdefault(id(manager), (manager, []))[1].append(tensor)
    for manager, group in by_manager.values():
        sequence = _SEQUENCES.get(manager)
        if sequence is None or not sequence.is_init():  # none yet, or its manager was destroyed
            sequence = _SEQUENCES[manager] = manager.sequence()
        sequence.clear()
        sequence.eval(_ext.ownership_transfer_op(group, manager, to_external=to_external))
    for tensor in moving:
        if to_external:
            _WITH_CUDA[id(tensor)] = tensor
        else:
            _WITH_CUDA.pop(id(tensor), None)


__all__ = ["as_torch", "to_cuda", "to_vulkan"]
