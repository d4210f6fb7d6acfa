"""Sharing vk-adam's Vulkan memory without a copy: with another ``kp.Manager`` (another VkDevice
on the same GPU) in this process or in another one.

```python
from vk_adam import interop
t = interop.exportable_tensor(manager, array)     # a kp.Tensor whose memory can be shared
ext = interop.export_memory(t)                    # ExternalMemory: an fd and its metadata
t2 = interop.import_memory(ext.fd, ext.metadata(), manager=other)   # imports a dup of the fd
ext.close()                                       # the fd stays the caller's to close
```

Memory is exported as a dedicated allocation and an opaque fd (``VK_KHR_external_memory_fd``).
:func:`import_memory` hands the driver a ``dup()`` of the fd: the caller's fd is the caller's
whatever happens, on success and on failure. Pass it to another process with
``subprocess.Popen(pass_fds=...)`` or ``socket.send_fds`` and the JSON-able
:meth:`ExternalMemory.metadata` beside it. Memory another Vulkan application exported is
described by :func:`foreign_metadata`.

Both sides see the same bytes; ordering their reads and writes is the application's (for
example: the writer waits for its step, then signals the reader). See docs/interop.md.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ._errors import DeviceCapabilityError
from ._runtime import (
    EXPORT_DTYPES,
    Sharing,
    UuidLike,
    as_manager,
    as_torch,
    described_or_refuse,
    element_count,
    export_fd,
    fd_identity,
    host_dtype,
    import_fd,
    is_alive,
    is_exportable,
    is_kp_tensor,
    normalise_uuid,
    remember,
    sharing,
    to_cuda,
    to_vulkan,
    upload_and_wait,
)
from ._runtime import exportable_tensor as _exportable_tensor

#: Bump when the metadata's fields change meaning.
METADATA_VERSION = 1


class ExternalMemory:
    """An exported tensor's memory: an opaque fd this object owns, and what an importer needs.

    ``fd``, ``size`` (bytes), ``offset`` (bytes into the allocation; 0: dedicated), ``dtype``,
    ``shape``, ``device_uuid`` (hex). :meth:`metadata` is the JSON-able description without the
    fd; :meth:`close` closes the fd (the exported tensor, and tensors imported from the fd, are
    unaffected)."""

    __slots__ = (
        "_allocation_size",
        "_fd",
        "_identity",
        "_memory_type",
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
        self._identity = fd_identity(fd)
        self.size, self.offset, self.dtype, self.shape = size, 0, dtype, shape
        self.device_uuid, self.driver_uuid = device_uuid, driver_uuid
        self._allocation_size, self._memory_type = allocation_size, memory_type

    @property
    def fd(self) -> int:
        """The opaque fd, owned by this object until :meth:`close` (imports take a dup of it)."""
        if self._fd < 0:
            raise ValueError(
                "this ExternalMemory is closed; call interop.export_memory(tensor) again for a new fd"
            )
        return self._fd

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` closed the fd."""
        return self._fd < 0

    def metadata(self) -> dict[str, Any]:
        """What :func:`import_memory` needs beside the fd, as plain JSON-able values."""
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
        if fd >= 0:
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


