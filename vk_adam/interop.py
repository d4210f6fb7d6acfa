"""Sharing vk-adam's Vulkan memory without a copy: with another ``kp.Manager`` (another VkDevice
on the same GPU) in this process or in another one.

```python
from vk_adam import interop
t = interop.exportable_tensor(manager, array)     # a kp.Tensor whose memory can be shared
ext = interop.export_memory(t)                    # ExternalMemory: an fd and its metadata
t2 = interop.import_memory(ext.fd, ext.metadata(), manager=other)   # takes the fd on success
```

Memory is exported as a dedicated allocation and an opaque fd (``VK_KHR_external_memory_fd``).
An fd has one owner at a time: the ``ExternalMemory`` that made it until :meth:`close`, or the
importing device once :func:`import_memory` succeeded (a failed import leaves it with the
caller). Pass it to another process with ``subprocess.Popen(pass_fds=...)`` or
``socket.send_fds`` and the JSON-able :meth:`ExternalMemory.metadata` beside it.

Both sides see the same bytes; ordering their reads and writes is the application's (for
example: the writer waits for its step, then signals the reader). See docs/interop.md.
"""

from __future__ import annotations

import math
import os
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._runtime import as_manager, is_kp_tensor
from ._runtime import external as _ext
from ._runtime.cuda_views import as_torch, to_cuda, to_vulkan

#: Bump when the metadata's fields change meaning.
METADATA_VERSION = 1

# Live ExternalMemory objects by fd number: an import in this process that takes one of their fds
# marks it taken, so its close() does not close a number the driver now owns.
_LIVE: weakref.WeakValueDictionary[int, ExternalMemory] = weakref.WeakValueDictionary()


class ExternalMemory:
    """An exported tensor's memory: an opaque fd this object owns, and what an importer needs.

    ``fd``, ``size`` (bytes), ``offset`` (bytes into the allocation; 0: dedicated), ``dtype``,
    ``shape``, ``device_uuid`` (hex). :meth:`metadata` is the JSON-able description without the
    fd; :meth:`close` closes the fd (the exported tensor is unaffected)."""

    __slots__ = (
        "__weakref__",
        "_allocation_size",
        "_fd",
        "_identity",
        "_memory_type",
        "_taken",
        "device_uuid",
        "driver_uuid",
        "dtype",
        "offset",
        "shape",
        "size",
    )

    def __init__(
        self,
        fd: int,
        *,
        size: int,
        dtype: str,
        shape: tuple[int, ...],
        device_uuid: str,
        driver_uuid: str,
        allocation_size: int,
        memory_type: int,
    ) -> None:
        self._fd = fd
        self._taken = False
        self._identity = _ext.fd_identity(fd)
        self.size, self.offset, self.dtype, self.shape = size, 0, dtype, shape
        self.device_uuid, self.driver_uuid = device_uuid, driver_uuid
        self._allocation_size, self._memory_type = allocation_size, memory_type
        _LIVE[fd] = self

    @property
    def fd(self) -> int:
        """The opaque fd (owned by this object until :meth:`close` or a successful import)."""
        if self._fd < 0:
            raise ValueError(
                "this ExternalMemory is closed (or its fd was taken by an import); call "
                "interop.export_memory(tensor) again for a new fd"
            )
        return self._fd

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def metadata(self) -> dict[str, Any]:
        """What :func:`import_memory` needs beside the fd, as plain JSON-able values."""
        if self._fd < 0 and not self._taken:
            self.fd  # noqa: B018 - raises the closed error
        return {
            "version": METADATA_VERSION,
            "size": self.size,
            "offset": self.offset,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "device_uuid": self.device_uuid,
            "driver_uuid": self.driver_uuid,
            "allocation_size": self._allocation_size,
            "memory_type_index": self._memory_type,
            "fd_identity": list(self._identity),
        }

    def close(self) -> None:
        """Close the fd (idempotent). Importers keep their own reference to the memory."""
        fd, self._fd = self._fd, -1
        if fd >= 0 and not self._taken:
            _LIVE.pop(fd, None)
            os.close(fd)

    def __enter__(self) -> ExternalMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "closed" if self._fd < 0 else f"fd={self._fd}"
        return f"ExternalMemory({state}, size={self.size}, dtype={self.dtype}, shape={self.shape})"


def _sharing(manager: Any, need: str) -> _ext.Sharing:
    info = _ext.sharing(manager)
    if info is None:
        raise RuntimeError(
            "this kp build has no external memory (vk-adam's kp patch 0017); run "
            "`bash scripts/setup.sh` or install vk-adam's kp wheel"
        )
    if not getattr(info, need):
        what = {"fd_export": "export memory as an opaque fd", "fd_import": "import an opaque fd"}[need]
        raise RuntimeError(
            f"this Vulkan device cannot {what} (VK_KHR_external_memory_fd for storage buffers); "
            "share through host memory instead"
        )
    return info


def exportable_tensor(manager: Any, array: Any) -> Any:
    """A kp tensor on ``manager`` (a kp.Manager or vk-adam DeviceHandle) holding ``array``
    (float32, uint32 or int32; copied into its staging memory and uploaded), whose device memory
    can be shared with :func:`export_memory`. It works wherever a kp tensor does, as params and
    gradients of an optimizer included."""
    mgr = as_manager(manager)
    data = np.asarray(array)
    if data.dtype.name not in _ext.EXPORT_DTYPES:
        raise TypeError(f"exportable tensors hold float32, uint32 or int32 (got {data.dtype})")
    if data.size == 0:
        raise ValueError("an exportable tensor needs at least one element")
    info = _sharing(mgr, "fd_export")
    tensor = _ext.exportable_tensor(mgr, data)
    mgr.sequence().eval(_ext.kp_module().OpTensorSyncDevice([tensor]))
    _ext.remember(tensor, tuple(int(n) for n in data.shape), info, mgr)
    return tensor


