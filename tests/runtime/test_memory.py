"""close() frees every Vulkan object; 10,000 steps do not grow memory."""

from __future__ import annotations

import gc
import resource
import tracemalloc

import numpy as np
import pytest

import vk_adam


def rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() // 1024


@pytest.mark.exclusive  # needs the machine to itself (scripts/test.sh runs it alone)
@pytest.mark.slow  # thousands of cycles
def test_ten_thousand_steps_do_not_grow_memory(rng):
    p = rng.standard_normal(1024).astype(np.float32)
    g = rng.standard_normal(1024).astype(np.float32)
    with vk_adam.AdamW([p], lr=1e-4) as opt:
        for _ in range(500):  # warm-up: allocator pools, caches
            opt.step([g])
        gc.collect()
        tracemalloc.start()
        rss_before = rss_kib()
        py_before = tracemalloc.get_traced_memory()[0]
        for _ in range(10_000):
            opt.step([g])
        gc.collect()
        py_growth = tracemalloc.get_traced_memory()[0] - py_before
        rss_growth = rss_kib() - rss_before
        tracemalloc.stop()
    assert py_growth < 64 * 1024, f"Python heap grew {py_growth} bytes over 10,000 steps"
    assert rss_growth < 4 * 1024, f"RSS grew {rss_growth} KiB over 10,000 steps"
    assert np.isfinite(p).all()


@pytest.mark.exclusive  # needs the machine to itself (scripts/test.sh runs it alone)
@pytest.mark.slow  # thousands of cycles
def test_open_close_cycles_do_not_leak(rng):
    p = rng.standard_normal(4096).astype(np.float32)
    for _ in range(20):  # warm-up
        with vk_adam.Adam([p], amsgrad=True, skip_nonfinite=True) as opt:
            opt.step([p.copy()])
    gc.collect()
    before = rss_kib()
    for _ in range(200):
        with vk_adam.Adam([p], amsgrad=True, skip_nonfinite=True) as opt:
            opt.step([p.copy()])
    gc.collect()
    growth = rss_kib() - before
    assert growth < 8 * 1024, f"RSS grew {growth} KiB over 200 optimizer lifetimes"
