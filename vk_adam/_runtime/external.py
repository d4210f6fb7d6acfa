"""Vulkan external memory through kp (vk-adam's patch 0017): what a device can share, exportable
tensors, their opaque fds, and importing such an fd into another ``kp.Manager``.

The only kp calls of ``vk_adam.interop`` live here. An opaque fd is dup'd by the OS when it
crosses a process (``pass_fds``, ``socket.send_fds``) but keeps its open file description, so
``fd_identity`` (st_dev, st_ino) recorded at export tells, at import, whether an fd is the
exported memory described by a metadata dict before any driver sees it.
"""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ._kp import kp_features, kp_module
from .devices import DeviceInfo

#: kp tensor dtypes an exportable tensor may hold (4-byte words).
EXPORT_DTYPES = ("float32", "uint32", "int32")


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


def with_sharing(info: DeviceInfo, manager: Any) -> DeviceInfo:
    """``info`` with the open device's deviceUUID and external-memory abilities filled in."""
    found = sharing(manager)
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


def import_fd(
    manager: Any, fd: int, allocation_size: int, memory_type: int, elements: int, dtype: str
) -> Any:
    """A device tensor over the exported memory; the driver owns ``fd`` once this returns."""
    return manager.tensor_import_fd(fd, allocation_size, memory_type, elements, dtype)


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
    "Sharing",
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
    "ownership_transfer_op",
    "ownership_transfers",
    "refuse_unwritten",
    "remember",
    "sharing",
    "supported",
    "with_sharing",
    "written",
]
