"""Where a ZeRO-1 step with NCCL on the Vulkan buffers spends its time, at world size 1 on one
GPU: 2^24 fp32 AdamW in 8 kp tensors (as `vk-adam bench --cases zero`), the median of each
phase over 50 steps, then cProfile of 50 more steps (the host calls that wait: CUDA's
synchronize, kp's eval; and the recording). Run with the kit's Python on the H200."""

import cProfile
import os
import pstats
import time

import numpy as np
import torch
import torch.distributed as dist

import vk_adam.distributed as vkd
from vk_adam._runtime import Runtime

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29533")
torch.cuda.set_device(0)
dist.init_process_group("nccl", rank=0, world_size=1)
rng = np.random.default_rng(0)
sizes = [1 << 21] * 8
rt = Runtime()
params = [rt.buffer(rng.standard_normal(n).astype(np.float32)) for n in sizes]
grads = [rt.buffer(rng.standard_normal(n).astype(np.float32)) for n in sizes]
rt.run([rt.upload_op(params + grads)])
opt = vkd.ZeroRedundancyOptimizer(params, "adamw", manager=rt.manager, lr=1e-4)
print("transport:", opt.communicator, "|", opt.device_staging)
steps, phases = [], []
for _ in range(60):
    a = time.perf_counter()
    opt.step(grads)
    steps.append(time.perf_counter() - a)
    phases.append(dict(opt.last_timings))
print(f"step median {1e3 * np.median(steps[10:]):.3f} ms")
for k in phases[0]:
    print(f"  {k}: {1e3 * np.median([p[k] for p in phases[10:]]):.3f} ms")
nccl = opt.internals().nccl
print("recordings:", nccl.recordings if nccl is not None else None)
prof = cProfile.Profile()
prof.enable()
for _ in range(50):
    opt.step(grads)
prof.disable()
stats = pstats.Stats(prof)
stats.sort_stats("tottime").print_stats(25)
stats.sort_stats("cumulative").print_stats(40)
opt.close()
rt.close()
dist.destroy_process_group()
