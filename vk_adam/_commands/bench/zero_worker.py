"""One rank of ``vk-adam bench --cases zero`` (launched by ``zero.py``; not for direct use):
``python -m vk_adam._commands.bench.zero_worker CONFIG_JSON OUT_DIR``.

Over torch.distributed (the launcher sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR``, ``MASTER_PORT``) it measures vk-adam's ZeRO-1 on gloo, and torch's
``ZeroRedundancyOptimizer`` (AdamW) on the CPU over gloo and, where torch has CUDA, on CUDA
tensors (NCCL when every rank has a GPU of its own, else gloo: NCCL refuses two ranks on one
GPU). Under mpirun it measures vk-adam's ZeRO-1 over MPI. vk-adam's ZeRO-1 runs twice on each
transport: over NumPy params, and over device buffers (float32 kp tensors on the rank's own
``kp.Manager``, on the device the NumPy run's optimizer opens, with gradients as kp tensors
uploaded once before timing, as a training loop's already live on the device). Every rank writes
``OUT_DIR/<backend>-rank<r>.json``: its median step time, the phases of a vk-adam step, the
optimizer-state bytes it holds, and for device buffers how they reached host memory.

Each backend gets the same work: AdamW over ``tensors`` params of ``elements`` in all, each
rank's own gradients reduced to their mean before the update. torch's ZeRO takes gradients
already reduced (DDP does it), so its step is timed with one all-reduce of a flat gradient
buffer (as DDP's buckets) before ``step()``, which then broadcasts every rank's params.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def _sizes(elements: int, tensors: int) -> list[int]:
    base = elements // tensors
    return [base + (elements - base * tensors if i == 0 else 0) for i in range(tensors)]


def _grads(rank: int, sizes: list[int]) -> list[np.ndarray]:
    rng = np.random.default_rng([7, rank])
    return [(rng.standard_normal(n) * 1e-2).astype(np.float32) for n in sizes]


def _timed(step: Callable[[], Any], warmup: int, repeats: int, barrier: Callable[[], Any]) -> list[float]:
    for _ in range(warmup):
        step()
    times = []
    for _ in range(repeats):
        barrier()  # every rank starts the step together: the time is the job's, not the fastest rank's
        began = time.perf_counter()
        step()
        times.append(time.perf_counter() - began)
    return times


def _params(sizes: list[int]) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(n).astype(np.float32) for n in sizes]


def _measure(
    opt: Any, grads: list[Any], config: dict[str, Any], barrier: Callable[[], Any]
) -> dict[str, Any]:
    """The median of ``opt.step(grads)`` and of each of its phases (``opt.last_timings``)."""
    phases: list[dict[str, float]] = []

    def step() -> None:
        opt.step(grads)
        phases.append(dict(opt.last_timings))

    times = _timed(step, config["warmup"], config["repeats"], barrier)
    timed = phases[config["warmup"] :]
    memory = opt.memory_bytes()
    return {
        "step_ms": _median_ms(times),
        "phases_ms": {k: _median_ms([p[k] for p in timed]) for k in timed[0] if k != "total"},
        "state_bytes": memory["state"] + memory["absmax"] + memory["master"],
        "shard": list(opt.shard),
        "device": opt.device.name if opt.device is not None else None,
        "transport": opt.communicator,
    }


def bench_vk_zero(config: dict[str, Any], comm: Any, rank: int, barrier: Callable[[], Any]) -> dict[str, Any]:
    """vk-adam's ZeRO-1 over NumPy params and NumPy gradients."""
    import vk_adam.distributed as vkd

    sizes = _sizes(config["elements"], config["tensors"])
    options = {"state_dtype": config.get("state_dtype", "float32")}
    with vkd.ZeroRedundancyOptimizer(_params(sizes), "adamw", comm=comm, lr=1e-4, **options) as opt:
        return _measure(opt, _grads(rank, sizes), config, barrier)


def bench_vk_zero_device(
    config: dict[str, Any], comm: Any, rank: int, barrier: Callable[[], Any]
) -> dict[str, Any]:
    """vk-adam's ZeRO-1 over device buffers: float32 kp tensor params on this rank's own
    ``kp.Manager`` (the device its optimizer opens without ``manager=``: ``$VK_ADAM_DEVICE``, else
    the local rank's GPU among several, else the usual choice), stepped with kp tensor gradients
    uploaded once, before timing (the step zeroes them, as ``zero_grad`` does in training)."""
    import vk_adam.distributed as vkd
    from vk_adam._runtime import DEVICE_ENV, Runtime, list_devices
    from vk_adam.distributed import agree, device_for_rank, make_communicator

    channel = make_communicator(comm, None)
    sizes = _sizes(config["elements"], config["tensors"])
    rt, params, grads, error = None, [], [], None
    try:
        hardware = [d.index for d in list_devices() if not d.is_software]
        local = channel.local_rank if channel.local_rank is not None else rank
        # the shared device, its kp.Manager the one an application gets from vk_adam.open_device()
        rt = Runtime(device=device_for_rank(local, hardware, os.environ.get(DEVICE_ENV)))
        params = [rt.buffer(a) for a in _params(sizes)]
        grads = [rt.buffer(g) for g in _grads(rank, sizes)]
        rt.run([rt.upload_op(params + grads)])
    except Exception as exc:  # raised on every rank below: none waits for this one
        error = exc
    try:
        agree(channel, error, "device buffers")
        assert rt is not None
        options = {"state_dtype": config.get("state_dtype", "float32")}
        with vkd.ZeroRedundancyOptimizer(
            params, "adamw", comm=comm, manager=rt.manager, lr=1e-4, **options
        ) as opt:
            return _measure(opt, grads, config, barrier) | {"device_staging": opt.device_staging}
    finally:
        if rt is not None:
            rt.close()  # frees the buffers


