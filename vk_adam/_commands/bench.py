"""``vk-adam bench``: one AdamW step, side by side with its peers, in one process and one run.

Backends per case:
  * ``vk-adam``            the flat buffer (one dispatch), GPU-resident params and grads
  * ``vk-adam per-tensor`` LoRA cases: one buffer set and dispatch per tensor (the layout of
                           the kernel vk-adam replaces), for the flat layout's gain
  * ``numpy-f64``          the float64 NumPy reference (CPU)
  * ``torch-cpu-foreach`` / ``torch-cpu-fused``   torch.optim.AdamW on the CPU
  * ``torch-cuda-fused``   torch.optim.AdamW(fused=True) on CUDA, when a CUDA device exists

Measured: GPU time (Vulkan timestamps; CUDA events), wall time of a synchronous step (host
waits), time per step when steps are issued back to back without host waits, and for vk-adam
the host time outside the driver's submit-and-wait. Effective bandwidth = bytes the step must
move / GPU time, against the same device's copy bandwidth measured in the same run.
Every figure is a median over ``--repeats`` runs after ``--warmup`` runs.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from .._runtime import Runtime, select_device

ALIGN = 64
#: AdamW without AMSGrad, gradient not zeroed: read p, g, m, v; write p, m, v (as torch's).
BYTES_PER_ELEMENT = 28


@dataclass(frozen=True)
class Case:
    name: str
    group: str  # "single", "lora", "tiny"
    sizes: tuple[int, ...]  # element count of each tensor
    description: str

    @property
    def elements(self) -> int:
        return sum(self.sizes)


def _lora_sizes(layers: int, rank: int, modules: Sequence[tuple[int, int]]) -> tuple[int, ...]:
    sizes = []
    for _ in range(layers):
        for fin, fout in modules:
            sizes += [rank * fin, fout * rank]  # A [r, in], B [out, r]
    return tuple(sizes)


def all_cases() -> list[Case]:
    cases = [
        Case(f"single-2^{k}", "single", (2**k,), f"one tensor of 2^{k} elements")
        for k in (20, 22, 24, 26, 28)
    ]
    h = 4096  # Llama-2-7B
    cases.append(
        Case("lora-qv-r8-32l", "lora", _lora_sizes(32, 8, [(h, h)] * 2), "LoRA q,v r8, 32 layers (7B dims)")
    )
    cases.append(
        Case(
            "lora-qkvo-r16-32l", "lora", _lora_sizes(32, 16, [(h, h)] * 4), "LoRA q,k,v,o r16, 32 layers (7B)"
        )
    )
    big, kv, mlp = 8192, 1024, 28672  # Llama-2-70B: GQA k/v, SwiGLU MLP
    modules = [(big, big), (big, kv), (big, kv), (big, big), (big, mlp), (big, mlp), (mlp, big)]
    cases.append(
        Case("lora-all-r64-80l", "lora", _lora_sizes(80, 64, modules), "LoRA all linear r64, 80 layers (70B)")
    )
    cases.append(Case("tiny-1k", "tiny", (1024,), "one tensor of 1,024 elements (host overhead)"))
    return cases


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    names = ", ".join(c.name for c in all_cases())
    parser.add_argument(
        "--cases",
        default="auto",
        help="comma-separated case names or groups (single, lora, tiny, all); 'auto' = all on a "
        f"GPU, the smaller ones on a software device. Cases: {names}",
    )
    parser.add_argument("--device", help="Vulkan device index or name substring")
    parser.add_argument("--repeats", type=int, default=20, help="timed runs per figure (default %(default)s)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs first (default %(default)s)")
    parser.add_argument(
        "--cpu-max-elements",
        type=int,
        default=2**24,
        help="skip CPU peers (NumPy, torch CPU) above this many elements (default %(default)s)",
    )
    parser.add_argument(
        "--steps-per-batch",
        type=int,
        default=None,
        help="steps issued back to back per measurement (default: 100 on a GPU, 10 on a CPU device)",
    )
    parser.add_argument("--out", default="vk-adam-bench", help="output folder (default %(default)s)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--render", metavar="BENCH_JSON", help="only re-render a saved bench.json into --out")


def select_cases(spec: str, software: bool) -> list[Case]:
    cases = all_cases()
    if spec == "auto":
        if software:  # lavapipe: ~25 ms per million elements; keep the run to a minute or two
            return [c for c in cases if c.elements <= 2**24 and c.name != "single-2^24"]
        return cases
    wanted = {w.strip() for w in spec.split(",") if w.strip()}
    if "all" in wanted:
        return cases
    chosen = [c for c in cases if c.name in wanted or c.group in wanted]
    unknown = wanted - {c.name for c in cases} - {c.group for c in cases}
    if unknown or not chosen:
        raise ValueError(f"unknown bench case(s) {sorted(unknown)}; known: {[c.name for c in cases]}")
    return chosen


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


def vulkan_copy_bandwidth(rt: Runtime, elements: int, repeats: int) -> float:
    """Bytes/s of a compute-shader copy (glsl/copy.comp: read + write, 16 B per load) timed by
    Vulkan timestamps: the bandwidth yardstick for the update shader on the same device."""
    from .._rules.spirv import load_spirv

    a = rt.buffer(np.ones(elements, np.float32))
    b = rt.buffer(np.zeros(elements, np.float32))
    n_vec4 = elements // 4
    push = np.array([n_vec4], np.uint32).view(np.float32)
    algo = rt.pipeline([a, b], load_spirv("copy"), n_vec4, (), 1)
    try:
        rt.run([rt.upload_op([a, b])])
        samples = []
        for i in range(repeats + 3):
            ticks = rt.run([rt.dispatch_op(algo, push)], timestamps=True)
            assert ticks is not None
            if i >= 3:
                samples.append((ticks[1] - ticks[0]) * rt.timestamp_period * 1e-9)
        return float(2 * 4 * elements / statistics.median(samples))
    finally:
        rt.destroy_pipeline(algo)
        rt.free_buffer(a)
        rt.free_buffer(b)


def submit_wait_floor(rt: Runtime, repeats: int) -> dict[str, float]:
    """The bare cost of one tiny dispatch through the runtime: run (record + submit + wait),
    and submit then wait separately."""
    from .._rules.spirv import load_spirv

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
    exe = Path(__file__).resolve().parents[2] / "benchmarks" / "vulkan_floor" / "vulkan_floor"
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


def bench_vk(case: Case, rt: Runtime, per_tensor: bool, args: argparse.Namespace) -> Result:
    from .._optim.optimizer import Optimizer

    rng = np.random.default_rng(0)
    if per_tensor:
        params = [rt.buffer(rng.standard_normal(n, dtype=np.float32)) for n in case.sizes]
    else:
        total = sum(-(-n // ALIGN) * ALIGN for n in case.sizes)
        params = [rt.buffer(rng.standard_normal(total, dtype=np.float32))]
    # The application's device buffers: made on its manager (the runtime's, here).
    rt.run([rt.upload_op(params)])
    opt = Optimizer(params, "adamw", manager=rt.manager, zero_grad=False, profile=True, lr=1e-4)
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

        wall = _timeit(timed, args.repeats, 0)
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
            "vk-adam per-tensor" if per_tensor else "vk-adam",
            gpu_ms=_median_ms(gpu),
            sync_wall_ms=_median_ms(wall),
            pipelined_ms=_median_ms(pipe) / n_steps,
            host_ms=_median_ms(host),
            dispatches=opt.dispatches_per_step(),
            extra={
                "async_step_ms": _median_ms(asynchronous) / n_steps,
                "async_issue_ms": _median_ms(issue),
            },
        )
    finally:
        opt.close()
        for t in params:
            rt.free_buffer(t)


# -- CPU and CUDA peers -------------------------------------------------------------------------


def bench_numpy(case: Case, args: argparse.Namespace) -> Result:
    from .._rules.builtin import ADAMW

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


def bench_torch_cuda(case: Case, args: argparse.Namespace) -> Result:
    import torch

    params = _torch_params(case, "cuda")
    opt = torch.optim.AdamW(params, lr=1e-4, fused=True)
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
        "torch-cuda-fused",
        gpu_ms=gpu_ms,
        sync_wall_ms=_median_ms(wall),
        pipelined_ms=_median_ms(pipe),
    )


# -- the run ----------------------------------------------------------------------------------


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def run_bench(args: argparse.Namespace) -> int:
    if args.render:
        report = json.loads(Path(args.render).read_text())
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        print(render(report, out))
        return 0
    info = select_device(args.device)
    cases = select_cases(args.cases, info.is_software)
    if args.steps_per_batch is None:
        args.steps_per_batch = 10 if info.is_software else 100
    rt = Runtime(device=info.index)
    has_torch, has_cuda = _torch_available(), _cuda_available()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    jobs: list[tuple[Case, str]] = []
    for case in cases:
        jobs.append((case, "vk-adam"))
        if case.group == "lora" and len(case.sizes) <= 256:
            # one pipeline per tensor: creating 1,000+ pipelines takes minutes on some drivers
            jobs.append((case, "vk-adam per-tensor"))
        if case.elements <= args.cpu_max_elements:
            jobs.append((case, "numpy-f64"))
            if has_torch:
                jobs += [(case, "torch-cpu-foreach"), (case, "torch-cpu-fused")]
        if has_cuda:
            jobs.append((case, "torch-cuda-fused"))
    progress = None
    if not args.quiet:
        from tqdm import tqdm

        progress = tqdm(total=len(jobs) + 2, desc="bench", unit="run", dynamic_ncols=True)
    started = time.perf_counter()
    meta: dict[str, Any] = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "device": info.name,
        "driver": info.driver,
        "host": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "command": "vk-adam bench " + " ".join(_argv(args)),
        "bytes_per_element": BYTES_PER_ELEMENT,
    }
    copy_elements = 2**26 if not info.is_software else 2**22
    try:
        meta["vulkan_copy_GBps"] = vulkan_copy_bandwidth(rt, copy_elements, max(5, args.repeats // 2)) / 1e9
        meta.update(submit_wait_floor(rt, args.repeats))
        meta["kp"] = rt.features.describe()
        floor = raw_vulkan_floor(info.index)
        if floor is not None:
            meta["raw_vulkan_floor"] = floor
        if has_cuda:
            meta["cuda_copy_GBps"] = cuda_copy_bandwidth(2**28, 20) / 1e9
            import torch

            meta["cuda_device"] = torch.cuda.get_device_name()
        if has_torch:
            import torch

            meta["torch"] = torch.__version__
        if progress:
            progress.update(2)
        results: list[Result] = []
        for case, backend in jobs:
            if progress:
                progress.set_postfix_str(f"{case.name} {backend}")
            try:
                if backend == "vk-adam":
                    r = bench_vk(case, rt, False, args)
                elif backend == "vk-adam per-tensor":
                    r = bench_vk(case, rt, True, args)
                elif backend == "numpy-f64":
                    r = bench_numpy(case, args)
                elif backend.startswith("torch-cpu-"):
                    r = bench_torch_cpu(case, backend.removeprefix("torch-cpu-"), args)
                else:
                    r = bench_torch_cuda(case, args)
            except Exception as exc:  # one failed run must not lose the others
                r = Result(case.name, backend, note=f"failed: {type(exc).__name__}: {exc}")
            results.append(r)
            partial = build_report(cases, results, {**meta, "partial": True})
            (out / "bench.json").write_text(json.dumps(partial, indent=2))
            if progress:
                progress.update(1)
    finally:
        if progress:
            progress.close()
        rt.close()
    meta["seconds"] = time.perf_counter() - started
    table = render(build_report(cases, results, meta), out)
    print(table)
    print(f"\nwrote {out / 'bench.json'}, {out / 'bench.md'}, {out / 'bench.png'}")
    return 0


def _argv(args: argparse.Namespace) -> list[str]:
    parts = []
    for key in ("cases", "device", "repeats", "warmup", "cpu_max_elements", "steps_per_batch"):
        value = getattr(args, key, None)
        if value is not None:
            parts.append(f"--{key.replace('_', '-')} {value}")
    return parts


def copy_yardstick(meta: dict[str, Any]) -> float | None:
    """The device's copy bandwidth: the best copy measured on it in this run (a Vulkan copy
    shader, and torch's device copy when CUDA runs on the same GPU)."""
    measured = [meta.get("vulkan_copy_GBps")]
    if meta.get("cuda_device") and meta["cuda_device"] in meta.get("device", ""):
        measured.append(meta.get("cuda_copy_GBps"))
    values = [m for m in measured if m]
    return max(values) if values else None


