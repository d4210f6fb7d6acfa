"""kp patch 0020: the device's limits and features read from the device (``limits.py``), the
portability enumeration request, the upload counter, the evaluate-once guard and device handles.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

import numpy as np
import pytest

kp = pytest.importorskip("kp")

from vk_adam._runtime._kp import kp_features  # noqa: E402
from vk_adam._runtime.facts import device_limits  # noqa: E402
from vk_adam._runtime.limits import DeviceLimits, MemoryHeap  # noqa: E402

PATCHED = pytest.mark.skipif(
    not kp_features().device_limits, reason="kp without vk-adam's patch 0020 (device limits)"
)

SPEC_1_1 = DeviceLimits()  # the Vulkan 1.1 guarantees


def _simulated() -> bool:
    """The Khronos profiles layer replaces the device's limits (scripts/test-profiles.sh)."""
    return "VK_LAYER_KHRONOS_profiles" in os.environ.get("VK_INSTANCE_LAYERS", "")


@pytest.fixture()
def manager():
    mgr = kp.Manager()
    yield mgr
    mgr.destroy()


def _download(manager, tensor) -> np.ndarray:
    """What the device memory holds now, through a sequence of its own."""
    manager.sequence().eval(kp.OpTensorSyncLocal([tensor]))
    return tensor.data().copy()


# -- limits ------------------------------------------------------------------------------------


def test_a_stock_properties_dict_gives_the_spec_guarantees_and_says_they_are_assumed():
    # What kp 0.9.0 reports: the name and the workgroup limits only.
    stock = {
        "device_name": "some GPU",
        "max_work_group_count": (1 << 31, 65535, 65535),
        "max_work_group_invocations": 1024,
        "max_work_group_size": (1024, 1024, 64),
        "timestamps_supported": True,
    }
    limits = DeviceLimits.from_properties(stock)
    assert limits.device_name == "some GPU"
    assert limits.max_compute_work_group_invocations == 1024
    assert limits.max_compute_work_group_size == (1024, 1024, 64)
    assert limits.max_compute_work_group_count == (1 << 31, 65535, 65535)
    assert limits.max_workgroup_width == 1024
    read = {"device_name", *("max_compute_work_group_" + k for k in ("invocations", "size", "count"))}
    assert "max_storage_buffer_range" in limits.assumed and "extensions" in limits.assumed
    assert not read & limits.assumed
    assert (limits.max_storage_buffer_range, limits.max_push_constants_size) == (1 << 27, 128)
    assert limits.max_per_stage_descriptor_storage_buffers == 4
    assert limits.max_memory_allocation_size == 1 << 30
    assert limits.min_storage_buffer_offset_alignment == 256
    assert limits.api == (1, 1, 0) and limits.device_local_bytes is None
    assert not limits.shader_int64 and not limits.subgroup_arithmetic and not limits.extensions
    with pytest.raises(
        ValueError, match=r"maxPerStageDescriptorStorageBuffers >= 9, but some GPU has 4 \(assumed"
    ):
        limits.require("max_per_stage_descriptor_storage_buffers", 9, "an 8-bit-state Adam")


def test_require_names_the_limit_the_value_and_the_need():
    limits = DeviceLimits(
        device_name="dev", max_push_constants_size=128, min_storage_buffer_offset_alignment=64
    )
    limits.require("max_push_constants_size", 128, "a rule")
    with pytest.raises(ValueError, match=r"a rule needs maxPushConstantsSize >= 256, but dev has 128$"):
        limits.require("max_push_constants_size", 256, "a rule")
    limits.require("min_storage_buffer_offset_alignment", 256, "windows")
    with pytest.raises(
        ValueError, match="aligned to 96 bytes, but dev's minStorageBufferOffsetAlignment is 64"
    ):
        limits.require("min_storage_buffer_offset_alignment", 96, "windows")
    with pytest.raises(ValueError, match="needs the Vulkan feature shaderInt64, which dev lacks"):
        limits.require("shader_int64", 1, "a 64-bit counter")
    assert MemoryHeap(1 << 30, 1).device_local and not MemoryHeap(1 << 30, 0).device_local


