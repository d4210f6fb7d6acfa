"""What a Vulkan device can hold: its limits, optional features, extensions and memory heaps.

vk-adam's patched kp (patch 0020, ``"device limits"`` in ``kp.patches``) reads them from the
device: :meth:`DeviceLimits.from_properties` takes them from any kp properties dict
(``Manager.get_device_properties()``, ``kp.list_devices()`` entries too, without opening a
device) and is the one reader of a limit in such a dict (``facts.py`` asks the device for it and
holds the result, with the decisions made from it, in ``DeviceFacts``). A kp build that cannot
report a value (stock kp 0.9.0 reports the workgroup limits only) leaves it at what the Vulkan
1.1 spec guarantees every device (its minimum limits, no optional feature, no extension), and
names it in :attr:`DeviceLimits.assumed`. A new limit is a field here: its default the spec's
guarantee, its Vulkan name in :data:`VULKAN_NAMES`, its kp key in ``_KP_KEYS`` where kp spells it
differently.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .._errors import DeviceCapabilityError, DeviceMemoryError
from ._kp import kp_features

#: VK_MAKE_API_VERSION(0, 1, 1, 0): the version kp's instance asks for.
VULKAN_1_1 = (1 << 22) | (1 << 12)
#: VkShaderStageFlagBits::VK_SHADER_STAGE_COMPUTE_BIT.
STAGE_COMPUTE = 0x20
#: VkSubgroupFeatureFlagBits: BASIC (every Vulkan 1.1 device) and ARITHMETIC.
SUBGROUP_BASIC = 0x1
SUBGROUP_ARITHMETIC = 0x4
#: VkMemoryHeapFlagBits::VK_MEMORY_HEAP_DEVICE_LOCAL_BIT.
HEAP_DEVICE_LOCAL = 0x1

#: The Vulkan names of the limits and features, for messages (field name -> Vulkan name).
VULKAN_NAMES = {
    "max_storage_buffer_range": "maxStorageBufferRange",
    "min_storage_buffer_offset_alignment": "minStorageBufferOffsetAlignment",
    "max_memory_allocation_size": "maxMemoryAllocationSize",
    "max_push_constants_size": "maxPushConstantsSize",
    "max_per_stage_descriptor_storage_buffers": "maxPerStageDescriptorStorageBuffers",
    "max_descriptor_set_storage_buffers": "maxDescriptorSetStorageBuffers",
    "max_per_set_descriptors": "maxPerSetDescriptors",
    "max_bound_descriptor_sets": "maxBoundDescriptorSets",
    "max_compute_work_group_invocations": "maxComputeWorkGroupInvocations",
    "max_compute_work_group_size": "maxComputeWorkGroupSize",
    "max_compute_work_group_count": "maxComputeWorkGroupCount",
    "max_compute_shared_memory_size": "maxComputeSharedMemorySize",
    "non_coherent_atom_size": "nonCoherentAtomSize",
    "api_version": "apiVersion",
    "shader_int64": "shaderInt64",
    "shader_float64": "shaderFloat64",
    "shader_int16": "shaderInt16",
    "storage_buffer_16bit_access": "storageBuffer16BitAccess",
    "storage_buffer_8bit_access": "storageBuffer8BitAccess",
    "shader_float16": "shaderFloat16",
    "shader_int8": "shaderInt8",
    "buffer_device_address": "bufferDeviceAddress",
    "timeline_semaphore": "timelineSemaphore",
    "subgroup_size": "subgroupSize",
    "subgroup_supported_stages": "subgroupSupportedStages",
    "subgroup_supported_operations": "subgroupSupportedOperations",
}

# Field name -> key of kp's properties dict, where the two differ (kp 0.9.0's own names).
_KP_KEYS = {
    "max_compute_work_group_invocations": "max_work_group_invocations",
    "max_compute_work_group_size": "max_work_group_size",
    "max_compute_work_group_count": "max_work_group_count",
}
# Values a device reports as 0 when it cannot (Vulkan 1.0: no Maintenance3 properties).
_ZERO_IS_UNKNOWN = frozenset({"max_memory_allocation_size", "max_per_set_descriptors", "subgroup_size"})


@dataclass(frozen=True)
class MemoryHeap:
    """One VkMemoryHeap: its size in bytes and VkMemoryHeapFlags."""

    size: int
    flags: int

    @property
    def device_local(self) -> bool:
        """VK_MEMORY_HEAP_DEVICE_LOCAL_BIT: the device's own memory."""
        return bool(self.flags & HEAP_DEVICE_LOCAL)


