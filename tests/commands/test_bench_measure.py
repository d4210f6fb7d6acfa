"""The bench's Vulkan yardstick and its clock warm-up (vk_adam/_commands/bench/measure.py)."""

from __future__ import annotations

import math
import time

import numpy as np

from vk_adam._commands.bench.measure import ClockWarmer, vulkan_copy_bandwidth
from vk_adam._runtime import Runtime


def test_the_warmer_keeps_the_gpu_busy_for_its_time_and_frees_what_it_made():
    rt = Runtime()
    try:
        before = len(rt.buffers)
        warmer = ClockWarmer(rt, seconds=0.05, elements=2**16)
        t0 = time.perf_counter()
        warmer.warm()
        assert time.perf_counter() - t0 >= 0.05
        # the copies ran: the destination holds the source (download it to check)
        rt.run([rt.download_op([warmer._b])])
        np.testing.assert_array_equal(warmer._b.data(), np.ones(2**16, np.float32))
        warmer.close()
        assert len(rt.buffers) == before
    finally:
        rt.close()


def test_the_copy_yardstick_is_a_bandwidth():
    rt = Runtime()
    try:
        gbps = vulkan_copy_bandwidth(rt, 2**16, 3) / 1e9
        assert math.isfinite(gbps) and gbps > 0
    finally:
        rt.close()