def render(report: dict[str, Any], out: Path) -> str:
    """Write bench.json, bench.md and bench.png for a report; return the table."""
    for entry in report["cases"].values():
        for row in entry["results"].values():
            copy = copy_yardstick(report["meta"])
            if row.get("effective_GBps") and copy:
                row["fraction_of_copy_bandwidth"] = row["effective_GBps"] / copy
    report["meta"]["copy_yardstick_GBps"] = copy_yardstick(report["meta"])
    (out / "bench.json").write_text(json.dumps(report, indent=2))
    table = format_table(report)
    (out / "bench.md").write_text(table + "\n")
    plot_report(report, out / "bench.png")
    return table


def build_report(cases: list[Case], results: list[Result], meta: dict[str, Any]) -> dict[str, Any]:
    by_case: dict[str, dict[str, Any]] = {}
    for case in cases:
        rows = {r.backend: r for r in results if r.case == case.name}
        ours = rows.get("vk-adam")
        entry: dict[str, Any] = {
            "description": case.description,
            "tensors": len(case.sizes),
            "elements": case.elements,
            "results": {},
        }
        for backend, r in rows.items():
            row: dict[str, Any] = {
                **r.extra,
                "gpu_ms": r.gpu_ms,
                "sync_wall_ms": r.sync_wall_ms,
                "pipelined_ms": r.pipelined_ms,
                "host_ms": r.host_ms,
                "dispatches": r.dispatches,
                "note": r.note,
            }
            if r.gpu_ms:
                bw = BYTES_PER_ELEMENT * case.elements / (r.gpu_ms * 1e-3) / 1e9
                row["effective_GBps"] = bw
                copy = copy_yardstick(meta)
                if copy:
                    row["fraction_of_copy_bandwidth"] = bw / copy
            if ours is not None and backend != "vk-adam":
                ratios = {}
                for metric in ("gpu_ms", "sync_wall_ms", "pipelined_ms"):
                    a, b = getattr(ours, metric), getattr(r, metric)
                    if a and b:
                        ratios[metric] = b / a  # > 1: vk-adam is faster
                row["peer_over_vk_adam"] = ratios
            entry["results"][backend] = row
        by_case[case.name] = entry
    return {"meta": meta, "cases": by_case}


