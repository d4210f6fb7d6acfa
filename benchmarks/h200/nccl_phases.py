"""The phase split of a ZeRO-1 step with NCCL on the Vulkan buffers at world size 1 (2^24 fp32
AdamW in 8 kp tensors, as `vk-adam bench --cases zero`), with host waits and with the timeline
semaphore. Median us of 60 after 10:

* each piece of a step run alone and waited for: the pull's Vulkan submission, the
  reduce-scatter (CUDA, after Vulkan's work), the update's recording (host only), its submission
  (after CUDA's reduce-scatter), the all-gather, the push;
* the update's and the push's submissions again with no CUDA work since Vulkan's last one: the
  difference is what going from CUDA's work to Vulkan's costs there;
* the whole step as `step()` runs it, and its `last_timings`.

    python benchmarks/h200/nccl_phases.py            # the GPU machine: NCCL
    python benchmarks/h200/nccl_phases.py --dry-run  # lavapipe: gloo, the host mirror for CUDA
"""

import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

import vk_adam.distributed as vkd
from vk_adam._runtime import Runtime, stand_in_for_cuda

DRY = "--dry-run" in sys.argv
if DRY:
    stand_in_for_cuda(True)

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29537")
if DRY:
    dist.init_process_group("gloo", rank=0, world_size=1)
    sync, orders, n = (lambda: None), ("host",), 1 << 16
else:
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1)
    sync, orders, n = torch.cuda.synchronize, ("host", "semaphores"), 1 << 21
rng = np.random.default_rng(0)
rt = Runtime()
params = [rt.buffer(rng.standard_normal(n).astype(np.float32)) for _ in range(8)]
grads = [rt.buffer(rng.standard_normal(n).astype(np.float32)) for _ in range(8)]
rt.run([rt.upload_op(params + grads)])
WARM, KEEP = 10, 60


def timed(samples, name, call):
    began = time.perf_counter()
    call()
    samples.setdefault(name, []).append(time.perf_counter() - began)


def pieces(opt, samples):
    """One step's pieces, each waited for; then the update and the push with no CUDA work before."""
    parts = opt.internals()
    nccl, comm = parts.nccl, parts.comm
    timed(samples, "pull (Vulkan)", lambda: (nccl.pull(grads), nccl.finish()))
    timed(samples, "reduce-scatter (CUDA, after Vulkan)", lambda: (nccl.reduce_scatter(comm, 1), sync()))
    timed(samples, "update: recording (host)", lambda: (parts.sync_hyper(), nccl.record_update(parts.shard)))
    timed(samples, "update: submission (Vulkan, after CUDA)", lambda: (nccl.run_update(), nccl.finish()))
    timed(samples, "all-gather (CUDA, after Vulkan)", lambda: (nccl.all_gather(comm), sync()))
    timed(samples, "push (Vulkan, after CUDA)", lambda: nccl.push(grads))
    # the same submissions, the GPU's last work Vulkan's: no switch from CUDA before them
    nccl.pull(grads)
    nccl.finish()
    parts.sync_hyper()
    nccl.record_update(parts.shard)
    timed(samples, "update: submission, no CUDA before", lambda: (nccl.run_update(), nccl.finish()))
    timed(samples, "push, no CUDA before", lambda: nccl.push(grads))


for order in orders:
    os.environ["VK_ADAM_NCCL_ORDER"] = order
    with vkd.ZeroRedundancyOptimizer(params, "adamw", manager=rt.manager, lr=1e-4) as opt:
        assert opt.internals().nccl is not None, opt.device_staging
        print(f"{opt.device_staging}, {8 * n:,} fp32 params in 8 kp tensors", flush=True)
        samples = {}
        for _ in range(WARM + KEEP):
            pieces(opt, samples)
        medians = {k: 1e6 * float(np.median(v[WARM:])) for k, v in samples.items()}
        serial = sum(v for k, v in medians.items() if "no CUDA" not in k)
        for name, us in medians.items():
            print(f"  {name}: {us:.1f} us")
        print(f"  the six pieces of a step, one after another: {serial:.1f} us")
    with vkd.ZeroRedundancyOptimizer(params, "adamw", manager=rt.manager, lr=1e-4) as opt:
        steps, phases = [], []
        for _ in range(WARM + KEEP):
            began = time.perf_counter()
            opt.step(grads)
            steps.append(time.perf_counter() - began)
            phases.append(dict(opt.last_timings))
        print(f"  step(): {1e6 * np.median(steps[WARM:]):.1f} us; its last_timings (median us):")
        for k in phases[0]:
            print(f"    {k}: {1e6 * np.median([p[k] for p in phases[WARM:]]):.1f}", flush=True)
rt.close()
dist.destroy_process_group()
