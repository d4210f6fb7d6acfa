"""Vulkan external memory through kp (vk-adam's patch 0017): what a device can share, exportable
tensors, their opaque fds, and importing such an fd into another ``kp.Manager``.

The only kp calls of ``vk_adam.interop`` live here. An opaque fd is dup'd by the OS when it
crosses a process (``pass_fds``, ``socket.send_fds``) but keeps its open file description, so
``fd_identity`` (st_dev, st_ino) recorded at export tells, at import, whether an fd is the
exported memory described by a metadata dict before any driver sees it. An import hands the
driver a ``dup()`` of the caller's fd, never the fd itself (see :func:`import_fd`).
"""

from __future__ import annotations

import os
import re
import threading
import uuid
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

import numpy as np

from ._kp import kp_features, kp_module
from .devices import DeviceInfo

#: kp tensor dtypes an exportable tensor may hold (4-byte words).
EXPORT_DTYPES = ("float32", "uint32", "int32")

#: A device or driver UUID as an application may hold it: 16 bytes (``bytes``, or an iterable of
#: 16 ints such as Vulkan's ``uint8_t[VK_UUID_SIZE]``), or text in any usual spelling.
UuidLike: TypeAlias = str | bytes | bytearray | memoryview | Iterable[int]


def normalise_uuid(value: UuidLike, what: str = "UUID") -> str:
    """``value`` as 32 lower-case hex digits, vk-adam's spelling of a deviceUUID or driverUUID.

    Text may be upper or lower case, with or without dashes, braces or a ``urn:uuid:`` prefix
    (``"6D657361-3232-2E33-2E36-000000000000"``, ``"{6d657361...}"``); bytes and int
    sequences must hold 16 bytes. ValueError (naming ``what``) for anything else."""
    if isinstance(value, str):
        try:
            return uuid.UUID(value.strip()).hex
        except ValueError:
            raise ValueError(
                f"{what} {value!r} is not a UUID: give 32 hex digits (case, dashes and braces do "
                "not matter) or 16 bytes"
            ) from None
    try:
        raw = bytes(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"{what} {value!r} is not a UUID: give 16 bytes (e.g. VkPhysicalDeviceIDProperties."
            "deviceUUID) or 32 hex digits"
        ) from None
    if len(raw) != 16:
        raise ValueError(f"{what} holds {len(raw)} bytes; a Vulkan UUID has 16 (VK_UUID_SIZE)")
    return raw.hex()


@dataclass(frozen=True)
class Sharing:
    """What one device can share (``Manager.external_memory_properties()``)."""

    device_uuid: str
    driver_uuid: str
    host_import: bool
    min_host_alignment: int
    fd_export: bool
    fd_import: bool

    def describe(self) -> str:
        """One line for ``vk-adam info``."""
        abilities = [
            name
            for name, ok in (
                (f"host memory import (alignment {self.min_host_alignment} B)", self.host_import),
                ("opaque fd export", self.fd_export),
                ("opaque fd import", self.fd_import),
            )
            if ok
        ]
        return f"deviceUUID {self.device_uuid}; external memory: {', '.join(abilities) or 'none'}"


def supported() -> bool:
    """Whether the imported kp build has external memory (patch 0017)."""
    return "external memory" in kp_features().patches


def sharing(manager: Any) -> Sharing | None:
    """The device's identity and sharing abilities, or None on a kp build without them."""
    if not supported():
        return None
    props = manager.external_memory_properties()
    return Sharing(
        device_uuid=bytes(props["device_uuid"]).hex(),
        driver_uuid=bytes(props["driver_uuid"]).hex(),
        host_import=bool(props["host_import"]),
        min_host_alignment=int(props["min_imported_host_pointer_alignment"]),
        fd_export=bool(props["fd_export"]),
        fd_import=bool(props["fd_import"]),
    )


def with_sharing(info: DeviceInfo, found: Sharing | None) -> DeviceInfo:
    """``info`` with the open device's deviceUUID and external-memory abilities (``found``: its
    :func:`sharing`) filled in."""
    if found is None:
        return info
    abilities = tuple(
        name
        for name, ok in (
            ("host import", found.host_import),
            ("fd export", found.fd_export),
            ("fd import", found.fd_import),
        )
        if ok
    )
    alignment = found.min_host_alignment if found.host_import else 0
    uuid = found.device_uuid
    return replace(info, device_uuid=uuid, external_memory=abilities, host_import_alignment=alignment)