@dataclass(frozen=True)
class DeviceLimits:
    """A device's limits and features. Defaults are the Vulkan 1.1 spec's guarantees; a field
    the kp build could not read keeps its default and is listed in :attr:`assumed`."""

    device_name: str = ""
    #: Bytes one storage-buffer binding (descriptor range) may span.
    max_storage_buffer_range: int = 1 << 27
    #: Alignment (bytes) of a storage-buffer binding's offset; the spec allows at most 256.
    min_storage_buffer_offset_alignment: int = 256
    #: Bytes one VkDeviceMemory allocation may have (VkPhysicalDeviceMaintenance3Properties).
    max_memory_allocation_size: int = 1 << 30
    max_push_constants_size: int = 128
    max_per_stage_descriptor_storage_buffers: int = 4
    max_descriptor_set_storage_buffers: int = 24
    max_per_set_descriptors: int = 1024
    max_bound_descriptor_sets: int = 4
    max_compute_work_group_invocations: int = 128
    max_compute_work_group_size: tuple[int, int, int] = (128, 128, 64)
    max_compute_work_group_count: tuple[int, int, int] = (65535, 65535, 65535)
    max_compute_shared_memory_size: int = 16384
    #: nonCoherentAtomSize; the spec allows at most 256.
    non_coherent_atom_size: int = 256
    #: VkPhysicalDeviceProperties::apiVersion (VK_MAKE_API_VERSION bits; see :attr:`api`).
    api_version: int = VULKAN_1_1
    shader_int64: bool = False
    shader_float64: bool = False
    shader_int16: bool = False
    storage_buffer_16bit_access: bool = False
    storage_buffer_8bit_access: bool = False
    shader_float16: bool = False
    shader_int8: bool = False
    buffer_device_address: bool = False
    timeline_semaphore: bool = False
    #: Lanes per subgroup, and the VkShaderStageFlags / VkSubgroupFeatureFlags where subgroup
    #: operations work (Vulkan 1.1 guarantees basic operations in compute shaders).
    subgroup_size: int = 1
    subgroup_supported_stages: int = STAGE_COMPUTE
    subgroup_supported_operations: int = SUBGROUP_BASIC
    #: The device extensions (none assumed).
    extensions: frozenset[str] = frozenset()
    memory_heaps: tuple[MemoryHeap, ...] = ()
    #: Bytes of the device-local heaps together; None where the kp build cannot tell.
    device_local_bytes: int | None = None
    #: The fields not read from the device: each holds the spec's guarantee instead.
    assumed: frozenset[str] = field(default=frozenset(), compare=False)

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> DeviceLimits:
        """The limits in a kp properties dict (``Manager.get_device_properties()``, an entry of
        ``kp.list_devices()`` or ``Manager.list_devices()``)."""
        values: dict[str, Any] = {}
        assumed: set[str] = set()
        for f in fields(cls):
            if f.name in ("assumed", "memory_heaps", "device_local_bytes", "extensions"):
                continue
            key = _KP_KEYS.get(f.name, f.name)
            raw = props.get(key)
            if raw is None or (f.name in _ZERO_IS_UNKNOWN and not raw):
                if f.name != "device_name":
                    assumed.add(f.name)
                continue
            if isinstance(f.default, tuple):
                values[f.name] = tuple(int(v) for v in raw)
            elif isinstance(f.default, bool):
                values[f.name] = bool(raw)
            elif isinstance(f.default, int):
                values[f.name] = int(raw)
            else:
                values[f.name] = str(raw)
        if "extensions" in props:
            values["extensions"] = frozenset(str(e) for e in props["extensions"])
        else:
            assumed.add("extensions")
        if "memory_heaps" in props:
            values["memory_heaps"] = tuple(
                MemoryHeap(int(h["size"]), int(h["flags"])) for h in props["memory_heaps"]
            )
            values["device_local_bytes"] = int(
                props.get(
                    "device_local_bytes",
                    sum(h.size for h in values["memory_heaps"] if h.device_local),
                )
            )
        else:
            assumed.update(("memory_heaps", "device_local_bytes"))
        return cls(**values, assumed=frozenset(assumed))

    @property
    def api(self) -> tuple[int, int, int]:
        """``api_version`` as (major, minor, patch)."""
        v = self.api_version
        return ((v >> 22) & 0x7F, (v >> 12) & 0x3FF, v & 0xFFF)

    @property
    def max_workgroup_width(self) -> int:
        """Invocations a one-dimensional workgroup may have: maxComputeWorkGroupInvocations and
        maxComputeWorkGroupSize[0], the smaller."""
        return min(self.max_compute_work_group_invocations, self.max_compute_work_group_size[0])

    @property
    def subgroup_arithmetic(self) -> bool:
        """Subgroup arithmetic (subgroupAdd, subgroupMax...) works in compute shaders."""
        return bool(
            self.subgroup_supported_stages & STAGE_COMPUTE
            and self.subgroup_supported_operations & SUBGROUP_ARITHMETIC
        )

    @property
    def portability_subset(self) -> bool:
        """The device is a portability implementation (MoltenVK): it lists
        VK_KHR_portability_subset, and some Vulkan features are missing."""
        return "VK_KHR_portability_subset" in self.extensions

    def require(self, name: str, needed: int, what: str) -> None:
        """Refuse ``what`` (a phrase: "an 8-bit-state Adam over 9 bindings") unless limit ``name``
        (a field, e.g. ``"max_push_constants_size"``; of a workgroup size or count, its x
        dimension) is at least ``needed``; an alignment
        limit (``min_storage_buffer_offset_alignment``, ``non_coherent_atom_size``) must instead
        divide ``needed``. A feature field needs ``needed=1``. Raises ValueError naming the
        Vulkan limit, the device's value and what is needed."""
        value = getattr(self, name)
        have = int(value[0] if isinstance(value, tuple) else value)  # tuples: the x dimension
        vulkan = VULKAN_NAMES.get(name, name)
        where = f"{self.device_name or 'this device'}"
        source = (
            " (assumed: the spec's guarantee; this kp build cannot read it)" if name in self.assumed else ""
        )
        if name in ("min_storage_buffer_offset_alignment", "non_coherent_atom_size"):
            if needed % have:
                raise ValueError(
                    f"{what} needs offsets aligned to {needed} bytes, but {where}'s {vulkan} is "
                    f"{have}{source}"
                )
            return
        if have < needed:
            if isinstance(value, bool):
                raise ValueError(f"{what} needs the Vulkan feature {vulkan}, which {where} lacks{source}")
            raise ValueError(f"{what} needs {vulkan} >= {needed}, but {where} has {have}{source}")