@PATCHED
def test_the_limits_are_read_from_the_device(manager, vulkan_device):
    limits = device_limits(manager)
    assert limits.assumed == frozenset()
    props = manager.get_device_properties()
    assert limits.device_name == props["device_name"]
    assert limits.max_storage_buffer_range == props["max_storage_buffer_range"]
    for name in (
        "max_storage_buffer_range",
        "max_memory_allocation_size",
        "max_push_constants_size",
        "max_per_stage_descriptor_storage_buffers",
        "max_descriptor_set_storage_buffers",
        "max_per_set_descriptors",
        "max_bound_descriptor_sets",
        "max_compute_work_group_invocations",
        "max_compute_shared_memory_size",
    ):
        assert getattr(limits, name) >= getattr(SPEC_1_1, name), name
    assert limits.min_storage_buffer_offset_alignment <= 256
    assert all(
        a >= b
        for a, b in zip(limits.max_compute_work_group_size, SPEC_1_1.max_compute_work_group_size, strict=True)
    )
    assert limits.api >= (1, 1, 0)
    assert limits.extensions and all(e.startswith("VK_") for e in limits.extensions)
    assert set(props["enabled_extensions"]) <= limits.extensions
    assert limits.memory_heaps and limits.device_local_bytes == sum(
        h.size for h in limits.memory_heaps if h.device_local
    )
    assert limits.device_local_bytes > 0
    assert limits.timeline_semaphore == manager.has_timeline_semaphores()
    if "llvmpipe" in vulkan_device.name and not _simulated():
        # lavapipe (Mesa 22.3, Debian 12), the CI driver: what issue #41 measured.
        assert limits.max_storage_buffer_range == 134217728
        assert limits.max_push_constants_size == 128
        assert limits.shader_int64 and limits.storage_buffer_8bit_access and limits.shader_int8
        assert limits.subgroup_arithmetic


@PATCHED
def test_list_devices_reports_the_same_limits_without_opening_a_device(manager):
    mine = device_limits(manager)
    listed = [DeviceLimits.from_properties(p) for p in kp.list_devices()]
    assert mine in listed  # equal in every field (heaps, extensions, features included)
    assert all(not d.assumed for d in listed)


# -- portability enumeration -------------------------------------------------------------------


def _loader_offers(extension: str) -> bool:
    """Whether the Vulkan loader lists an instance extension (vkEnumerateInstanceExtensionProperties)."""

    class ExtensionProperties(ctypes.Structure):
        _fields_ = [("extensionName", ctypes.c_char * 256), ("specVersion", ctypes.c_uint32)]

    vulkan = ctypes.CDLL(ctypes.util.find_library("vulkan") or "libvulkan.so.1")
    enumerate_ = vulkan.vkEnumerateInstanceExtensionProperties
    enumerate_.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint32), ctypes.c_void_p]
    count = ctypes.c_uint32(0)
    assert enumerate_(None, ctypes.byref(count), None) == 0
    props = (ExtensionProperties * count.value)()
    assert enumerate_(None, ctypes.byref(count), props) in (0, 5)  # VK_SUCCESS, VK_INCOMPLETE
    return extension.encode() in {p.extensionName for p in props[: count.value]}


@pytest.mark.skipif(
    not kp_features().portability_enumeration, reason="kp without vk-adam's patch 0020 (portability)"
)
def test_portability_enumeration_is_requested_exactly_when_the_loader_offers_it(manager):
    offered = _loader_offers("VK_KHR_portability_enumeration")
    assert kp.portability_enumeration() is offered
    assert manager.portability_enumeration() is offered
    if not offered:
        pytest.skip("this Vulkan loader (older than 1.3.216) does not offer VK_KHR_portability_enumeration")
    # A device that lists VK_KHR_portability_subset (MoltenVK) is created with it.
    props = manager.get_device_properties()
    subset = "VK_KHR_portability_subset"
    assert (subset in props["enabled_extensions"]) is (subset in props["extensions"])


