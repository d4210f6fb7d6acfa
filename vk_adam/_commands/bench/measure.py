"""The measurements: one AdamW step of one case on one backend, timed.

vk-adam on Vulkan goes through the runtime (``Runtime``; only ``vk_adam._runtime`` calls kp);
the peers are the float64 NumPy reference, torch on the CPU and torch on CUDA. Each returns a
``Result``; ``vk_adam._commands.bench.report`` turns them into the report.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..._runtime import Runtime
from .cases import Case

ALIGN = 64


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def _timeit(fn: Callable[[], Any], repeats: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


@dataclass
class Result:
    case: str
    backend: str
    gpu_ms: float | None = None
    sync_wall_ms: float | None = None
    pipelined_ms: float | None = None
    host_ms: float | None = None
    dispatches: int | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


# -- Vulkan -------------------------------------------------------------------------------------


class ClockWarmer:
    """Keeps the GPU busy for a moment right before something is timed.

    Under light, bursty load a GPU lowers its shader clock: on the H200, in a process that used
    only Vulkan, the SM clock fell from 1,980 MHz to 345 MHz within about three seconds of one
    copy at a time, and the copy then read 1,600 GB/s instead of 4,100 (BENCHMARKS.md, "The GPU's
    clock under light load"). ``warm()`` runs copies back to back for ``seconds`` so that what is
    timed right after it runs at a busy GPU's clock: the copy yardstick does this before each
    timed copy. (Measured there: 1,980 MHz throughout. 30 ms before each step of a process that
    uploads NumPy params for tens of milliseconds per step did not hold the clock up.)
    ``close()`` frees its buffers.
    """

    def __init__(self, rt: Runtime, seconds: float = 0.03, elements: int = 2**24) -> None:
        from ..._rules.spirv import load_spirv

        self.rt, self.seconds = rt, seconds
        self._a = rt.buffer(np.ones(elements, np.float32))
        self._b = rt.buffer(np.zeros(elements, np.float32))
        self._algo = rt.pipeline([self._a, self._b], load_spirv("copy"), elements // 4, (), 1)
        push = np.array([elements // 4], np.uint32).view(np.float32)
        rt.run([rt.upload_op([self._a, self._b])])
        # each copy after a barrier over both buffers: the copies write the same buffer
        self._batch = [
            op
            for _ in range(8)
            for op in (rt.barrier_op([self._a, self._b]), rt.dispatch_op(self._algo, push))
        ]

    def warm(self) -> None:
        end = time.perf_counter() + self.seconds
        while time.perf_counter() < end:
            self.rt.run(self._batch)

    def close(self) -> None:
        self.rt.destroy_pipeline(self._algo)
        self.rt.free_buffer(self._a)
        self.rt.free_buffer(self._b)


def copy_seconds(
    rt: Runtime, src: Any, dst: Any, elements: int, repeats: int, warm: Callable[[], None] | None = None
) -> float:
    """Median GPU seconds (Vulkan timestamps, after 3 untimed) of glsl/copy.comp copying
    ``elements`` floats of ``src`` into ``dst`` (uploaded buffers); ``warm`` runs before each."""
    from ..._rules.spirv import load_spirv

    push = np.array([elements // 4], np.uint32).view(np.float32)
    algo = rt.pipeline([src, dst], load_spirv("copy"), elements // 4, (), 1)
    try:
        samples = []
        for i in range(repeats + 3):
            if warm is not None:
                warm()
            ticks = rt.run([rt.dispatch_op(algo, push)], timestamps=True)
            assert ticks is not None
            if i >= 3:
                samples.append((ticks[1] - ticks[0]) * rt.timestamp_period * 1e-9)
        return statistics.median(samples)
    finally:
        rt.destroy_pipeline(algo)


def vulkan_copy_bandwidth(rt: Runtime, elements: int, repeats: int) -> float:
    """Bytes/s of a compute-shader copy (glsl/copy.comp: read + write, 16 B per load) timed by
    Vulkan timestamps: the bandwidth yardstick for the update shader on the same device. Each
    timed copy follows a moment of back-to-back copies (``ClockWarmer``), so it runs at the clock
    of a busy GPU."""
    a = rt.buffer(np.ones(elements, np.float32))
    b = rt.buffer(np.zeros(elements, np.float32))
    warmer = ClockWarmer(rt, elements=min(elements, 2**24))
    try:
        rt.run([rt.upload_op([a, b])])
        return float(2 * 4 * elements / copy_seconds(rt, a, b, elements, repeats, warmer.warm))
    finally:
        warmer.close()
        rt.free_buffer(a)
        rt.free_buffer(b)


def submit_wait_floor(rt: Runtime, repeats: int) -> dict[str, float]:
    """The bare cost of one tiny dispatch through the runtime: run (record + submit + wait),
    and submit then wait separately."""
    from ..._rules.spirv import load_spirv

    g = rt.buffer(np.zeros(1, np.float32))
    status = rt.buffer(np.zeros(1, np.uint32))
    push = np.array([1], np.uint32).view(np.float32)
    algo = rt.pipeline([g, status], load_spirv("nonfinite_check"), 1, (), 1)
    try:
        rt.run([rt.upload_op([g, status])])
        op = rt.dispatch_op(algo, push)
        prerecorded = _timeit(lambda: rt.run([op]), repeats * 5, 20)
        submit, wait = [], []
        for _ in range(repeats * 5):
            t0 = time.perf_counter()
            pending = rt.submit([op])
            t1 = time.perf_counter()
            pending.wait()
            submit.append(t1 - t0)
            wait.append(time.perf_counter() - t1)
        return {
            "eval_prerecorded_ms": _median_ms(prerecorded),
            "eval_async_submit_ms": _median_ms(submit),
            "eval_await_ms": _median_ms(wait),
        }
    finally:
        rt.destroy_pipeline(algo)
        rt.free_buffer(g)
        rt.free_buffer(status)


def raw_vulkan_floor(device_index: int) -> dict[str, Any] | None:
    """The hardware's floor without kp: benchmarks/vulkan_floor (a small C program), when built."""
    # this file is vk_adam/_commands/bench/measure.py: parents[3] is the checkout
    exe = Path(__file__).resolve().parents[3] / "benchmarks" / "vulkan_floor" / "vulkan_floor"
    if not exe.exists():
        return None
    import subprocess

    try:
        out = subprocess.run(
            [str(exe), "-d", str(device_index)], capture_output=True, text=True, timeout=300, check=True
        ).stdout
        report: dict[str, Any] = json.loads(out)
        return report
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return {"error": str(exc)}


def bench_vk(
    case: Case, rt: Runtime, per_tensor: bool, args: argparse.Namespace, clip: float | None = None
) -> Result:
    """vk-adam's AdamW on device buffers; with ``clip``, global-norm clipping on the device
    (its two passes count in the GPU time)."""
    from ..._optim.optimizer import Optimizer

    rng = np.random.default_rng(0)
    if per_tensor:
        params = [rt.buffer(rng.standard_normal(n, dtype=np.float32)) for n in case.sizes]
    else:
        total = sum(-(-n // ALIGN) * ALIGN for n in case.sizes)
        params = [rt.buffer(rng.standard_normal(total, dtype=np.float32))]
    # The application's device buffers: made on its manager (the runtime's, here).
    rt.run([rt.upload_op(params)])
    opt = Optimizer(
        params, "adamw", manager=rt.manager, zero_grad=False, profile=True, lr=1e-4, clip_grad_norm=clip
    )
    try:
        grads = [opt.grad_buffer(0, i) for i in range(len(params))]
        for g, p in zip(grads, params, strict=True):  # gradients: random, already on the device
            g.data()[:] = rng.standard_normal(int(p.size()), dtype=np.float32)
        rt.run([rt.upload_op(grads)])
        gpu, host = [], []
        for _ in range(args.warmup):
            opt.step()

        def timed() -> None:
            opt.step()
            assert opt.last_gpu_seconds is not None and opt.last_host_seconds is not None
            gpu.append(opt.last_gpu_seconds)
            host.append(opt.last_host_seconds)

        _timeit(timed, args.repeats, 0)
        # The sync step's wall time without the timestamps: they cost time of their own (a few
        # microseconds on a GPU, hundreds on lavapipe) that torch's timing does not pay.
        opt.profile = False
        wall = _timeit(opt.step, args.repeats, 1)
        n_steps = args.steps_per_batch
        batch = rt.manager.sequence()

        def back_to_back() -> None:
            # The GPU-resident case: steps recorded back to back into one of the application's
            # sequences, submitted once; no host wait between steps (barriers between steps).
            batch.clear()
            for _ in range(n_steps):
                opt.record_step(batch)
            batch.eval()

        pipe = _timeit(back_to_back, max(3, args.repeats // 5), 1)
        # The same with the recording left out of the clock: what the barriers between steps
        # cost on the GPU, apart from the host's recording of each step.
        eval_only: list[float] = []
        for _ in range(max(3, args.repeats // 5)):
            batch.clear()
            for _ in range(n_steps):
                opt.record_step(batch)
            t0 = time.perf_counter()
            batch.eval()
            eval_only.append(time.perf_counter() - t0)
        batch.destroy()
        issue: list[float] = []

        def async_steps() -> None:
            handle = None
            for _ in range(n_steps):
                t0 = time.perf_counter()
                handle = opt.step(wait=False)
                issue.append(time.perf_counter() - t0)
            assert handle is not None
            handle.wait()

        asynchronous = _timeit(async_steps, 3, 1)
        return Result(
            case.name,
            ("vk-adam per-tensor" if per_tensor else "vk-adam") + (" clip" if clip else ""),
            gpu_ms=_median_ms(gpu),
            sync_wall_ms=_median_ms(wall),
            pipelined_ms=_median_ms(pipe) / n_steps,
            host_ms=_median_ms(host),
            dispatches=opt.dispatches_per_step(),
            extra={
                "async_step_ms": _median_ms(asynchronous) / n_steps,
                "back_to_back_eval_ms": _median_ms(eval_only) / n_steps,
                "async_issue_ms": _median_ms(issue),
            },
        )
    finally:
        opt.close()
        for t in params:
            rt.free_buffer(t)


# -- CPU and CUDA peers -------------------------------------------------------------------------


def bench_numpy(case: Case, args: argparse.Namespace) -> Result:
    from ..._rules.builtin import ADAMW

    rng = np.random.default_rng(0)
    n = case.elements
    p, g = rng.standard_normal(n), rng.standard_normal(n)
    state = {"exp_avg": np.zeros(n), "exp_avg_sq": np.zeros(n)}
    hyper = {**ADAMW.defaults, "lr": 1e-4}
    step = [0]

    def run() -> None:
        step[0] += 1
        ADAMW.reference(p, g, state, hyper, step[0])

    wall = _timeit(run, max(3, args.repeats // 4), 1)
    return Result(case.name, "numpy-f64", sync_wall_ms=_median_ms(wall), pipelined_ms=_median_ms(wall))


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
    wall = _timeit(opt.step, max(3, args.repeats // 2), 2)
    return Result(
        case.name, f"torch-cpu-{mode}", sync_wall_ms=_median_ms(wall), pipelined_ms=_median_ms(wall)
    )


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

    wall = _timeit(sync_step, args.repeats, 2)
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
    return Result(
        case.name,
        "torch-cuda-fused" + (" clip" if clip else ""),
        gpu_ms=gpu_ms,
        sync_wall_ms=_median_ms(wall),
        pipelined_ms=_median_ms(pipe),
    )
