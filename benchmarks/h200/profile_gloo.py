"""Where a ZeRO-1 step over gloo on device buffers spends its host time: 2^24 fp32 AdamW in 8 kp
tensors on 2 ranks (as `vk-adam bench --cases zero`), cProfile of rank 0's 10 steps after 5
warm-ups, by own time. Run under torchrun with the kit's Python."""

import cProfile
import pstats

import numpy as np
import torch.distributed as dist

import vk_adam.distributed as vkd
from vk_adam._runtime import Runtime

dist.init_process_group("gloo")
rank = dist.get_rank()
rng = np.random.default_rng(rank)
rt = Runtime()
params = [rt.buffer(np.random.default_rng(0).standard_normal(1 << 21).astype(np.float32)) for _ in range(8)]
grads = [rt.buffer(rng.standard_normal(1 << 21).astype(np.float32)) for _ in range(8)]
rt.run([rt.upload_op(params + grads)])
opt = vkd.ZeroRedundancyOptimizer(params, "adamw", manager=rt.manager, lr=1e-4)
for _ in range(5):
    opt.step(grads)
prof = cProfile.Profile()
timings = []
for _ in range(10):
    dist.barrier()
    prof.enable()
    opt.step(grads)
    prof.disable()
    timings.append(dict(opt.last_timings))
if rank == 0:
    print(opt.communicator, "|", opt.device_staging)
    for k in timings[0]:
        print(f"  {k}: {1e3 * np.median([t[k] for t in timings]):.2f} ms")
    pstats.Stats(prof).sort_stats("tottime").print_stats(20)
opt.close()
rt.close()
dist.destroy_process_group()