__all__ = [
    "HEAP_DEVICE_LOCAL",
    "STAGE_COMPUTE",
    "SUBGROUP_ARITHMETIC",
    "SUBGROUP_BASIC",
    "VULKAN_1_1",
    "VULKAN_NAMES",
    "DeviceLimits",
    "MemoryHeap",
]


def allocation_failure(exc: RuntimeError, nbytes: int, device: str) -> DeviceMemoryError | None:
    """The error to raise for kp's failed ``vkAllocateMemory`` (patch 0022: "vkAllocateMemory
    failed: <result> (<bytes> of <flags> memory, type <t>, heap <h> of <size> bytes)"), saying
    which memory ran out; None for any other error."""
    text = str(exc)
    if "vkAllocateMemory failed" not in text:
        return None
    if "HostVisible" in text and "DeviceLocal" not in text:
        return DeviceMemoryError(
            f"{device}: out of host-visible memory for the staging copy of a {nbytes:,}-byte "
            f"buffer ({text}). the buffers of params and gradients keep a staging copy in host memory: "
            "free host memory or other buffers (close() optimizers you are done with), or step "
            "fewer or smaller groups at once"
        )
    return DeviceMemoryError(
        f"{device}: out of device memory for a {nbytes:,}-byte buffer ({text}). Free device "
        "memory first (close() optimizers you are done with, destroy kp tensors, other "
        "processes on the GPU), or make the state smaller: state_dtype='bf16' or "
        "'int8-blockwise', fewer or smaller param groups"
    )


def max_elements() -> int:
    """The largest element count one buffer may hold: device memory is the limit with vk-adam's
    kp (64-bit sizes); the kp 0.9.0 release sizes buffers in uint32 bytes."""
    if "64-bit sizes" in kp_features().patches:
        return 2**62
    return (2**32 - 1) // 4


def allocation_limit(limits: DeviceLimits) -> int:
    """The most bytes one allocation may hold on the device of ``limits``: its
    ``maxMemoryAllocationSize`` (not enforced where this kp build cannot read it: the spec's
    1 GiB guarantee would refuse what the device allocates)."""
    readable = "max_memory_allocation_size" not in limits.assumed
    return limits.max_memory_allocation_size if readable else 1 << 62


def check_one_allocation(limits: DeviceLimits, nbytes: int, what: str, instead: str) -> None:
    """Raise ``DeviceCapabilityError`` when ``what`` (naming one buffer, of ``nbytes``) exceeds
    one of the device's allocations; ``instead``: what the user can do."""
    limit = allocation_limit(limits)
    if nbytes > limit:
        raise DeviceCapabilityError(
            f"{what} of {nbytes} bytes, more than {limits.device_name or 'the device'} allocates at "
            f"once (maxMemoryAllocationSize: {limit} bytes): {instead}"
        )
