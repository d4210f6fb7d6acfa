"""The measurements: one AdamW step of one case on one backend, timed.

vk-adam on Vulkan goes through the runtime (``Runtime``; only ``vk_adam._runtime`` calls kp),
here; the peers are the float64 NumPy reference, torch on the CPU and torch on CUDA, in
``peer_steps`` (re-exported here). Each returns a ``Result`` (``timing``);
``vk_adam._commands.bench.report`` turns them into the report. The plain vk-adam run also
measures captured steps (``capturable=True``, ``captured_figures``): what the device's step
clock costs the step, and one recording of N steps evaluated again and again.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..._runtime import Runtime, element_count, host_view
from .cases import Case
from .peer_steps import bench_numpy, bench_torch_cpu, bench_torch_cuda, cuda_copy_bandwidth
from .timing import Result, median_ms, timeit

ALIGN = 64


class ClockWarmer:
    """Keeps the GPU busy for a moment right before something is timed.

    Under light, bursty load a GPU lowers its shader clock (BENCHMARKS.md cites the run that
    showed it). ``warm()`` runs copies back to back for ``seconds`` so that what is timed right
    after it runs at a busy GPU's clock: the copy yardstick does this before each timed copy.
    Warming before each step of a process that spends long on the host per step does not hold
    the clock up.
    ``close()`` frees its buffers.
    """

    def __init__(self, rt: Runtime, seconds: float = 0.03, elements: int = 2**24) -> None:
        from ..._rules import load_spirv

        self.rt, self.seconds = rt, seconds
        self._a = rt.buffer(np.ones(elements, np.float32))
        self._b = rt.buffer(np.zeros(elements, np.float32))
        self._algo = rt.pipeline(
            [self._a, self._b],
            load_spirv("copy"),
            elements // 4,
            rt.sized_spec(),
            1,
            threads=rt.facts.threads,
        )
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
    from ..._rules import load_spirv

    push = np.array([elements // 4], np.uint32).view(np.float32)
    algo = rt.pipeline(
        [src, dst], load_spirv("copy"), elements // 4, rt.sized_spec(), 1, threads=rt.facts.threads
    )
    try:
        samples = []
        for i in range(repeats + 3):
            if warm is not None:
                warm()
            ticks = rt.run([rt.dispatch_op(algo, push)], timestamps=True)
            assert ticks is not None
            if i >= 3:
                samples.append((ticks[1] - ticks[0]) * rt.facts.timestamp_period * 1e-9)
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
    from ..._rules import load_spirv

    g = rt.buffer(np.zeros(1, np.float32))
    status = rt.buffer(np.zeros(1, np.uint32))
    push = np.array([1], np.uint32).view(np.float32)
    algo = rt.pipeline(
        [g, status], load_spirv("nonfinite_check"), 1, rt.sized_spec(), 1, threads=rt.facts.threads
    )
    try:
        rt.run([rt.upload_op([g, status])])
        op = rt.dispatch_op(algo, push)
        prerecorded = timeit(lambda: rt.run([op]), repeats * 5, 20)
        submit, wait = [], []
        for _ in range(repeats * 5):
            t0 = time.perf_counter()
            pending = rt.submit([op])
            t1 = time.perf_counter()
            pending.wait()
            submit.append(t1 - t0)
            wait.append(time.perf_counter() - t1)
        return {
            "eval_prerecorded_ms": median_ms(prerecorded),
            "eval_async_submit_ms": median_ms(submit),
            "eval_await_ms": median_ms(wait),
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


#: The largest batch ``overlapped_steps`` records into one sequence.
MAX_OVERLAP_BATCH = 16


def overlapped_steps(
    rt: Runtime,
    record_step: Callable[[Any], Any],
    sequences: list[Any],
    steps: int,
    max_batch: int = MAX_OVERLAP_BATCH,
) -> None:
    """``steps`` steps (``record_step(sequence)`` each) recorded in batches into ``sequences``
    (two, of ``rt``) in turn, each batch submitted without a wait, the next recorded while the
    GPU runs it; then every batch waited for. Batches grow 1, 2, 4, ... up to ``max_batch``
    steps so that the GPU starts after one step's recording, not a whole batch's."""
    pending: list[Any] = [None] * len(sequences)
    done, size, i = 0, 1, 0
    while done < steps:
        if pending[i] is not None:
            pending[i].wait()  # its sequence is cleared next; the other one keeps the GPU busy
        sequence = sequences[i]
        rt.rerecord(sequence, [])
        count = min(size, steps - done)
        for _ in range(count):
            record_step(sequence)
        pending[i] = rt.evaluate_async(sequence)
        done, size, i = done + count, min(2 * size, max_batch), (i + 1) % len(sequences)
    for p in pending:
        if p is not None:
            p.wait()


def bench_vk(
    case: Case, rt: Runtime, per_tensor: bool, args: argparse.Namespace, clip: float | None = None
) -> Result:
    """vk-adam's AdamW on device buffers; with ``clip``, global-norm clipping on the device
    (its two passes count in the GPU time)."""
    from ..._optim import Optimizer

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
            host_view(g)[:] = rng.standard_normal(element_count(p), dtype=np.float32)
        rt.run([rt.upload_op(grads)])
        gpu, host = [], []
        for _ in range(args.warmup):
            opt.step()

        def timed() -> None:
            opt.step()
            assert opt.last_gpu_seconds is not None and opt.last_host_seconds is not None
            gpu.append(opt.last_gpu_seconds)
            host.append(opt.last_host_seconds)

        timeit(timed, args.repeats, 0)
        # The sync step's wall time without the timestamps: they cost time of their own (a few
        # microseconds on a GPU, hundreds on lavapipe) that torch's timing does not pay.
        opt.profile = False
        wall = timeit(opt.step, args.repeats, 1)
        n_steps = args.steps_per_batch
        batch = rt.new_sequence()

        def back_to_back() -> None:
            # Record then submit: steps recorded back to back into one of the application's
            # sequences, submitted once; no host wait between steps (barriers between steps).
            # The host's recording of every step is in the clock, before the GPU starts.
            rt.rerecord(batch, [])
            for _ in range(n_steps):
                opt.record_step(batch)
            rt.evaluate(batch)

        pipe = timeit(back_to_back, max(3, args.repeats // 5), 1)
        # The same with the recording left out of the clock: what the barriers between steps
        # cost on the GPU, apart from the host's recording of each step (timed on its own).
        eval_only: list[float] = []
        record: list[float] = []  # host seconds of each record_step call
        for _ in range(max(3, args.repeats // 5)):
            rt.rerecord(batch, [])
            for _ in range(n_steps):
                t0 = time.perf_counter()
                opt.record_step(batch)
                record.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            rt.evaluate(batch)
            eval_only.append(time.perf_counter() - t0)
        # Batched and overlapped (docs/usage.md, "Recording while the GPU runs"): the same steps
        # in batches over two sequences, each submitted without a wait and the next recorded
        # while the GPU runs it, as a Vulkan application keeps its GPU busy.
        pair = [batch, rt.new_sequence()]
        overlapped = timeit(
            lambda: overlapped_steps(rt, opt.record_step, pair, n_steps), max(3, args.repeats // 5), 1
        )
        rt.free_sequence(pair[1])
        rt.free_sequence(batch)
        issue: list[float] = []

        def async_steps() -> None:
            handle = None
            for _ in range(n_steps):
                t0 = time.perf_counter()
                handle = opt.step(wait=False)
                issue.append(time.perf_counter() - t0)
            assert handle is not None
            handle.wait()

        asynchronous = timeit(async_steps, 3, 1)
        extra: dict[str, Any] = {}
        if not per_tensor and clip is None:
            extra = _captured_beside(rt, opt, params, grads, args)
        return Result(
            case.name,
            ("vk-adam per-tensor" if per_tensor else "vk-adam") + (" clip" if clip else ""),
            gpu_ms=median_ms(gpu),
            sync_wall_ms=median_ms(wall),
            pipelined_ms=median_ms(pipe) / n_steps,
            host_ms=median_ms(host),
            dispatches=opt.dispatches_per_step(),
            extra={
                "async_step_ms": median_ms(asynchronous) / n_steps,
                "back_to_back_eval_ms": median_ms(eval_only) / n_steps,
                "back_to_back_overlapped_ms": median_ms(overlapped) / n_steps,
                "record_step_us": median_ms(record) * 1e3,
                "async_issue_ms": median_ms(issue),
                **extra,
            },
        )
    finally:
        opt.close()
        for t in params:
            rt.free_buffer(t)


def _captured_beside(
    rt: Runtime, plain: Any, params: list[Any], grads: list[Any], args: argparse.Namespace
) -> dict[str, Any]:
    """``captured_figures`` for a capturable optimizer made on ``plain``'s params, its gradients
    a copy of ``grads`` (the same values: the two steps do the same work). A failure (a kp
    without vk-adam's patches cannot run captured steps) is a note: the row keeps its other
    figures."""
    from ..._optim import Optimizer

    try:
        captured = Optimizer(
            params, "adamw", manager=rt.manager, zero_grad=False, profile=True, lr=1e-4, capturable=True
        )
    except Exception as exc:
        return {"captured_note": f"no captured steps: {type(exc).__name__}: {exc}"}
    try:
        own = [captured.grad_buffer(0, i) for i in range(len(params))]
        for mine, theirs in zip(own, grads, strict=True):
            host_view(mine)[:] = host_view(theirs)  # the host copy of what was uploaded
        rt.run([rt.upload_op(own)])
        figures = captured_figures(rt, plain, captured, args)
        if figures["captured_steps_counted"] != figures["captured_steps_run"]:
            figures["captured_note"] = (
                f"the device counted {figures['captured_steps_counted']} captured steps of "
                f"{figures['captured_steps_run']} run"
            )
        return figures
    except Exception as exc:  # the push-constant figures above stand on their own
        return {"captured_note": f"captured steps failed: {type(exc).__name__}: {exc}"}
    finally:
        captured.close()


def captured_figures(rt: Runtime, plain: Any, captured: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Captured steps beside push-constant ones, on the same params and gradients: ``plain`` a
    push-constant optimizer, ``captured`` one made with ``capturable=True`` whose gradients were
    given (``grad_buffer()`` taken and written). Neither may have steps in flight. Returns:

    * ``captured_gpu_ms``, ``captured_push_gpu_ms``, ``clock_cost_ratio``: GPU ms (Vulkan
      timestamps around the update dispatches, as the step table's GPU ms) of a synchronous
      captured step, which reads its count and lr from the device's clock and advances it, and
      of ``plain``'s push-constant step, timed alternately in one loop (so both run at the same
      GPU clock), medians; the ratio is captured over push-constant (> 1: the clock costs).
    * ``replay_steps``, ``replay_ms``: one recording of ``replay_steps`` (``--steps-per-batch``)
      captured steps, recorded once, then evaluated repeatedly (each evaluation submit and
      wait): wall ms per step, median over evaluations. Nothing is recorded in the clock.
    * ``replay_over_captured_gpu``: ``replay_ms`` over ``captured_gpu_ms``, the step's own GPU
      time (1.0: replay adds nothing to the step's GPU time; < 1 can happen where the GPU's
      clock rises under the sustained load of a replay).
    * ``replay_single_ms``: one captured step recorded once, its sequence evaluated repeatedly
      (the Kompute idiom: record once, evaluate in a loop), wall ms per evaluation.
    * ``captured_steps_run``, ``captured_steps_counted``: the steps ``captured`` ran here (every
      evaluation of a recording of N steps is N steps) and the device's count after them.
    """
    plain_profile = plain.profile
    plain.profile = captured.profile = True
    run = 0
    try:
        for _ in range(args.warmup):
            plain.step()
            captured.step()
        run += args.warmup
        push_gpu: list[float] = []
        captured_gpu: list[float] = []
        for _ in range(args.repeats):
            plain.step()
            captured.step()
            assert plain.last_gpu_seconds is not None and captured.last_gpu_seconds is not None
            push_gpu.append(plain.last_gpu_seconds)
            captured_gpu.append(captured.last_gpu_seconds)
        run += args.repeats
    finally:
        plain.profile = plain_profile
        captured.profile = False
    n_steps = args.steps_per_batch
    sequence = rt.new_sequence()
    try:
        # Recorded once: every evaluation of the sequence is n_steps more steps on the clock.
        for _ in range(n_steps):
            captured.record_step(sequence)
        evaluations = max(3, args.repeats // 5)  # as many as the back-to-back figure's batches
        replay = timeit(lambda: rt.evaluate(sequence), evaluations, 1)
        run += n_steps * (evaluations + 1)
        rt.rerecord(sequence, [])
        captured.record_step(sequence)
        single = timeit(lambda: rt.evaluate(sequence), args.repeats, args.warmup)
        run += args.repeats + args.warmup
    finally:
        rt.free_sequence(sequence)
    # One more synchronous step: its number is the device's count before it, plus one.
    counted = captured.step().step
    run += 1
    captured_ms, push_ms = median_ms(captured_gpu), median_ms(push_gpu)
    replay_ms = median_ms(replay) / n_steps
    return {
        "captured_gpu_ms": captured_ms,
        "captured_push_gpu_ms": push_ms,
        "clock_cost_ratio": captured_ms / push_ms,
        "replay_steps": n_steps,
        "replay_ms": replay_ms,
        "replay_over_captured_gpu": replay_ms / captured_ms,
        "replay_single_ms": median_ms(single),
        "captured_steps_run": run,
        "captured_steps_counted": counted,
    }


__all__ = [
    "ALIGN",
    "ClockWarmer",
    "Result",
    "bench_numpy",
    "bench_torch_cpu",
    "bench_torch_cuda",
    "bench_vk",
    "captured_figures",
    "copy_seconds",
    "cuda_copy_bandwidth",
    "overlapped_steps",
    "raw_vulkan_floor",
    "submit_wait_floor",
    "vulkan_copy_bandwidth",
]