def exportable_tensor(manager: Any, data: np.ndarray) -> Any:
    """A device tensor whose memory is a dedicated allocation exportable as an opaque fd; ``data``
    (contiguous, 4-byte dtype) is copied into its staging memory."""
    return manager.tensor_exportable(np.ascontiguousarray(data).reshape(-1))


def upload_and_wait(manager: Any, tensors: Sequence[Any]) -> None:
    """Copy the tensors' staging memory into their device memory, and wait until it is there."""
    sequence = manager.sequence()
    try:
        sequence.eval(kp_module().OpTensorSyncDevice(list(tensors)))
    finally:
        sequence.destroy()


# id(tensor) -> (weakref to it, the shape it was made with (kp tensors are flat), its device, its
# kp.Manager): what export_memory's metadata and the CUDA hand-over need of an exportable or
# imported tensor made in this process.
_DESCRIBED: dict[int, tuple[Any, tuple[int, ...], Sharing, Any]] = {}


def remember(tensor: Any, shape: tuple[int, ...], info: Sharing, manager: Any) -> None:
    """Record the shape, device and manager of an exportable or imported tensor, for ``described``."""
    key = id(tensor)
    ref = weakref.ref(tensor, lambda _ref: _DESCRIBED.pop(key, None))
    _DESCRIBED[key] = (ref, shape, info, manager)


def described(tensor: Any) -> tuple[tuple[int, ...], Sharing, Any] | None:
    """The shape, device and manager ``remember`` recorded for ``tensor``, or None."""
    entry = _DESCRIBED.get(id(tensor))
    if entry is None or entry[0]() is not tensor:
        return None
    return entry[1], entry[2], entry[3]


def described_or_refuse(tensor: Any, what: str) -> tuple[tuple[int, ...], Sharing, Any]:
    """:func:`described`, or ValueError naming ``what`` for a tensor this process did not make."""
    found = described(tensor)
    if found is None:
        raise ValueError(
            f"{what}: this exportable tensor was not made by interop.exportable_tensor, "
            "import_memory or an optimizer with exportable=True in this process"
        )
    return found


def exportable_buffer(manager: Any, data: np.ndarray, info: Sharing) -> Any:
    """:func:`exportable_tensor` for a buffer vk-adam makes (flat; its device ``info``), which
    ``vk_adam.interop.export_memory`` can then export."""
    tensor = exportable_tensor(manager, data)
    remember(tensor, (int(tensor.size()),), info, manager)
    return tensor


def export_fd(tensor: Any) -> tuple[int, int, int]:
    """A new fd for the tensor's memory, with the allocation's size and memory type index."""
    fd = int(tensor.export_fd())
    return fd, int(tensor.allocation_size()), int(tensor.memory_type_index())


def is_exportable(tensor: Any) -> bool:
    return supported() and str(tensor.external_kind()) == "exportable"


def fd_identity(fd: int) -> tuple[int, int]:
    """(st_dev, st_ino) of an open fd (OSError when it is not open)."""
    st = os.fstat(fd)
    return int(st.st_dev), int(st.st_ino)


# One import at a time in this process: between a failed import and the check of its dup, no
# other import here can be handed the same fd number.
_IMPORTING = threading.Lock()

# kp's import refuses, before the driver, an allocation smaller than the buffer needs, and a
# memory type the buffer cannot use; its messages (patch 0017) name what it found.
_NEEDS = re.compile(r"smaller than this buffer needs \((\d+) bytes\)")
_TYPE_REFUSED = "of the exported memory cannot back this buffer"


class ImportRefused(ValueError):
    """An opaque-fd import refused before the driver saw it; the fd was not touched."""


