"""``run_bench``: choose the cases and backends, measure each, and write the report as it grows
(a partial ``bench.json`` after every run, so an interrupted bench keeps what it measured)."""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..._runtime import DeviceInfo, Runtime, select_device
from .cases import BYTES_PER_ELEMENT, Case, select_cases
from .formats import is_formats_report, render_formats, run_formats_bench
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

#: The runner of each backend of the step table: (case, runtime, args) -> its result.
BACKENDS: dict[str, Callable[[Case, Runtime, argparse.Namespace], Result]] = {
    "vk-adam": lambda case, rt, args: bench_vk(case, rt, False, args),
    "vk-adam per-tensor": lambda case, rt, args: bench_vk(case, rt, True, args),
    "vk-adam clip": lambda case, rt, args: bench_vk(case, rt, False, args, clip=1.0),
    "numpy-f64": lambda case, rt, args: bench_numpy(case, args),
    "torch-cpu-foreach": lambda case, rt, args: bench_torch_cpu(case, "foreach", args),
    "torch-cpu-fused": lambda case, rt, args: bench_torch_cpu(case, "fused", args),
    "torch-cuda-fused": lambda case, rt, args: bench_torch_cuda(case, args),
    "torch-cuda-fused clip": lambda case, rt, args: bench_torch_cuda(case, args, clip=1.0),
}


def run_bench(args: argparse.Namespace) -> int:
    if args.render:
        report = json.loads(Path(args.render).read_text())
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        print(render_formats(report, out) if is_formats_report(report) else render(report, out))
        return 0
    info = select_device(args.device)
    if args.steps_per_batch is None:
        args.steps_per_batch = 10 if info.is_software else 100
    wanted = [c.strip() for c in args.cases.split(",") if c.strip()]
    for name, runner in OWN_TABLES.items():  # cases with a table of their own, first
        if name in wanted:
            print(runner(args, info))
            wanted.remove(name)
            if not wanted:
                return 0
            args.cases = ",".join(wanted)
    cases = select_cases(args.cases, info.is_software)
    jobs = _jobs(cases, args, torch_available(), cuda_available())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    progress = None
    if not args.quiet:
        from tqdm import tqdm

        progress = tqdm(total=len(jobs) + 2, desc="bench", unit="run", dynamic_ncols=True)
    started = time.perf_counter()
    rt = Runtime(device=info.index)
    results: list[Result] = []
    try:
        meta = _meta(rt, info, args)
        if progress:
            progress.update(2)
        for case, backend in jobs:
            if progress:
                progress.set_postfix_str(f"{case.name} {backend}")
            try:
                r = BACKENDS[backend](case, rt, args)
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


def _jobs(
    cases: list[Case], args: argparse.Namespace, has_torch: bool, has_cuda: bool
) -> list[tuple[Case, str]]:
    """(case, backend) of every run of the step table, in order."""
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
    return jobs


def _meta(rt: Runtime, info: DeviceInfo, args: argparse.Namespace) -> dict[str, Any]:
    """What the report says of the machine: device, driver, versions, copy bandwidths, floors."""
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
    meta["vulkan_copy_GBps"] = vulkan_copy_bandwidth(rt, copy_elements, max(5, args.repeats // 2)) / 1e9
    meta.update(submit_wait_floor(rt, args.repeats))
    meta["kp"] = rt.features.describe()
    floor = raw_vulkan_floor(info.index)
    if floor is not None:
        meta["raw_vulkan_floor"] = floor
    if cuda_available():
        meta["cuda_copy_GBps"] = cuda_copy_bandwidth(2**28, 20) / 1e9
        import torch

        meta["cuda_device"] = torch.cuda.get_device_name()
    if torch_available():
        import torch

        meta["torch"] = torch.__version__
    return meta


def _run_train(args: argparse.Namespace, info: DeviceInfo) -> str:
    """Whole training steps: a table of its own (train.md, train.json)."""
    from .train import run_train_bench

    return run_train_bench(info.index, info.is_software, args.steps_per_batch, Path(args.out))


def _run_zero(args: argparse.Namespace, info: DeviceInfo) -> str:
    """ZeRO-1 on N ranks: a table of its own (zero.md, zero.json)."""
    from .zero import run_zero_bench

    return run_zero_bench(args, info)


def _run_formats(args: argparse.Namespace, info: DeviceInfo) -> str:
    """Storage formats: a table of its own (formats.md, formats.json), with the device's copy
    bandwidth (a Vulkan copy shader, and torch's copy when CUDA runs here: the better one) as the
    yardstick."""
    device_index, software = info.index, info.is_software
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


def _run_host(args: argparse.Namespace, info: DeviceInfo) -> str:
    """AdamW on NumPy params beside torch CPU and torch CUDA with copies: a table of its own
    (host.md, host.json)."""
    from .host import run_host_bench

    return run_host_bench(args, info)


def _argv(args: argparse.Namespace) -> list[str]:
    parts = []
    for key in ("cases", "device", "repeats", "warmup", "cpu_max_elements", "steps_per_batch"):
        value = getattr(args, key, None)
        if value is not None:
            parts.append(f"--{key.replace('_', '-')} {value}")
    return parts


#: Cases with a table of their own, in the order they run, and their runners.
OWN_TABLES: dict[str, Callable[[argparse.Namespace, DeviceInfo], str]] = {
    "train": _run_train,
    "formats": _run_formats,
    "zero": _run_zero,
    "host": _run_host,
}