def export_memory(tensor: Any) -> ExternalMemory:
    """Export an exportable kp tensor's memory (:func:`exportable_tensor`, or an optimizer's
    buffers made with ``exportable=True``): a new fd each call, owned by the returned object."""
    if not is_kp_tensor(tensor):
        raise TypeError(f"export_memory takes a kp.Tensor (got {type(tensor).__name__})")
    if not tensor.is_init():
        raise ValueError("this kp tensor was destroyed")
    if not _ext.is_exportable(tensor):
        raise ValueError(
            "this kp tensor's memory is not exportable: make it with interop.exportable_tensor("
            "manager, array), or the optimizer with exportable=True"
        )
    dtype = str(tensor.data().dtype)  # the staging view's dtype: the tensor's own
    shape, info, _manager = _ext.described_or_refuse(tensor, "export_memory")
    fd, allocation_size, memory_type = _ext.export_fd(tensor)
    return ExternalMemory(
        fd,
        size=4 * int(tensor.size()),
        dtype=dtype,
        shape=shape,
        device_uuid=info.device_uuid,
        driver_uuid=info.driver_uuid,
        allocation_size=allocation_size,
        memory_type=memory_type,
    )


def _checked(metadata: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(metadata, Mapping):
        raise TypeError(
            f"metadata must be the dict ExternalMemory.metadata() returned (got {type(metadata).__name__})"
        )
    need: tuple[str, ...] = ("version", "size", "dtype", "shape", "device_uuid", "allocation_size")
    need += ("memory_type_index", "fd_identity")
    missing = [k for k in need if k not in metadata]
    if missing:
        raise ValueError(f"metadata lacks {missing}: pass the dict ExternalMemory.metadata() returned")
    if metadata["version"] != METADATA_VERSION:
        raise ValueError(f"metadata version {metadata['version']!r}; this vk-adam reads {METADATA_VERSION}")
    dtype = metadata["dtype"]
    if dtype not in _ext.EXPORT_DTYPES:
        raise ValueError(f"metadata dtype {dtype!r} is not one of {list(_ext.EXPORT_DTYPES)}")
    shape = tuple(int(n) for n in metadata["shape"])
    size = int(metadata["size"])
    if any(n < 1 for n in shape) or size != 4 * math.prod(shape):
        raise ValueError(
            f"metadata size {size} bytes does not match shape {list(shape)} of {dtype} "
            f"({4 * math.prod(shape)} bytes)"
        )
    if int(metadata.get("offset", 0)) != 0:
        raise ValueError("metadata offset must be 0 (exports are dedicated allocations)")
    if int(metadata["allocation_size"]) < size:
        raise ValueError(
            f"metadata allocation_size {metadata['allocation_size']} is smaller than its size {size}"
        )
    return {**metadata, "shape": shape, "size": size}


def import_memory(fd: int, metadata: Mapping[str, Any], *, manager: Any) -> Any:
    """A kp tensor on ``manager`` over memory another device exported (same GPU): reads and
    writes reach the exporter's memory, no copy. Takes ownership of ``fd`` on success; on any
    error nothing is imported and the fd stays the caller's.

    Refused with ValueError: an fd that is not the exported memory the metadata describes, a
    size or dtype that does not match, memory of another GPU (both deviceUUIDs in the message),
    a closed :class:`ExternalMemory`."""
    if isinstance(fd, ExternalMemory):
        fd = fd.fd  # raises when closed
    if not isinstance(fd, int) or isinstance(fd, bool) or fd < 0:
        raise TypeError(f"fd must be an open file descriptor (int >= 0), got {fd!r}")
    meta = _checked(metadata)
    mgr = as_manager(manager)
    info = _sharing(mgr, "fd_import")
    if meta["device_uuid"] != info.device_uuid:
        raise ValueError(
            f"the memory was exported by another GPU (deviceUUID {meta['device_uuid']}); this "
            f"manager's device is deviceUUID {info.device_uuid}. Import it on the same physical device"
        )
    if meta.get("driver_uuid", info.driver_uuid) != info.driver_uuid:
        raise ValueError(
            f"the memory was exported by another driver (driverUUID {meta['driver_uuid']}); this "
            f"device's driver is {info.driver_uuid}"
        )
    try:
        identity = _ext.fd_identity(fd)
    except OSError as exc:
        raise ValueError(f"fd {fd} is not open ({exc.strerror}); an ExternalMemory's fd was closed?") from exc
    if list(identity) != [int(n) for n in meta["fd_identity"]]:
        raise ValueError(
            f"fd {fd} is not the exported memory this metadata describes (another file); pass the "
            "fd that came with the metadata"
        )
    elements = meta["size"] // 4
    tensor = _ext.import_fd(
        mgr, fd, int(meta["allocation_size"]), int(meta["memory_type_index"]), elements, meta["dtype"]
    )
    # Success: the driver owns the fd now. An ExternalMemory of this process holding that number
    # must not close it.
    owner = _LIVE.pop(fd, None)
    if owner is not None and owner._fd == fd:
        owner._taken = True
        owner._fd = -1
    _ext.remember(tensor, meta["shape"], info, mgr)
    return tensor


def device_uuid(manager: Any) -> str:
    """The deviceUUID (hex) of ``manager``'s physical device, '' where kp cannot tell."""
    info = _ext.sharing(as_manager(manager))
    return info.device_uuid if info else ""


__all__ = [
    "METADATA_VERSION",
    "ExternalMemory",
    "as_torch",
    "device_uuid",
    "export_memory",
    "exportable_tensor",
    "import_memory",
    "to_cuda",
    "to_vulkan",
]
