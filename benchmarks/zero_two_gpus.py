"""ZeRO-1 with one rank per GPU and NCCL on the Vulkan buffers, beside torch's
ZeroRedundancyOptimizer plus DDP's all-reduce, in one run.

    torchrun --nproc-per-node 2 benchmarks/zero_two_gpus.py [--elements 268435456] [--tensors 2]
        [--steps 50] [--warmup 5] [--out DIR]

Each rank opens the Vulkan device that is its CUDA device (``torch.cuda.set_device(local_rank)``,
matched by deviceUUID), makes ``--tensors`` float32 kp tensors of ``--elements`` each (the same
values on every rank) and gradients of its own (fixed for the run), and steps vk-adam's
``ZeroRedundancyOptimizer`` (AdamW, lr 1e-3, weight decay 0.01, ``zero_grad=False`` so every step
sees the same gradients) over NCCL, ``--steps`` times. Then torch, on the same values and
gradients: an all-reduce of the flat gradients divided by the world size (what DDP's buckets do
during backward), and ``torch.distributed.optim.ZeroRedundancyOptimizer`` with fused AdamW.

Written by rank 0 to ``DIR/zero_two_gpus.json`` and ``.md``, and printed:

* the median step after ``--warmup`` of each (the slowest rank's), with vk-adam's phases
  (``opt.last_timings``) and torch's all-reduce and ``step()`` apart;
* the state bytes per GPU, and what one GPU holding all of it would hold;
* whether the params are bit for bit the same on every rank after the last step (SHA-256 of each
  tensor's bytes), and vk-adam's largest difference from torch's params, relative to the params'
  largest magnitude.

``--dry-run``: gloo, and the host-mirror stand-in for CUDA (``stand_in_for_cuda``), so the
script itself can be checked on lavapipe; its times measure nothing of interest.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--elements", type=int, default=1 << 28, help="fp32 values per tensor")
    parser.add_argument("--tensors", type=int, default=2)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5, help="steps left out of the medians")
    parser.add_argument("--out", default="zero-two-gpus")
    parser.add_argument("--dry-run", action="store_true", help="gloo and a host stand-in for CUDA")
    return parser.parse_args()


def _values(seed: Any, n: int, scale: float) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n, dtype=np.float32) * np.float32(scale)


def _vulkan_device(local: int, dry_run: bool) -> int | None:
    """The Vulkan device that is CUDA device ``local`` (deviceUUID), else vk-adam's choice."""
    from vk_adam._runtime import DEVICE_ENV, list_devices
    from vk_adam.distributed import device_for_rank

    hardware = [d for d in list_devices() if not d.is_software]
    if not dry_run:
        from vk_adam._runtime import cuda

        uuid = cuda.driver().devices()[local].uuid
        for device in hardware:
            if device.device_uuid == uuid:
                return device.index
    return device_for_rank(local, [d.index for d in hardware], os.environ.get(DEVICE_ENV))


def _median_ms(samples: list[float]) -> float:
    return 1e3 * statistics.median(samples)


def run_vk(args: argparse.Namespace, rank: int, local: int, dist: Any) -> dict[str, Any]:
    import vk_adam.distributed as vkd
    from vk_adam._runtime import Runtime

    rt = Runtime(device=_vulkan_device(local, args.dry_run))
    sizes = [args.elements] * args.tensors
    params = [rt.buffer(_values([0, i], n, 1.0)) for i, n in enumerate(sizes)]
    grads = [rt.buffer(_values([7, rank, i], n, 1e-2)) for i, n in enumerate(sizes)]
    rt.run([rt.upload_op(params + grads)])
    times: list[float] = []
    phases: list[dict[str, float]] = []
    with vkd.ZeroRedundancyOptimizer(
        params, "adamw", manager=rt.manager, lr=1e-3, weight_decay=0.01, zero_grad=False
    ) as opt:
        for _ in range(args.steps):
            dist.barrier()
            began = time.perf_counter()
            opt.step(grads)
            times.append(time.perf_counter() - began)
            phases.append(dict(opt.last_timings))
        memory = opt.memory_bytes()
        transport, device = opt.communicator, opt.device.name if opt.device is not None else None
    rt.run([rt.download_op(params)])
    finals = [np.array(p.data(), np.float32) for p in params]
    rt.close()
    kept = phases[args.warmup :]
    return {
        "step_ms": _median_ms(times[args.warmup :]),
        "phases_ms": {k: _median_ms([p[k] for p in kept]) for k in kept[0] if k != "total"},
        "state_bytes": memory["state"] + memory["absmax"] + memory["master"],
        "transport": transport,
        "device": device,
        "digests": [hashlib.sha256(a.tobytes()).hexdigest() for a in finals],
        "params": finals,
    }


