"""A ZeRO-1 step with NCCL on the Vulkan buffers at world size 1 (2^24 fp32 AdamW in 8 kp
tensors), Vulkan's and CUDA's work ordered by host waits and by a timeline semaphore, built
alternately: median us of 100 steps after 30."""

import os
import time

import numpy as np
import torch
import torch.distributed as dist

import vk_adam.distributed as vkd
from vk_adam._runtime import Runtime

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29535")
torch.cuda.set_device(0)
dist.init_process_group("nccl", rank=0, world_size=1)
rng = np.random.default_rng(0)
rt = Runtime()
params = [rt.buffer(rng.standard_normal(1 << 21).astype(np.float32)) for _ in range(8)]
grads = [rt.buffer(rng.standard_normal(1 << 21).astype(np.float32)) for _ in range(8)]
rt.run([rt.upload_op(params + grads)])
for order in ("host", "semaphores", "host", "semaphores"):
    os.environ["VK_ADAM_NCCL_ORDER"] = order
    with vkd.ZeroRedundancyOptimizer(params, "adamw", manager=rt.manager, lr=1e-4) as opt:
        samples = []
        for _ in range(130):
            a = time.perf_counter()
            opt.step(grads)
            samples.append(time.perf_counter() - a)
        print(f"{opt.device_staging}: median {1e6 * np.median(samples[30:]):.1f} us", flush=True)
rt.close()
dist.destroy_process_group()
