"""The runtime layer: the only code that imports or calls kp (Kompute).

``shared`` keeps one kp.Manager per process and device index, reference-counted, for every
vk-adam object that needs a device. ``Runtime`` holds a reference on it, owns the buffers,
pipelines and sequences one user made, and turns the project's terms (upload, download,
dispatch, barrier, run, submit, wait) into kp calls, on vk-adam's patched kp or, with a warning,
on a stock kp 0.9.0. Device discovery and the kp import with its feature detection live beside it.
"""

from ._kp import KpFeatures, StockKpWarning, kp_features, kp_module
from .devices import DEVICE_ENV, DeviceInfo, list_devices, select_device
from .runtime import MAX_ELEMENTS, MAX_WORKGROUPS, WORKGROUP_SIZE, Pending, Runtime, as_manager, is_kp_tensor
from .shared import LINGER_ENV, DeviceHandle, open_device, open_devices

__all__ = [
    "DEVICE_ENV",
    "LINGER_ENV",
    "MAX_ELEMENTS",
    "MAX_WORKGROUPS",
    "WORKGROUP_SIZE",
    "DeviceHandle",
    "DeviceInfo",
    "KpFeatures",
    "Pending",
    "Runtime",
    "StockKpWarning",
    "as_manager",
    "is_kp_tensor",
    "kp_features",
    "kp_module",
    "list_devices",
    "open_device",
    "open_devices",
    "select_device",
]
