"""``run_bench``: choose the cases and backends, measure each, and write the report as it grows
(a partial ``bench.json`` after every run, so an interrupted bench keeps what it measured)."""

from __future__ import annotations

import argparse
import json
import platform
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..._runtime import Runtime, select_device
from .cases import BYTES_PER_ELEMENT, Case, select_cases
from .formats import run_formats_bench
from .measure import (
    Result,
    bench_numpy,
    bench_torch_cpu,
    bench_torch_cuda,
    bench_vk,
    cuda_copy_bandwidth,
    raw_vulkan_floor,
    submit_wait_floor,
    vulkan_copy_bandwidth,
)
from .peers import cuda_available, torch_available
from .report import build_report, render


def run_bench(args: argparse.Namespace) -> int:
    if args.render:
        report = json.loads(Path(args.render).read_text())
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        print(render(report, out))
        return 0
    info = select_device(args.device)
    if args.steps_per_batch is None:
        args.steps_per_batch = 10 if info.is_software else 100
    wanted = [c.strip() for c in args.cases.split(",") if c.strip()]
    if "train" in wanted:  # whole training steps: a table of its own (train.md, train.json)
        from .train import run_train_bench

        print(run_train_bench(info.index, info.is_software, args.steps_per_batch, Path(args.out)))
        wanted.remove("train")
        if not wanted:
            return 0
        args.cases = ",".join(wanted)
    if "formats" in wanted:  # storage formats: a table of its own (formats.md, formats.json)
        print(_run_formats(args, info.index, info.is_software))
        wanted.remove("formats")
        if not wanted:
            return 0
        args.cases = ",".join(wanted)
    if "zero" in wanted:  # ZeRO-1 on N ranks: a table of its own (zero.md, zero.json)
        from .zero import run_zero_bench

        print(run_zero_bench(args, info))
        wanted.remove("zero")
        if not wanted:
            return 0
        args.cases = ",".join(wanted)
    cases = select_cases(args.cases, info.is_software)
    rt = Runtime(device=info.index)
    has_torch, has_cuda = torch_available(), cuda_available()
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
        if case.group == "lora" and case.elements <= 2**24:
            # global-norm clipping (max_norm 1.0, as Hugging Face's Trainer) before the update
            jobs.append((case, "vk-adam clip"))
            if has_cuda:
                jobs.append((case, "torch-cuda-fused clip"))
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
                elif backend == "vk-adam clip":
                    r = bench_vk(case, rt, False, args, clip=1.0)
                elif backend == "torch-cuda-fused clip":
                    r = bench_torch_cuda(case, args, clip=1.0)
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


def _run_formats(args: argparse.Namespace, device_index: int, software: bool) -> str:
    """The storage-format table, with the device's copy bandwidth (a Vulkan copy shader, and
    torch's copy when CUDA runs here: the better one) as the yardstick."""
    rt = Runtime(device=device_index)
    try:
        copy = vulkan_copy_bandwidth(rt, 2**22 if software else 2**26, 10) / 1e9
    finally:
        rt.close()
    if not software and cuda_available():
        copy = max(copy, cuda_copy_bandwidth(2**28, 20) / 1e9)
    return run_formats_bench(
        device_index, software, copy, args.repeats, args.warmup, Path(args.out), quiet=args.quiet
    )


def _argv(args: argparse.Namespace) -> list[str]:
    parts = []
    for key in ("cases", "device", "repeats", "warmup", "cpu_max_elements", "steps_per_batch"):
        value = getattr(args, key, None)
        if value is not None:
            parts.append(f"--{key.replace('_', '-')} {value}")
    return parts
