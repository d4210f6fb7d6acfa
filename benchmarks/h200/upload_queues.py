"""How fast each queue family of the device moves staging memory to the GPU and back.

    python benchmarks/h200/upload_queues.py [--mib 64] [--repeats 10]

vk-adam submits everything, staging copies included, to one compute queue. On NVIDIA a family
with transfer only is the copy engines'. For each queue family that can transfer, this makes a
fresh manager on that family alone, one buffer of ``--mib`` MiB, and times its whole-buffer
upload (``OpTensorSyncDevice``) and download (``OpTensorSyncLocal``), each submitted and waited
for (median ms, and GB/s). Each buffer is used on its own family only.
The families are read from the Vulkan loader (``queue_families``).
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import statistics

import numpy as np

from vk_adam._commands.bench.timing import timeit
from vk_adam._runtime._kp import kp_module


def queue_families() -> list[tuple[int, int]]:
    """(queueFlags, queueCount) of each queue family of physical device 0, read through the
    Vulkan loader (kp does not list them)."""

    class CreateInfo(ctypes.Structure):
        _fields_ = [
            ("sType", ctypes.c_uint32),
            ("pNext", ctypes.c_void_p),
            ("flags", ctypes.c_uint32),
            ("pApplicationInfo", ctypes.c_void_p),
            ("enabledLayerCount", ctypes.c_uint32),
            ("ppEnabledLayerNames", ctypes.c_void_p),
            ("enabledExtensionCount", ctypes.c_uint32),
            ("ppEnabledExtensionNames", ctypes.c_void_p),
        ]

    class Family(ctypes.Structure):
        _fields_ = [
            ("queueFlags", ctypes.c_uint32),
            ("queueCount", ctypes.c_uint32),
            ("rest", ctypes.c_uint32 * 4),
        ]

    vulkan = ctypes.CDLL(ctypes.util.find_library("vulkan") or "libvulkan.so.1")
    vulkan.vkCreateInstance.argtypes = [
        ctypes.POINTER(CreateInfo),
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_void_p),
    ]
    vulkan.vkEnumeratePhysicalDevices.argtypes = [
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_uint32),
        ctypes.c_void_p,
    ]
    vulkan.vkGetPhysicalDeviceQueueFamilyProperties.argtypes = [
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_uint32),
        ctypes.c_void_p,
    ]
    vulkan.vkDestroyInstance.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    instance = ctypes.c_void_p()
    info = CreateInfo(sType=1)  # VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO
    if vulkan.vkCreateInstance(ctypes.byref(info), None, ctypes.byref(instance)) != 0:
        raise RuntimeError("vkCreateInstance failed")
    try:
        count = ctypes.c_uint32(0)
        vulkan.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), None)
        devices = (ctypes.c_void_p * count.value)()
        vulkan.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), devices)
        families = ctypes.c_uint32(0)
        vulkan.vkGetPhysicalDeviceQueueFamilyProperties(devices[0], ctypes.byref(families), None)
        props = (Family * families.value)()
        vulkan.vkGetPhysicalDeviceQueueFamilyProperties(devices[0], ctypes.byref(families), props)
        return [(f.queueFlags, f.queueCount) for f in props[: families.value]]
    finally:
        vulkan.vkDestroyInstance(instance, None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args()
    kp = kp_module()
    n = args.mib << 18  # float32 elements
    for family, (flags, queues) in enumerate(queue_families()):
        kinds = [name for bit, name in ((1, "graphics"), (2, "compute"), (4, "transfer")) if flags & bit]
        if not flags & 7:  # transfer is implied by graphics or compute
            print(f"family {family}: flags {flags:#x}, no transfer")
            continue
        mgr = kp.Manager(0, [family])
        print(f"family {family} ({' + '.join(kinds)}, {queues} queues):", end=" ")
        try:
            tensor = mgr.tensor(np.ones(n, np.float32))
            times = {}
            for name, op in (("upload", kp.OpTensorSyncDevice), ("download", kp.OpTensorSyncLocal)):
                seq = mgr.sequence()
                seq.record(op([tensor]))
                times[name] = statistics.median(timeit(seq.eval, args.repeats, warmup=1))
                seq.destroy()
            cells = ", ".join(f"{k} {1e3 * t:.3f} ms ({4 * n / t / 1e9:.1f} GB/s)" for k, t in times.items())
            print(f"{args.mib} MiB {cells}", flush=True)
            tensor.destroy()
        finally:
            mgr.destroy()


if __name__ == "__main__":
    main()
