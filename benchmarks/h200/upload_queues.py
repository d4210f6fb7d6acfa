"""How fast each queue of the device moves host memory to the GPU and back, alone and at once.

    python benchmarks/h200/upload_queues.py [--mib 64] [--repeats 10] [--out DIR]

vk-adam submits everything to one compute queue. On NVIDIA a family with transfer only is the
copy engines'. For each queue family that can transfer, this makes a manager with up to two
queues of that family and, per queue, times (median ms, GB/s):

- ``staging up`` / ``staging down``: a buffer's whole upload from its staging memory
  (``OpTensorSyncDevice``) and download (``OpTensorSyncLocal``);
- ``import up`` / ``import down``: a region copy between an imported NumPy array
  (``VK_EXT_external_memory_host``, the path of vk-adam's NumPy params) and a device buffer;
- ``import up+down``: both in one submission, no barrier between (do the directions overlap?).

Then queues at once: an upload on one queue and a download on another, submitted together and
both waited for (two queues of one family, and across families in ``pairs``: the compute family
and a transfer-only one), and two or four queues of one family each uploading (or downloading)
an array of its own at once, timed for all of their bytes (can several queues together move
more than one?). Every buffer and import is used on one queue family
only, so no ownership transfers are needed. Writes ``upload_queues.json`` with ``--out``.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from vk_adam._commands.bench.timing import timeit
from vk_adam._runtime import copy_regions_op, host_read_barrier_op, import_host_range
from vk_adam._runtime._kp import kp_module

#: ``minImportedHostPointerAlignment`` of every driver this has met (NVIDIA, lavapipe)
ALIGNMENT = 4096


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


class QueueKit:
    """On queue ``index`` of ``mgr``: an imported source array, an imported destination array,
    two device buffers, and the recorded copies between them (each used on this queue only)."""

    def __init__(self, kp: Any, mgr: Any, index: int, n: int) -> None:
        self.mgr, self.index, self.nbytes = mgr, index, 4 * n
        self.src = np.full(n, 1.5, np.float32)
        self.dst = np.zeros(n, np.float32)
        self.imported = [
            import_host_range(mgr, int(a.__array_interface__["data"][0]), a.nbytes, ALIGNMENT)
            for a in (self.src, self.dst)
        ]
        (src_t, src_off), (dst_t, dst_off) = self.imported
        self.up_buffer = mgr.tensor(np.zeros(n, np.float32))
        self.down_buffer = mgr.tensor(np.full(n, 2.5, np.float32))
        seq = mgr.sequence(index)
        seq.eval(kp.OpTensorSyncDevice([self.down_buffer]))  # what the downloads bring back
        seq.destroy()
        self.ops = {
            "up": [copy_regions_op(src_t, self.up_buffer, [(src_off, 0, self.nbytes)])],
            "down": [
                copy_regions_op(self.down_buffer, dst_t, [(0, dst_off, self.nbytes)]),
                host_read_barrier_op([dst_t]),
            ],
        }
        self.sequences: dict[str, Any] = {}

    def sequence(self, *names: str) -> Any:
        key = "+".join(names)
        if key not in self.sequences:
            seq = self.mgr.sequence(self.index)
            for name in names:
                for op in self.ops[name]:
                    seq.record(op)
            self.sequences[key] = seq
        return self.sequences[key]

    def destroy(self) -> None:
        for seq in self.sequences.values():
            seq.destroy()
        for t in (self.up_buffer, self.down_buffer, *(t for t, _ in self.imported)):
            t.destroy()


def cell(seconds: list[float], nbytes: int) -> dict[str, float]:
    t = statistics.median(seconds)
    return {"ms": round(1e3 * t, 4), "GBps": round(nbytes / t / 1e9, 2)}


def at_once(sequences: list[Any]) -> None:
    """Submit every sequence, then wait for each."""
    for seq in sequences:
        seq.eval_async()
    for seq in sequences:
        seq.eval_await()


def one_queue(kp: Any, kit: QueueKit, repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    staging = kit.mgr.tensor(np.ones(kit.nbytes // 4, np.float32))
    for name, op in (("staging up", kp.OpTensorSyncDevice), ("staging down", kp.OpTensorSyncLocal)):
        seq = kit.mgr.sequence(kit.index)
        seq.record(op([staging]))
        out[name] = cell(timeit(seq.eval, repeats, warmup=1), kit.nbytes)
        seq.destroy()
    staging.destroy()
    for names in (("up",), ("down",), ("up", "down")):
        seq = kit.sequence(*names)
        out["import " + "+".join(names)] = cell(timeit(seq.eval, repeats, warmup=1), kit.nbytes)
    if not np.array_equal(kit.dst[:4], np.full(4, 2.5, np.float32)):
        raise AssertionError(f"the download did not land: {kit.dst[:4]}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    kp = kp_module()
    n = args.mib << 18  # float32 elements
    families = queue_families()
    result: dict[str, Any] = {"mib": args.mib, "families": [], "pairs": {}}
    for family, (flags, queues) in enumerate(families):
        kinds = [name for bit, name in ((1, "graphics"), (2, "compute"), (4, "transfer")) if flags & bit]
        entry: dict[str, Any] = {"family": family, "kinds": kinds, "queues": queues}
        result["families"].append(entry)
        if not flags & 7:  # transfer is implied by graphics or compute
            print(f"family {family}: flags {flags:#x}, no transfer", flush=True)
            continue
        used = min(4, queues)
        mgr = kp.Manager(0, [family] * used)
        kits = [QueueKit(kp, mgr, i, n) for i in range(used)]
        try:
            entry["one queue"] = one_queue(kp, kits[0], args.repeats)
            if used >= 2:
                pair = [kits[0].sequence("up"), kits[1].sequence("down")]
                entry["up on queue 0, down on queue 1"] = cell(
                    timeit(lambda pair=pair: at_once(pair), args.repeats, warmup=1), kits[0].nbytes
                )
            for k in sorted({2, used}) if used >= 2 else []:  # an array each, at once: GB/s of all
                for name in ("up", "down"):
                    group = [kit.sequence(name) for kit in kits[:k]]
                    entry[f"{name} on {k} queues at once"] = cell(
                        timeit(lambda group=group: at_once(group), args.repeats, warmup=1), k * kits[0].nbytes
                    )
        finally:
            for kit in kits:
                kit.destroy()
            mgr.destroy()
        print(f"family {family} ({' + '.join(kinds)}, {queues} queues):", json.dumps(entry), flush=True)
    # across families: the first compute family and each transfer-only one, both directions
    compute = next((f for f, (flags, _) in enumerate(families) if flags & 2), None)
    transfer_only = [f for f, (flags, _) in enumerate(families) if flags & 7 == 4]
    for other in transfer_only:
        if compute is None:
            break
        mgr = kp.Manager(0, [compute, other])
        kits = [QueueKit(kp, mgr, i, n) for i in range(2)]
        try:
            for a, b in ((0, 1), (1, 0)):
                pair = [kits[a].sequence("up"), kits[b].sequence("down")]
                key = f"up on family {(compute, other)[a]}, down on family {(compute, other)[b]}"
                seconds = timeit(lambda pair=pair: at_once(pair), args.repeats, warmup=1)
                result["pairs"][key] = cell(seconds, kits[0].nbytes)
                print(key, result["pairs"][key], flush=True)
        finally:
            for kit in kits:
                kit.destroy()
            mgr.destroy()
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "upload_queues.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
