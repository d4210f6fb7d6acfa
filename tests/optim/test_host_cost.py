"""``profile=True``: a synchronous step reports its GPU time (Vulkan timestamps) and vk-adam's host
time outside submit-and-wait, step by step, and the two fit inside the step's wall time; without
it, neither is measured."""

from __future__ import annotations

import time

import numpy as np

import vk_adam


def test_a_profiled_step_reports_gpu_and_host_time_within_its_wall_time(rng):
    p = rng.standard_normal(1024).astype(np.float32)
    g = rng.standard_normal(1024).astype(np.float32)
    with vk_adam.AdamW([p], lr=1e-3) as opt:
        opt.step([g])
        assert opt.last_gpu_seconds is None and opt.last_host_seconds is None  # profile is off
        opt.profile = True  # settable after construction
        for _ in range(12):
            t0 = time.perf_counter()
            opt.step([g])
            wall = time.perf_counter() - t0
            gpu, host = opt.last_gpu_seconds, opt.last_host_seconds
            assert gpu is not None and host is not None
            assert gpu > 0 and host > 0
            # The GPU work runs inside the submit-and-wait, which the host time leaves out.
            assert gpu + host <= wall, (gpu, host, wall)
        opt.profile = False
        opt.step([g], wait=False).wait()
        assert (opt.last_gpu_seconds, opt.last_host_seconds) == (gpu, host)  # only sync, profiled steps