def import_fd(
    manager: Any, fd: int, allocation_size: int, memory_type: int, elements: int, dtype: str
) -> Any:
    """A device tensor of ``elements`` words over the memory behind the opaque ``fd``, imported
    as a dedicated allocation of ``allocation_size`` bytes and memory type ``memory_type``.

    Checked before the driver sees anything (:class:`ImportRefused`): ``allocation_size``
    equals the buffer's ``VkMemoryRequirements::size`` (a dedicated import must give exactly
    that), and ``memory_type`` is in its ``memoryTypeBits``.

    The driver is handed a ``dup()`` of ``fd``, never ``fd`` itself: ``fd`` stays the caller's,
    open, whatever happens. On success the driver owns the dup. On failure the dup is closed,
    unless the driver closed it already (Mesa does, against the spec): it is closed only while
    it is still the same file as ``fd``. RuntimeError (what was checked, what was not) when the
    driver refuses the import."""
    identity = fd_identity(fd)
    with _IMPORTING:
        mine = os.dup(fd)
        try:
            needed = _required_size(manager, mine, fd, memory_type, elements, dtype)
            if needed is not None and allocation_size != needed:
                raise ImportRefused(
                    f"allocation_size {allocation_size} does not match the memory requirements of "
                    f"a {4 * elements}-byte buffer on this device (VkMemoryRequirements::size: "
                    f"{needed} bytes). A dedicated import must give exactly the exporter's "
                    "VkMemoryAllocateInfo::allocationSize, which is that size. Checked before the "
                    f"driver: this size, and that memory_type_index {memory_type} is one the "
                    "buffer can use (VkMemoryRequirements::memoryTypeBits; Vulkan has no query of "
                    f"the types an opaque fd allows). Your fd {fd} is still open, and yours"
                )
            return manager.tensor_import_fd(mine, allocation_size, memory_type, elements, dtype)
        except ImportRefused:
            os.close(mine)  # never handed to the driver
            raise
        except RuntimeError as exc:
            _close_if_same(mine, identity)
            raise RuntimeError(_driver_refused(str(exc), fd, allocation_size, memory_type, elements)) from exc
        except BaseException:
            _close_if_same(mine, identity)
            raise


def _required_size(
    manager: Any, mine: int, fd: int, memory_type: int, elements: int, dtype: str
) -> int | None:
    """``VkMemoryRequirements::size`` of the buffer an import of ``elements`` words makes (kp has
    no query: its import of 0 bytes is refused before the driver, naming it); ImportRefused when
    ``memory_type`` cannot back the buffer; None when kp does not say."""
    try:
        tensor = manager.tensor_import_fd(mine, 0, memory_type, elements, dtype)
    except RuntimeError as exc:
        message = str(exc)
        if _TYPE_REFUSED in message:
            raise ImportRefused(
                f"memory_type_index {memory_type} cannot back a {4 * elements}-byte storage buffer "
                "on this device (it is not in the buffer's VkMemoryRequirements::memoryTypeBits). "
                "Pass the exporter's own VkMemoryAllocateInfo::memoryTypeIndex (Vulkan has no "
                "query of the types an opaque fd allows: vkGetMemoryFdPropertiesKHR does not take "
                f"opaque fds). Checked before the driver; your fd {fd} is still open, and yours"
            ) from None
        found = _NEEDS.search(message)
        return int(found.group(1)) if found else None
    tensor.destroy()  # no kp build imports 0 bytes; were one to, nothing is kept
    raise RuntimeError("kp imported an opaque fd of 0 bytes; this kp build is not vk-adam's")


def _close_if_same(fd: int, identity: tuple[int, int]) -> None:
    try:
        still = fd_identity(fd) == identity
    except OSError:  # the driver closed it, and nothing reused the number
        return
    if still:
        os.close(fd)


def _driver_refused(error: str, fd: int, allocation_size: int, memory_type: int, elements: int) -> str:
    return (
        f"the driver refused to import the opaque fd: {error}. Checked before: allocation_size "
        f"{allocation_size} equals the memory requirements of this {4 * elements}-byte buffer, and "
        f"memory type {memory_type} can back it. Not checkable: Vulkan has no query of the "
        "memory types an opaque fd allows (vkGetMemoryFdPropertiesKHR does not take opaque fds), "
        "so memory_type_index must be the exporter's own VkMemoryAllocateInfo::memoryTypeIndex; "
        "the exporter's memory must be a dedicated allocation of a buffer like this one "
        "(STORAGE_BUFFER | TRANSFER_SRC | TRANSFER_DST usage, exportable as an opaque fd) on the "
        f"same physical device and driver (docs/interop.md). Your fd {fd} is still open, and yours"
    )