# -- the upload counter ------------------------------------------------------------------------


@pytest.mark.skipif(not kp_features().upload_counter, reason="kp without vk-adam's patch 0020 (uploads)")
def test_uploads_count_evaluations_of_a_recorded_sync_not_its_recording(manager, rng):
    param = manager.tensor(rng.standard_normal(64).astype(np.float32))
    other = manager.tensor(np.zeros(64, np.float32))
    host = manager.tensor(np.zeros(4, np.float32), tensor_type=kp.TensorTypes.host)
    assert param.uploads() == 0
    seq = manager.sequence()
    seq.record(kp.OpTensorSyncDevice([param, host]))  # Kompute's idiom: record once...
    assert param.uploads() == 0
    for n in range(1, 4):  # ...evaluate many times: each overwrites the device memory
        param.data()[:] = n
        seq.eval()
        assert param.uploads() == n
        assert _download(manager, param).tolist() == [n] * 64
    assert other.uploads() == 0
    assert host.uploads() == 0  # no copy: a host tensor's memory is the device's
    seq.eval_async()
    assert param.uploads() == 4  # counted when submitted
    seq.eval_await()
    manager.sequence().eval(kp.OpTensorSyncDevice([param]))  # a one-off upload counts too
    assert param.uploads() == 5


# -- the evaluate-once guard -------------------------------------------------------------------


@pytest.mark.skipif(not kp_features().eval_once, reason="kp without vk-adam's patch 0020 (OpEvalOnce)")
def test_a_guarded_sequence_refuses_its_second_evaluation_and_submits_nothing(manager, rng):
    first = rng.standard_normal(32).astype(np.float32)
    tensor = manager.tensor(first)
    guard = kp.OpEvalOnce("recorded steps run once: record a new step for each evaluation")
    seq = manager.sequence()
    seq.record(kp.OpTensorSyncDevice([tensor])).record(guard).record(kp.OpTensorSyncDevice([tensor]))
    assert guard.message().startswith("recorded steps run once")
    seq.eval()
    assert (seq.evaluations(), guard.evaluations(), tensor.uploads()) == (1, 1, 2)
    tensor.data()[:] = 7.0  # what a replay would upload
    for evaluate in (seq.eval, seq.eval_async):
        with pytest.raises(RuntimeError, match=r"^recorded steps run once: record a new step"):
            evaluate()
        assert not seq.is_running()
    # Nothing of the refused evaluations ran: no submission, no upload, the device memory as was.
    assert (seq.evaluations(), guard.evaluations(), tensor.uploads()) == (1, 1, 2)
    assert _download(manager, tensor).tobytes() == first.tobytes()
    # The sequence is usable again once re-recorded without the guard.
    seq.clear()
    tensor.data()[:] = 3.0
    seq.record(kp.OpTensorSyncDevice([tensor])).eval()
    assert seq.evaluations() == 2 and _download(manager, tensor).tolist() == [3.0] * 32


# -- device handles ----------------------------------------------------------------------------


@pytest.mark.skipif(not kp_features().device_handles, reason="kp without vk-adam's patch 0020 (handles)")
def test_device_handles_tell_two_managers_apart(manager):
    other = kp.Manager()
    try:
        mine, theirs = manager.tensor(np.zeros(4, np.float32)), other.tensor(np.zeros(4, np.float32))
        assert manager.device_handle() != 0 and other.device_handle() != 0
        assert manager.device_handle() != other.device_handle()
        assert mine.device_handle() == manager.device_handle()
        assert theirs.device_handle() == other.device_handle()
        assert manager.sequence().device_handle() == manager.device_handle()
        mine.destroy()
        assert mine.device_handle() == 0
    finally:
        other.destroy()
    assert other.device_handle() == 0
