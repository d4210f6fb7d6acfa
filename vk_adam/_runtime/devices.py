"""Vulkan device discovery and selection: which device a new optimizer opens."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._errors import NoVulkanDeviceError
from ._kp import kp_module
from .limits import DeviceLimits

#: Environment variable that overrides the device choice: an index or a name substring.
DEVICE_ENV = "VK_ADAM_DEVICE"

# Software rasterisers: usable, but only chosen when no hardware GPU exists.
_SOFTWARE_DEVICE = re.compile(r"llvmpipe|lavapipe|swiftshader|softpipe", re.IGNORECASE)
_INSTALL_HINT = (
    "Install a Vulkan driver and loader: for a CPU-only machine, Mesa's lavapipe "
    "(Debian/Ubuntu: apt-get install mesa-vulkan-drivers libvulkan1); for a GPU, its vendor's "
    "Vulkan driver. `vulkaninfo --summary` (package vulkan-tools) shows what the loader sees."
)


@dataclass(frozen=True)
class DeviceInfo:
    """One Vulkan physical device, as kp enumerates them (index = kp.Manager's ``device``)."""

    index: int
    name: str
    device_type: str  # "discrete", "integrated", "virtual", "cpu" or "unknown"
    driver: str
    api_version: str
    max_workgroup_count: int
    timestamps_supported: bool
    #: VkPhysicalDeviceSubgroupProperties, as a kp with vk-adam's patch 0015 reports them:
    #: lanes per subgroup, and the VkShaderStageFlags / VkSubgroupFeatureFlags bit masks that
    #: subgroup operations are supported in. 0 when the kp build cannot tell (stock kp).
    subgroup_size: int = 0
    subgroup_stages: int = 0
    subgroup_operations: int = 0
    #: Invocations one workgroup may have along x (maxComputeWorkGroupInvocations and
    #: maxComputeWorkGroupSize[0], the smaller: ``DeviceLimits.max_workgroup_width``).
    max_workgroup_size: int = 256
    #: VkPhysicalDeviceIDProperties::deviceUUID (hex) and what the device can share (host memory
    #: import, opaque fd export and import), read from an open device with vk-adam's kp patch
    #: 0017; "" and () otherwise.
    device_uuid: str = ""
    external_memory: tuple[str, ...] = ()
    #: ``minImportedHostPointerAlignment`` in bytes where "host import" is listed, else 0.
    host_import_alignment: int = 0

    @property
    def is_software(self) -> bool:
        """A CPU implementation such as lavapipe: chosen only when no hardware GPU exists."""
        return self.device_type == "cpu" or bool(_SOFTWARE_DEVICE.search(self.name))


def limit_fields(limits: DeviceLimits) -> dict[str, Any]:
    """DeviceInfo's fields that are limits, from the device's :class:`DeviceLimits` (the one
    reader of a kp properties dict): the workgroup limits, and the subgroup properties (0 where
    the kp build cannot tell)."""

    def reported(name: str, value: int) -> int:
        return 0 if name in limits.assumed else value

    return {
        "max_workgroup_count": limits.max_compute_work_group_count[0],
        "subgroup_size": reported("subgroup_size", limits.subgroup_size),
        "subgroup_stages": reported("subgroup_supported_stages", limits.subgroup_supported_stages),
        "subgroup_operations": reported(
            "subgroup_supported_operations", limits.subgroup_supported_operations
        ),
        "max_workgroup_size": limits.max_workgroup_width,
    }


def application_device(props: Mapping[str, Any], limits: DeviceLimits) -> DeviceInfo:
    """What an application's own ``kp.Manager`` tells of its device: its properties dict, and the
    limits read from it."""
    return DeviceInfo(
        -1,
        limits.device_name,
        "unknown",
        "application's kp.Manager",
        "unknown",
        timestamps_supported=bool(props.get("timestamps_supported")),
        **limit_fields(limits),
    )


def _vulkaninfo_summary() -> list[dict[str, str]]:
    """Per-device fields from ``vulkaninfo --summary`` (same order as the loader), if installed."""
    exe = shutil.which("vulkaninfo")
    if exe is None:
        return []
    try:
        out = subprocess.run(
            [exe, "--summary"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    devices: list[dict[str, str]] = []
    for line in out.splitlines():
        if re.match(r"^GPU\d+:", line.strip()):
            devices.append({})
        elif devices and "=" in line:
            key, _, value = line.partition("=")
            devices[-1][key.strip()] = value.strip()
    return devices


@functools.cache
def list_devices() -> tuple[DeviceInfo, ...]:
    """Every Vulkan device the loader exposes. Raises NoVulkanDeviceError when there is none."""
    kp = kp_module()
    raw: list[dict[str, Any]]
    try:
        if hasattr(kp, "list_devices"):  # the patched kp: enumerated on its VkInstance, nothing opened
            raw = kp.list_devices()
        else:  # a stock kp can only enumerate through a Manager, which opens device 0
            manager = kp.Manager()
            try:
                raw = manager.list_devices()
            finally:
                manager.destroy()
    except Exception as exc:  # kp raises plain RuntimeError/vk errors
        raise NoVulkanDeviceError(f"no Vulkan device could be listed ({exc}). {_INSTALL_HINT}") from exc
    if not raw:
        raise NoVulkanDeviceError(f"the Vulkan loader found no device. {_INSTALL_HINT}")
    summary = _vulkaninfo_summary()
    devices = []
    for index, props in enumerate(raw):
        extra = summary[index] if index < len(summary) else {}
        kind = extra.get("deviceType", "").replace("PHYSICAL_DEVICE_TYPE_", "").lower()
        if not kind and "device_type" in props:  # the patched kp reports it itself
            kind = _VK_DEVICE_TYPES.get(int(props["device_type"]), "")
        kind = {"discrete_gpu": "discrete", "integrated_gpu": "integrated", "virtual_gpu": "virtual"}.get(
            kind, kind or ("cpu" if _SOFTWARE_DEVICE.search(props["device_name"]) else "unknown")
        )
        driver = " ".join(v for v in (extra.get("driverName"), extra.get("driverInfo")) if v)
        devices.append(
            DeviceInfo(
                index=index,
                name=str(props["device_name"]),
                device_type=kind,
                driver=driver or "unknown (install vulkan-tools for details)",
                api_version=extra.get("apiVersion", "unknown"),
                timestamps_supported=bool(props.get("timestamps_supported", False)),
                **limit_fields(DeviceLimits.from_properties(props)),
            )
        )
    return tuple(devices)


# VkPhysicalDeviceType values.
_VK_DEVICE_TYPES = {1: "integrated_gpu", 2: "discrete_gpu", 3: "virtual_gpu", 4: "cpu"}
_TYPE_RANK = {"discrete": 0, "integrated": 1, "virtual": 2, "unknown": 3, "cpu": 4}


def select_device(device: int | str | None = None) -> DeviceInfo:
    """Pick a device: ``device`` (index or name substring), else ``$VK_ADAM_DEVICE``, else the
    first hardware GPU (discrete before integrated), else a software device such as lavapipe."""
    devices = list_devices()
    choice: int | str | None = device if device is not None else os.environ.get(DEVICE_ENV) or None
    if choice is None:
        return min(devices, key=lambda d: (d.is_software, _TYPE_RANK.get(d.device_type, 3), d.index))
    names = ", ".join(f"{d.index}: {d.name}" for d in devices)
    if isinstance(choice, int) or (isinstance(choice, str) and choice.strip().isdigit()):
        index = int(choice)
        if not 0 <= index < len(devices):
            raise ValueError(f"Vulkan device index {index} out of range; devices are {names}")
        return devices[index]
    matches = [d for d in devices if str(choice).lower() in d.name.lower()]
    if not matches:
        raise ValueError(f"no Vulkan device name contains {choice!r}; devices are {names}")
    return matches[0]
