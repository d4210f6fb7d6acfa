"""The runtime layer: the only code that imports or calls kp (Kompute). This file is its face:
every other package imports what it needs from here, never from a module below.

``shared`` keeps one kp.Manager per process and device index, reference-counted, for every
vk-adam object that needs a device. ``Runtime`` holds a reference on it, owns the buffers,
pipelines and sequences one user made, and turns the project's terms (upload, download,
dispatch, barrier, run, submit, wait) into kp calls, on vk-adam's patched kp or, with a warning,
on a stock kp 0.9.0. Buffers cross this boundary as kp tensors that only the functions of
``tensors`` (and ``Runtime``) operate on. ``Runtime.facts`` (``facts``: a ``DeviceFacts``, read
once) holds every limit and feature of its device that a decision reads. Device discovery,
external memory (``external``, ``collective_memory``, ``cuda_views``), the bridges that order
Vulkan and CUDA work (``bridges``) and the kp import with its feature detection live beside it.
"""

from .._values import is_kp_tensor
from ._kp import KpFeatures, StockKpWarning, kp_features
from .bridges import CudaBridge, HostMirrorBridge, SemaphoreBridge, stand_in_for_cuda
from .bridges import wanted as bridge_for
from .collective_memory import DeviceStaging, Region, check_float32, region_copies_available
from .cuda_views import as_torch, to_cuda, to_vulkan
from .devices import DEVICE_ENV, DeviceInfo, list_devices, select_device
from .external import (
    EXPORT_DTYPES,
    Sharing,
    UuidLike,
    copy_regions_op,
    described,
    described_or_refuse,
    export_fd,
    exportable_tensor,
    fd_identity,
    host_read_barrier_op,
    import_fd,
    import_host_array,
    import_host_range,
    is_exportable,
    normalise_uuid,
    ownership_transfers,
    refuse_unwritten,
    remember,
    sharing,
    upload_and_wait,
)
from .facts import (
    MAX_WORKGROUPS,
    MAX_WORKGROUPS_ENV,
    WORKGROUP_SIZE,
    DeviceFacts,
    all_device_limits,
    device_limits,
)
from .instance import imported_kp_has_validation_log, imported_kp_version, release_imported_instance
from .limits import (
    STAGE_COMPUTE,
    SUBGROUP_ARITHMETIC,
    SUBGROUP_BASIC,
    DeviceLimits,
    check_one_allocation,
    max_elements,
)
from .runtime import Dispatch, Pending, Runtime, Upload
from .shared import LINGER_ENV, DeviceHandle, as_manager, open_device, open_devices
from .tensors import (
    device_of,
    element_count,
    free_tensor,
    has_host_copy,
    host_dtype,
    host_view,
    is_alive,
    uploads_and_sizes,
    uploads_of,
)

__all__ = [
    "DEVICE_ENV",
    "EXPORT_DTYPES",
    "LINGER_ENV",
    "MAX_WORKGROUPS",
    "MAX_WORKGROUPS_ENV",
    "STAGE_COMPUTE",
    "SUBGROUP_ARITHMETIC",
    "SUBGROUP_BASIC",
    "WORKGROUP_SIZE",
    "CudaBridge",
    "DeviceFacts",
    "DeviceHandle",
    "DeviceInfo",
    "DeviceLimits",
    "DeviceStaging",
    "Dispatch",
    "HostMirrorBridge",
    "KpFeatures",
    "Pending",
    "Region",
    "Runtime",
    "SemaphoreBridge",
    "Sharing",
    "StockKpWarning",
    "Upload",
    "UuidLike",
    "all_device_limits",
    "as_manager",
    "as_torch",
    "bridge_for",
    "check_float32",
    "check_one_allocation",
    "copy_regions_op",
    "described",
    "described_or_refuse",
    "device_limits",
    "device_of",
    "element_count",
    "export_fd",
    "exportable_tensor",
    "fd_identity",
    "free_tensor",
    "has_host_copy",
    "host_dtype",
    "host_read_barrier_op",
    "host_view",
    "import_fd",
    "import_host_array",
    "import_host_range",
    "imported_kp_has_validation_log",
    "imported_kp_version",
    "is_alive",
    "is_exportable",
    "is_kp_tensor",
    "kp_features",
    "list_devices",
    "max_elements",
    "normalise_uuid",
    "open_device",
    "open_devices",
    "ownership_transfers",
    "refuse_unwritten",
    "region_copies_available",
    "release_imported_instance",
    "remember",
    "select_device",
    "sharing",
    "stand_in_for_cuda",
    "to_cuda",
    "to_vulkan",
    "upload_and_wait",
    "uploads_and_sizes",
    "uploads_of",
]