def import_host_range(manager: Any, address: int, nbytes: int, alignment: int) -> tuple[Any, int]:
    """A storage tensor over the whole pages that hold the bytes ``[address, address + nbytes)``
    (``VK_EXT_external_memory_host``: the import must start and end on ``alignment``), and the
    first byte's offset in it. Those bytes are only ever copied with byte ranges, so any
    address works. The pages must stay mapped while the tensor lives. RuntimeError when the
    driver refuses the memory (e.g. a file mapping)."""
    base = address - address % alignment
    size = -(-(address + nbytes - base) // alignment) * alignment
    return manager.tensor_import_host(base, size, 0, size // 4), address - base


def import_host_array(manager: Any, address: int, nbytes: int, alignment: int) -> Any:
    """A storage tensor over exactly the bytes ``[address, address + nbytes)`` (a whole number of
    4-byte words), bound at their first byte inside the imported whole pages, so a shader can
    bind it. RuntimeError when the driver refuses the memory or the offset is not aligned for a
    buffer."""
    base = address - address % alignment
    size = -(-(address + nbytes - base) // alignment) * alignment
    return manager.tensor_import_host(base, size, address - base, nbytes // 4)


def copy_regions_op(
    source: Any,
    destination: Any,
    regions: list[tuple[int, int, int]],
    *,
    source_staging: bool = False,
    destination_staging: bool = False,
) -> Any:
    """One ``vkCmdCopyBuffer`` of byte ``regions`` (source offset, destination offset, bytes);
    ``*_staging``: that device tensor's host staging buffer. Records no barrier."""
    return kp_module().OpCopyRegions(
        source,
        destination,
        regions,
        source_staging=source_staging,
        destination_staging=destination_staging,
    )


def host_read_barrier_op(tensors: list[Any], *, staging: bool = False, after_shader: bool = False) -> Any:
    """Make transfer writes (``after_shader``: compute-shader writes) to ``tensors`` (their staging
    buffers with ``staging``) visible to host reads after the submission's fence wait."""
    kp = kp_module()
    access, stage = kp.AccessFlagBits, kp.PipelineStageFlagBits
    if after_shader:
        src, src_stage = int(access.shader_write), int(stage.compute_shader)
    else:
        src, src_stage = int(access.transfer_write), int(stage.transfer)
    return kp.OpMemoryBarrier(tensors, src, int(access.host_read), src_stage, int(stage.host), not staging)


def ownership_transfer_op(tensors: list[Any], manager: Any, *, to_external: bool) -> Any:
    """A queue family ownership transfer of ``tensors``' device buffers between ``manager``'s
    compute queue family and ``VK_QUEUE_FAMILY_EXTERNAL`` (another API, e.g. CUDA): the release
    after Vulkan's last transfer or shader access (``to_external``), or the acquire before its
    next one. Needs kp's patch 0018."""
    kp = kp_module()
    access, stage = kp.AccessFlagBits, kp.PipelineStageFlagBits
    family = int(manager.queue_family_index(0))
    used = int(access.shader_read | access.shader_write | access.transfer_read | access.transfer_write)
    stages = int(stage.compute_shader | stage.transfer)
    if to_external:  # release: the destination's access and stage are the other API's
        args = (used, 0, stages, int(stage.bottom_of_pipe), family, int(kp.QUEUE_FAMILY_EXTERNAL))
    else:  # acquire: the source's are the other API's
        args = (0, used, int(stage.top_of_pipe), stages, int(kp.QUEUE_FAMILY_EXTERNAL), family)
    src_access, dst_access, src_stage, dst_stage, src_family, dst_family = args
    return kp.OpMemoryBarrier(
        tensors,
        src_access,
        dst_access,
        src_stage,
        dst_stage,
        True,
        src_queue_family=src_family,
        dst_queue_family=dst_family,
    )


def ownership_transfers() -> bool:
    """Whether the kp build records queue family ownership transfers (patch 0018)."""
    return "queue family ownership transfer" in kp_features().patches


def written(tensor: Any) -> bool | None:
    """Whether a kp tensor's device memory was ever written; None when the kp build cannot tell."""
    probe = getattr(tensor, "written", None)
    return None if probe is None else bool(probe())


def refuse_unwritten(tensor: Any, what: str) -> None:
    """Refuse a kp tensor whose device memory was never written: stepping it would read whatever
    the allocation held (a patched kp tracks uploads, copies, dispatches and imports)."""
    if written(tensor) is False:
        raise ValueError(
            f"{what} is a kp tensor whose device memory was never written, so a step would read "
            "uninitialised memory. Upload it first: manager.sequence().eval(kp.OpTensorSyncDevice("
            "[tensor])) (or write it with your own shader or a copy) before step() or record_step()"
        )


__all__ = [
    "EXPORT_DTYPES",
    "ImportRefused",
    "Sharing",
    "UuidLike",
    "copy_regions_op",
    "described",
    "described_or_refuse",
    "export_fd",
    "exportable_buffer",
    "exportable_tensor",
    "fd_identity",
    "host_read_barrier_op",
    "import_fd",
    "import_host_array",
    "import_host_range",
    "is_exportable",
    "kp_module",
    "normalise_uuid",
    "ownership_transfer_op",
    "ownership_transfers",
    "refuse_unwritten",
    "remember",
    "sharing",
    "supported",
    "upload_and_wait",
    "with_sharing",
    "written",
]
