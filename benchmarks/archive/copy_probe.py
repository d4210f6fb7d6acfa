"""Why the Vulkan copy yardstick (and some whole processes) run slower than the GPU can.

    python benchmarks/archive/copy_probe.py          # $COPY_PROBE_ELEMENTS: the pairs' size (2^26)

In one process: the copy shader (glsl/copy.comp) on pairs of 2^26-float buffers, timed by
Vulkan timestamps (median of 10 dispatches, GB/s counting read + write), while other buffers
come and go: the first pairs before and after a pair four times as large is made and freed, new
pairs after that (ones, and random bits), a pair made after freeing those, and the first pair
and the newest again after 2 s idle. One JSON line per measurement (seconds into the process,
what, GB/s). It tells a GPU that slowed down (every pair slow from some moment on, the first
pair too) from slow allocations (only pairs made after some point) and from data the hardware
moves faster (ones against random bits). Log the clocks beside it (``nvidia-smi -lms 100``).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import numpy as np

from vk_adam._commands.bench.measure import copy_seconds
from vk_adam._runtime import Runtime


def copy_gbps(rt: Runtime, a: Any, b: Any, n: int, repeats: int = 10) -> float:
    return round(8 * n / copy_seconds(rt, a, b, n, repeats) / 1e9)


def pair(rt: Runtime, n: int, random: bool = False) -> tuple[Any, Any]:
    if random:
        data = np.random.default_rng(0).integers(0, 2**32, n, dtype=np.uint32).view(np.float32)
    else:
        data = np.ones(n, np.float32)
    a, b = rt.buffer(data), rt.buffer(np.zeros(n, np.float32))
    rt.run([rt.upload_op([a, b])])
    return a, b


def main() -> None:
    rt = Runtime()
    n = int(os.environ.get("COPY_PROBE_ELEMENTS", 2**26))
    t0 = time.perf_counter()

    def emit(label: str, value: object) -> None:
        print(
            json.dumps({"s": round(time.perf_counter() - t0, 2), "what": label, "value": value}), flush=True
        )

    a1, b1 = pair(rt, n)
    emit("first pair, ones", [copy_gbps(rt, a1, b1, n) for _ in range(3)])
    r1, s1 = pair(rt, n, random=True)
    emit("second pair, random bits", [copy_gbps(rt, r1, s1, n) for _ in range(2)])
    x, y = pair(rt, 4 * n)
    emit("a pair four times as large", copy_gbps(rt, x, y, 4 * n))
    rt.free_buffer(x)
    rt.free_buffer(y)
    emit("first pair after the 2^28 pair is freed", [copy_gbps(rt, a1, b1, n) for _ in range(2)])
    emit("second pair (random) after", copy_gbps(rt, r1, s1, n))
    a2, b2 = pair(rt, n)
    emit("new pair, ones", [copy_gbps(rt, a2, b2, n) for _ in range(2)])
    r2, s2 = pair(rt, n, random=True)
    emit("new pair, random bits", copy_gbps(rt, r2, s2, n))
    for t in (a2, b2, r2, s2):
        rt.free_buffer(t)
    a3, b3 = pair(rt, n)
    emit("newer pair after freeing those, ones", copy_gbps(rt, a3, b3, n))
    emit("first pair again", copy_gbps(rt, a1, b1, n))
    time.sleep(2.0)
    emit("first pair after 2 s idle", copy_gbps(rt, a1, b1, n))
    emit("newer pair after 2 s idle", copy_gbps(rt, a3, b3, n))
    rt.close()


if __name__ == "__main__":
    main()