def _sharing(manager: Any, need: str) -> Sharing:
    info = sharing(manager)
    if info is None:
        raise RuntimeError(
            "this kp build has no external memory (vk-adam's kp patch 0017); run "
            "`bash scripts/setup.sh` or install vk-adam's kp wheel"
        )
    if not getattr(info, need):
        what = {"fd_export": "export memory as an opaque fd", "fd_import": "import an opaque fd"}[need]
        raise DeviceCapabilityError(
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
    if data.dtype.name not in EXPORT_DTYPES:
        raise TypeError(f"exportable tensors hold float32, uint32 or int32 (got {data.dtype})")
    if data.size == 0:
        raise ValueError("an exportable tensor needs at least one element")
    info = _sharing(mgr, "fd_export")
    tensor = _exportable_tensor(mgr, data)
    upload_and_wait(mgr, [tensor])
    remember(tensor, tuple(int(n) for n in data.shape), info, mgr)
    return tensor


def export_memory(tensor: Any) -> ExternalMemory:
    """Export an exportable kp tensor's memory (:func:`exportable_tensor`, or an optimizer's
    buffers made with ``exportable=True``): a new fd each call, owned by the returned object."""
    if not is_kp_tensor(tensor):
        raise TypeError(f"export_memory takes a kp.Tensor (got {type(tensor).__name__})")
    if not is_alive(tensor):
        raise ValueError("this kp tensor was destroyed")
    if not is_exportable(tensor):
        raise ValueError(
            "this kp tensor's memory is not exportable: make it with interop.exportable_tensor("
            "manager, array), or the optimizer with exportable=True"
        )
    dtype = str(host_dtype(tensor))  # the staging view's dtype: the tensor's own
    shape, info, _manager = described_or_refuse(tensor, "export_memory")
    fd, allocation_size, memory_type = export_fd(tensor)
    return ExternalMemory(
        fd,
        size=4 * element_count(tensor),
        dtype=dtype,
        shape=shape,
        device_uuid=info.device_uuid,
        driver_uuid=info.driver_uuid,
        allocation_size=allocation_size,
        memory_type=memory_type,
    )


#: The fields :func:`import_memory` needs in its metadata (``offset``, 0, and ``driver_uuid`` may
#: be left out). docs/interop.md says what each one holds.
REQUIRED_FIELDS = (
    "version",
    "size",
    "dtype",
    "shape",
    "device_uuid",
    "allocation_size",
    "memory_type_index",
    "fd_identity",
)

#: VK_MAX_MEMORY_TYPES: a memory type index is below it.
_MAX_MEMORY_TYPES = 32


def _checked(metadata: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(metadata, Mapping):
        raise TypeError(
            "metadata must be a dict: ExternalMemory.metadata(), or interop.foreign_metadata(fd, ...) "
            f"for memory another application exported (got {type(metadata).__name__})"
        )
    missing = [k for k in REQUIRED_FIELDS if k not in metadata]
    if missing:
        raise ValueError(
            f"metadata lacks {missing}: pass the dict ExternalMemory.metadata() returned or, for "
            "memory another Vulkan application exported, build it with interop.foreign_metadata("
            "fd, shape=..., allocation_size=..., memory_type_index=..., device_uuid=...) "
            "(docs/interop.md says what each field holds)"
        )
    if metadata["version"] != METADATA_VERSION:
        raise ValueError(f"metadata version {metadata['version']!r}; this vk-adam reads {METADATA_VERSION}")
    dtype = metadata["dtype"]
    if dtype not in EXPORT_DTYPES:
        raise ValueError(f"metadata dtype {dtype!r} is not one of {list(EXPORT_DTYPES)}")
    shape = tuple(int(n) for n in metadata["shape"])
    size = int(metadata["size"])
    if any(n < 1 for n in shape) or size != 4 * math.prod(shape):
        raise ValueError(
            f"metadata size {size} bytes does not match shape {list(shape)} of {dtype} "
            f"({4 * math.prod(shape)} bytes)"
        )
    if int(metadata.get("offset", 0)) != 0:
        raise ValueError("metadata offset must be 0 (exports are dedicated allocations)")
    allocation_size = int(metadata["allocation_size"])
    if allocation_size < size:
        raise ValueError(f"metadata allocation_size {allocation_size} is smaller than its size {size}")
    memory_type = int(metadata["memory_type_index"])
    if not 0 <= memory_type < _MAX_MEMORY_TYPES:
        raise ValueError(
            f"metadata memory_type_index {memory_type} is not a Vulkan memory type index (0 to "
            f"{_MAX_MEMORY_TYPES - 1}): pass the exporter's VkMemoryAllocateInfo::memoryTypeIndex"
        )
    identity = [int(n) for n in metadata["fd_identity"]]
    if len(identity) != 2:
        raise ValueError(
            f"metadata fd_identity {metadata['fd_identity']!r} must be [st_dev, st_ino] of the fd "
            "(os.fstat); interop.foreign_metadata(fd, ...) fills it in"
        )
    driver = metadata.get("driver_uuid")
    return {
        **metadata,
        "shape": shape,
        "size": size,
        "allocation_size": allocation_size,
        "memory_type_index": memory_type,
        "fd_identity": identity,
        "device_uuid": normalise_uuid(metadata["device_uuid"], "metadata device_uuid"),
        "driver_uuid": normalise_uuid(driver, "metadata driver_uuid") if driver else None,
    }


def foreign_metadata(
    fd: int,
    *,
    shape: int | Sequence[int],
    allocation_size: int,
    memory_type_index: int,
    device_uuid: UuidLike,
    driver_uuid: UuidLike | None = None,
    dtype: str = "float32",
) -> dict[str, Any]:
    """The metadata :func:`import_memory` needs for memory another Vulkan application exported
    (not through vk-adam), from the fd and the exporter's own facts. JSON-able, like
    :meth:`ExternalMemory.metadata`, so it can travel to another process beside the fd.

    - ``fd``: the opaque fd from ``vkGetMemoryFdKHR`` (``VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT``);
      its ``[st_dev, st_ino]`` (``os.fstat``) becomes ``fd_identity``, which tells at import
      that an fd is this memory.
    - ``shape`` and ``dtype`` (float32, uint32 or int32): what the buffer holds. The exporter's
      ``VkBufferCreateInfo::size`` must be exactly ``4 * prod(shape)`` bytes.
    - ``allocation_size``: the exporter's ``VkMemoryAllocateInfo::allocationSize``, which for the
      dedicated allocation an export must be equals the buffer's ``VkMemoryRequirements::size``.
    - ``memory_type_index``: the exporter's ``VkMemoryAllocateInfo::memoryTypeIndex``.
    - ``device_uuid`` and ``driver_uuid``: ``VkPhysicalDeviceIDProperties::deviceUUID`` and
      ``driverUUID`` of the exporter's physical device, as 16 bytes (the ``uint8_t[16]`` array
      itself) or hex text in any usual spelling; stored as 32 lower-case hex digits.
      ``driver_uuid=None`` skips the driver check.

    ValueError when the facts cannot describe an importable buffer; OSError when ``fd`` is not
    open. The fd stays the caller's."""
    dims = [int(shape)] if isinstance(shape, int) else [int(n) for n in shape]
    meta: dict[str, Any] = {
        "version": METADATA_VERSION,
        "size": 4 * math.prod(dims),
        "offset": 0,
        "dtype": dtype,
        "shape": dims,
        "device_uuid": normalise_uuid(device_uuid, "device_uuid"),
        "allocation_size": int(allocation_size),
        "memory_type_index": int(memory_type_index),
        "fd_identity": list(fd_identity(fd)),
    }
    if driver_uuid is not None:
        meta["driver_uuid"] = normalise_uuid(driver_uuid, "driver_uuid")
    _checked(meta)
    return meta


def import_memory(fd: int | ExternalMemory, metadata: Mapping[str, Any], *, manager: Any) -> Any:
    """A kp tensor on ``manager`` over memory another device exported (same GPU): reads and
    writes reach the exporter's memory, no copy. ``metadata``: :meth:`ExternalMemory.metadata`,
    or :func:`foreign_metadata` for memory another Vulkan application exported.

    The driver is handed a ``dup()`` of ``fd``: the caller's fd stays open and the caller's
    whatever happens. After a success, close it when you no longer need it (the imported
    tensor holds the memory); after a failure it is as it was, even on drivers that close the
    fd they were given when an import fails.

    Refused with ValueError before the driver sees anything: an fd that is not the memory the
    metadata describes, a size or dtype that does not match, memory of another GPU or driver
    (both UUIDs in the message; any usual UUID spelling compares equal), an ``allocation_size``
    other than the buffer's ``VkMemoryRequirements::size`` on this device, a
    ``memory_type_index`` the buffer cannot use, a closed :class:`ExternalMemory`.
    RuntimeError when the driver refuses the import anyway: the message says what was checked
    and what Vulkan cannot check (the memory types an opaque fd allows)."""
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
    if meta["driver_uuid"] is not None and meta["driver_uuid"] != info.driver_uuid:
        raise ValueError(
            f"the memory was exported by another driver (driverUUID {meta['driver_uuid']}); this "
            f"device's driver is driverUUID {info.driver_uuid}"
        )
    try:
        identity = fd_identity(fd)
    except OSError as exc:
        raise ValueError(f"fd {fd} is not open ({exc.strerror}); an ExternalMemory's fd was closed?") from exc
    if list(identity) != meta["fd_identity"]:
        raise ValueError(
            f"fd {fd} is not the exported memory this metadata describes (another file); pass the "
            "fd that came with the metadata"
        )
    elements = meta["size"] // 4
    tensor = import_fd(mgr, fd, meta["allocation_size"], meta["memory_type_index"], elements, meta["dtype"])
    remember(tensor, meta["shape"], info, mgr)
    return tensor


def device_uuid(manager: Any) -> str:
    """The deviceUUID (hex) of ``manager``'s physical device, '' where kp cannot tell."""
    info = sharing(as_manager(manager))
    return info.device_uuid if info else ""


__all__ = [
    "METADATA_VERSION",
    "REQUIRED_FIELDS",
    "ExternalMemory",
    "UuidLike",
    "as_torch",
    "device_uuid",
    "export_memory",
    "exportable_tensor",
    "foreign_metadata",
    "import_memory",
    "to_cuda",
    "to_vulkan",
]