def run_torch(args: argparse.Namespace, rank: int, world: int, dist: Any) -> dict[str, Any]:
    import torch
    from torch.distributed.optim import ZeroRedundancyOptimizer

    from vk_adam._commands.bench.zero_worker import torch_state_bytes

    device = torch.device("cpu") if args.dry_run else torch.device("cuda", torch.cuda.current_device())
    sizes = [args.elements] * args.tensors
    params = [
        torch.from_numpy(_values([0, i], n, 1.0)).to(device).requires_grad_() for i, n in enumerate(sizes)
    ]
    flat = torch.cat([torch.from_numpy(_values([7, rank, i], n, 1e-2)) for i, n in enumerate(sizes)]).to(
        device
    )
    fused = {} if args.dry_run else {"fused": True}
    opt = ZeroRedundancyOptimizer(
        params, optimizer_class=torch.optim.AdamW, lr=1e-3, weight_decay=0.01, **fused
    )

    def sync() -> None:
        if not args.dry_run:
            torch.cuda.synchronize()

    reduce_times, step_times = [], []
    for _ in range(args.steps):
        dist.barrier()
        sync()
        began = time.perf_counter()
        bucket = flat.clone()
        dist.all_reduce(bucket)
        bucket /= world
        sync()
        reduced = time.perf_counter()
        for p, g in zip(params, torch.split(bucket, sizes), strict=True):
            p.grad = g
        opt.step()
        sync()
        reduce_times.append(reduced - began)
        step_times.append(time.perf_counter() - reduced)
    return {
        "all_reduce_ms": _median_ms(reduce_times[args.warmup :]),
        "step_ms": _median_ms(step_times[args.warmup :]),
        "state_bytes": torch_state_bytes(opt),
        "params": [p.detach().cpu().numpy() for p in params],
    }


def main() -> None:
    args = _args()
    if args.dry_run:
        from vk_adam._runtime import stand_in_for_cuda

        stand_in_for_cuda(True)
    import torch
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", "0"))
    if not args.dry_run:
        torch.cuda.set_device(local)
    if args.dry_run:
        dist.init_process_group("gloo")
    else:
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, world = dist.get_rank(), dist.get_world_size()
    vk = run_vk(args, rank, local, dist)
    theirs = run_torch(args, rank, world, dist)
    ours = vk.pop("params")
    scale = max(float(np.abs(t).max()) for t in theirs["params"])
    vk["max_difference_from_torch"] = (
        max(float(np.abs(a - t).max()) for a, t in zip(ours, theirs.pop("params"), strict=True)) / scale
    )
    del ours
    reports = [None] * world
    dist.all_gather_object(reports, {"vk": vk, "torch": theirs})
    dist.destroy_process_group()
    if rank == 0:
        _write(args, world, reports)


def _write(args: argparse.Namespace, world: int, reports: list[Any]) -> None:
    vk = [r["vk"] for r in reports]
    torch_ = [r["torch"] for r in reports]
    one_gpu_state = 2 * 4 * args.elements * args.tensors  # AdamW's m and v, float32, unsharded
    identical = all(r["digests"] == vk[0]["digests"] for r in vk)
    result = {
        "meta": {
            "ranks": world,
            "elements": args.elements,
            "tensors": args.tensors,
            "steps": args.steps,
            "warmup": args.warmup,
            "dry_run": args.dry_run,
            "devices": sorted({str(r["device"]) for r in vk}),
            "transport": vk[0]["transport"],
        },
        "vk_adam": {
            "step_ms": max(r["step_ms"] for r in vk),
            "phases_ms": {k: statistics.mean(r["phases_ms"][k] for r in vk) for k in vk[0]["phases_ms"]},
            "state_bytes_per_gpu": [r["state_bytes"] for r in vk],
            "params_identical_on_every_rank": identical,
            "max_difference_from_torch": max(r["max_difference_from_torch"] for r in vk),
        },
        "torch": {
            "all_reduce_ms": max(r["all_reduce_ms"] for r in torch_),
            "step_ms": max(r["step_ms"] for r in torch_),
            "state_bytes_per_gpu": [r["state_bytes"] for r in torch_],
        },
        "one_gpu_state_bytes": one_gpu_state,
    }
    ours, theirs = result["vk_adam"], result["torch"]
    gib = 1 << 30
    lines = [
        f"ZeRO-1, AdamW over {args.tensors} x {args.elements:,} fp32 values, {world} ranks "
        f"({', '.join(result['meta']['devices'])}); median of steps {args.warmup + 1}-{args.steps}, "
        "the slowest rank's" + (" (dry run: not a measurement)" if args.dry_run else ""),
        "",
        "| | step ms | state GiB per GPU |",
        "|---|---:|---|",
        f"| vk-adam ZeRO-1, {vk[0]['transport']} | {ours['step_ms']:.2f} | "
        + ", ".join(f"{b / gib:.2f}" for b in ours["state_bytes_per_gpu"])
        + " |",
        f"| torch all-reduce (DDP's) + ZeroRedundancyOptimizer step | "
        f"{theirs['all_reduce_ms']:.2f} + {theirs['step_ms']:.2f} = "
        f"{theirs['all_reduce_ms'] + theirs['step_ms']:.2f} | "
        + ", ".join(f"{b / gib:.2f}" for b in theirs["state_bytes_per_gpu"])
        + " |",
        "",
        "vk-adam's phases, ms: " + ", ".join(f"{k} {v:.3f}" for k, v in ours["phases_ms"].items()),
        f"one GPU holding all the state: {one_gpu_state / gib:.2f} GiB",
        f"params bit for bit the same on every rank after {args.steps} steps: {identical}",
        f"vk-adam's largest difference from torch's params, over their largest magnitude: "
        f"{ours['max_difference_from_torch']:.2e}",
    ]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "zero_two_gpus.json").write_text(json.dumps(result, indent=2))
    (out / "zero_two_gpus.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
