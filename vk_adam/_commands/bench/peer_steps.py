"""The peers' measurements: one AdamW step of one case with the float64 NumPy reference,
torch on the CPU and torch on CUDA (launched, and replayed from a CUDA graph), timed, and
CUDA's copy bandwidth. ``measure`` (the Vulkan side) re-exports them, so the bench imports every
measurement from there."""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from .cases import Case
from .timing import Result, median_ms, timeit


def bench_numpy(case: Case, args: argparse.Namespace) -> Result:
    from ..._rules import ADAMW

    rng = np.random.default_rng(0)
    n = case.elements
    p, g = rng.standard_normal(n), rng.standard_normal(n)
    state = {"exp_avg": np.zeros(n), "exp_avg_sq": np.zeros(n)}
    hyper = {**ADAMW.defaults, "lr": 1e-4}
    step = [0]

    def run() -> None:
        step[0] += 1
        ADAMW.reference(p, g, state, hyper, step[0])

    wall = timeit(run, max(3, args.repeats // 4), 1)
    return Result(case.name, "numpy-f64", sync_wall_ms=median_ms(wall), pipelined_ms=median_ms(wall))


def _torch_params(case: Case, device: str) -> list[Any]:
    import torch

    gen = torch.Generator(device="cpu").manual_seed(0)
    params = []
    for n in case.sizes:
        p = torch.randn(n, generator=gen).to(device).requires_grad_()
        p.grad = torch.randn(n, generator=gen).to(device)
        params.append(p)
    return params


def bench_torch_cpu(case: Case, mode: str, args: argparse.Namespace) -> Result:
    import torch

    params = _torch_params(case, "cpu")
    opt = torch.optim.AdamW(params, lr=1e-4, foreach=mode == "foreach", fused=mode == "fused")
    wall = timeit(opt.step, max(3, args.repeats // 2), 2)
    return Result(case.name, f"torch-cpu-{mode}", sync_wall_ms=median_ms(wall), pipelined_ms=median_ms(wall))


def _cuda_event() -> Any:
    import torch

    return torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]


def cuda_copy_bandwidth(elements: int, repeats: int) -> float:
    import torch

    a = torch.ones(elements, device="cuda")
    b = torch.empty_like(a)
    start, end = _cuda_event(), _cuda_event()
    for _ in range(3):
        b.copy_(a)
    start.record()
    for _ in range(repeats):
        b.copy_(a)
    end.record()
    torch.cuda.synchronize()
    return float(2 * 4 * elements * repeats / (start.elapsed_time(end) * 1e-3))


def bench_torch_cuda(case: Case, args: argparse.Namespace, clip: float | None = None) -> Result:
    """torch's fused AdamW on CUDA; with ``clip``, ``clip_grad_norm_`` (foreach) before each step."""
    import torch

    params = _torch_params(case, "cuda")
    fused = torch.optim.AdamW(params, lr=1e-4, fused=True)

    class _Step:
        def step(self) -> None:
            if clip:
                torch.nn.utils.clip_grad_norm_(params, clip, foreach=True)
            fused.step()

    opt = _Step()
    for _ in range(args.warmup):
        opt.step()
    torch.cuda.synchronize()

    def sync_step() -> None:
        opt.step()
        torch.cuda.synchronize()

    wall = timeit(sync_step, args.repeats, 2)
    start, end = _cuda_event(), _cuda_event()
    n = args.steps_per_batch
    start.record()
    for _ in range(n):
        opt.step()
    end.record()
    torch.cuda.synchronize()
    gpu_ms = start.elapsed_time(end) / n  # back-to-back steps: GPU time per step
    pipe = []
    for _ in range(max(3, args.repeats // 5)):
        t0 = time.perf_counter()
        for _ in range(n):
            opt.step()
        torch.cuda.synchronize()
        pipe.append((time.perf_counter() - t0) / n)
    graph: dict[str, Any]
    try:
        graph = cuda_graph_figures(params, clip, n, max(3, args.repeats // 5), args.warmup)
    except Exception as exc:  # the launched figures above stand on their own
        graph = {"graph_note": f"CUDA graph failed: {type(exc).__name__}: {exc}"}
    return Result(
        case.name,
        "torch-cuda-fused" + (" clip" if clip else ""),
        gpu_ms=gpu_ms,
        sync_wall_ms=median_ms(wall),
        pipelined_ms=median_ms(pipe),
        extra=graph,
    )


def cuda_graph_figures(
    params: list[Any], clip: float | None, steps: int, repeats: int, warmup: int
) -> dict[str, float]:
    """torch's fastest way to run its step: a new ``AdamW(fused=True, capturable=True)`` on
    ``params`` (CUDA tensors with their gradients set), one step (after ``clip_grad_norm_``
    with ``clip``) captured in a CUDA graph, the graph replayed ``steps`` times back to back then
    one sync, ``repeats`` times (the pattern of the demo's ``torch_graph_trainer``). Returns
    ``graph_replay_ms`` (wall ms per step) and ``graph_gpu_ms`` (CUDA events around the replays,
    ms per step), medians; ``graph_steps_run`` and ``graph_steps_counted``: the steps run and
    the optimizer's count after them (equal: every replay was a step)."""
    import torch

    opt = torch.optim.AdamW(params, lr=1e-4, fused=True, capturable=True)

    def step() -> None:
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip, foreach=True)
        opt.step()

    # Warm up on a side stream (the optimizer makes its state there, as capture requires).
    side = torch.cuda.Stream()  # type: ignore[no-untyped-call]
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    for _ in range(warmup):
        graph.replay()
    torch.cuda.synchronize()
    wall, gpu = [], []
    start, end = _cuda_event(), _cuda_event()
    for _ in range(repeats):
        t0 = time.perf_counter()
        start.record()
        for _ in range(steps):
            graph.replay()
        end.record()
        torch.cuda.synchronize()
        wall.append((time.perf_counter() - t0) / steps)
        gpu.append(start.elapsed_time(end) * 1e-3 / steps)
    return {
        "graph_replay_ms": median_ms(wall),
        "graph_gpu_ms": median_ms(gpu),
        # what ran eagerly, then every replay (the capture itself runs nothing), and torch's count
        "graph_steps_run": 3 + warmup + repeats * steps,
        "graph_steps_counted": int(opt.state[params[0]]["step"].item()),
    }