def bench_torch_zero(config: dict[str, Any], rank: int, world: int, device: str) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from torch.distributed.optim import ZeroRedundancyOptimizer

    group, backend = None, "gloo"
    if device == "cuda":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        if torch.cuda.device_count() >= world:  # NCCL: one GPU per rank
            torch.cuda.set_device(local)
            group, backend = dist.new_group(backend="nccl"), "nccl"
        else:  # ranks share a GPU: NCCL refuses that; gloo moves CUDA tensors through the host
            torch.cuda.set_device(local % torch.cuda.device_count())
    dev = torch.device(device, torch.cuda.current_device()) if device == "cuda" else torch.device("cpu")
    sizes = _sizes(config["elements"], config["tensors"])
    torch.manual_seed(0)
    params = [torch.randn(n, device=dev, requires_grad=True) for n in sizes]
    opt = ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.AdamW, process_group=group, lr=1e-4)
    flat = torch.cat([torch.from_numpy(g) for g in _grads(rank, sizes)]).to(dev)

    def step() -> None:
        bucket = flat.clone()  # this step's local gradients, reduced to their mean as DDP does
        dist.all_reduce(bucket, group=group)
        bucket /= world
        for p, g in zip(params, torch.split(bucket, sizes), strict=True):
            p.grad = g
        opt.step()
        if device == "cuda":
            torch.cuda.synchronize()

    def barrier() -> None:
        dist.barrier(group=group)

    times = _timed(step, config["warmup"], config["repeats"], barrier)
    return {
        "step_ms": _median_ms(times),
        "state_bytes": torch_state_bytes(opt),
        "transport": f"torch.distributed {backend}",
    }


def torch_state_bytes(opt: Any) -> int:
    """Bytes of the tensors in a torch ZeroRedundancyOptimizer's state: this rank's shard's."""
    import torch

    state = opt.optim.state
    return int(
        sum(t.numel() * t.element_size() for s in state.values() for t in s.values() if torch.is_tensor(t))
    )


def _run(runs: list[tuple[str, Callable[[], dict[str, Any]]]], rank: int, out: Path) -> None:
    for name, run in runs:
        try:
            result = run()
        except Exception as exc:  # one failed backend must not lose the others
            result = {"failed": f"{type(exc).__name__}: {exc}"}
        (out / f"{name}-rank{rank}.json").write_text(json.dumps(result))


def main(config: dict[str, Any], out: Path) -> None:
    if config["transport"] == "mpi":
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        rank = comm.Get_rank()
        runs: list[tuple[str, Callable[[], dict[str, Any]]]] = [
            ("vk-adam-zero1-mpi", lambda: bench_vk_zero(config, comm, rank, comm.Barrier)),
            ("vk-adam-zero1-mpi-device", lambda: bench_vk_zero_device(config, comm, rank, comm.Barrier)),
        ]
        _run(runs, rank, out)
        return
    import torch
    import torch.distributed as dist

    if config.get("nccl"):  # one rank per GPU: NCCL on the Vulkan buffers, and torch's
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group("nccl")
        rank, world = dist.get_rank(), dist.get_world_size()
        runs = [
            ("vk-adam-zero1-nccl-device", lambda: bench_vk_zero_device(config, None, rank, dist.barrier)),
            ("torch-zero-nccl", lambda: bench_torch_zero(config, rank, world, "cuda")),
        ]
        _run(runs, rank, out)
        dist.destroy_process_group()
        return
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    runs = [
        ("vk-adam-zero1-gloo", lambda: bench_vk_zero(config, None, rank, dist.barrier)),
        ("vk-adam-zero1-gloo-device", lambda: bench_vk_zero_device(config, None, rank, dist.barrier)),
        ("torch-zero-cpu", lambda: bench_torch_zero(config, rank, world, "cpu")),
    ]
    if torch.cuda.is_available():
        runs.append(("torch-zero-cuda", lambda: bench_torch_zero(config, rank, world, "cuda")))
    _run(runs, rank, out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]), Path(sys.argv[2]))