def _fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "-"
    if x >= 100:
        return f"{x:.0f}"
    return f"{x:.{digits}g}"


def format_table(report: dict[str, Any]) -> str:
    meta = report["meta"]
    lines = [
        f"# vk-adam bench: {meta['device']} ({meta['driver']}), {meta['date']}",
        "",
        f"Copy bandwidth: Vulkan copy shader {meta['vulkan_copy_GBps']:.0f} GB/s"
        + (f", CUDA device copy {meta['cuda_copy_GBps']:.0f} GB/s" if "cuda_copy_GBps" in meta else "")
        + (
            f" (% copy BW uses {meta['copy_yardstick_GBps']:.0f} GB/s)"
            if meta.get("copy_yardstick_GBps")
            else ""
        )
        + f"; bare kp submit-and-wait {meta['eval_prerecorded_ms'] * 1e3:.0f} us"
        + f" (eval_async {meta['eval_async_submit_ms'] * 1e3:.0f} us"
        + f" + eval_await {meta['eval_await_ms'] * 1e3:.0f} us)",
        "",
        "GPU ms: Vulkan timestamps / CUDA events. sync step: wall time, host waits. back-to-back: wall "
        "time per step of steps issued without host waits (vk-adam: recorded into one sequence with "
        "`record_step`; torch: launched in a loop), then one wait. host us: vk-adam's own time per "
        "synchronous step outside the driver's submit-and-wait. peer/vk-adam > 1: vk-adam is faster.",
        "",
        "| case | backend | dispatches | GPU ms | GB/s | % copy BW | sync step ms | back-to-back ms/step | "
        "step(wait=False) ms | host us | peer/vk-adam (GPU, sync, b2b) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, entry in report["cases"].items():
        for backend, row in entry["results"].items():
            ratios = row.get("peer_over_vk_adam", {})
            ratio_text = ", ".join(
                f"{ratios[k]:.2f}x" if k in ratios else "-"
                for k in ("gpu_ms", "sync_wall_ms", "pipelined_ms")
            )
            frac = row.get("fraction_of_copy_bandwidth")
            host_us = None if row["host_ms"] is None else row["host_ms"] * 1e3
            lines.append(
                f"| {name} ({entry['tensors']} t, {entry['elements'] / 1e6:.1f}M) | {backend} | "
                f"{row['dispatches'] or '-'} | {_fmt(row['gpu_ms'])} | {_fmt(row.get('effective_GBps'))} | "
                f"{'-' if frac is None else f'{100 * frac:.1f}%'} | {_fmt(row['sync_wall_ms'])} | "
                f"{_fmt(row['pipelined_ms'])} | {_fmt(row.get('async_step_ms'))} | {_fmt(host_us)} | "
                f"{ratio_text if backend != 'vk-adam' else ''}{(' ' + row['note']) if row['note'] else ''} |"
            )
    return "\n".join(lines)


def plot_report(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = list(report["cases"])
    backends: list[str] = []
    for entry in report["cases"].values():
        for b in entry["results"]:
            if b not in backends:
                backends.append(b)
    fig, axes = plt.subplots(1, 2, figsize=(15, 6), sharey=True)
    for ax, metric, title in (
        (axes[0], "sync_wall_ms", "synchronous step (host waits), ms"),
        (axes[1], "pipelined_ms", "back-to-back steps (no host wait between them), ms per step"),
    ):
        width = 0.8 / max(1, len(backends))
        for i, backend in enumerate(backends):
            values = []
            for case in cases:
                row = report["cases"][case]["results"].get(backend, {})
                values.append(row.get(metric) or np.nan)
            ax.barh(np.arange(len(cases)) + i * width, values, width, label=backend)
        ax.set_xscale("log")
        ax.set_title(title, fontsize=10)
        ax.grid(True, axis="x", which="both", alpha=0.3)
    axes[0].set_yticks(np.arange(len(cases)) + 0.4 - 0.4 / max(1, len(backends)))
    axes[0].set_yticklabels(cases)
    axes[0].invert_yaxis()
    axes[1].legend(loc="lower right", fontsize=8)
    meta = report["meta"]
    fig.suptitle(f"AdamW step: vk-adam vs peers - {meta['device']} - {meta['date']} (lower is better)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
