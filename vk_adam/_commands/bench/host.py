"""``vk-adam bench --cases host``: AdamW on NumPy params, one fp32 tensor of 2^20, 2^24 and 2^26
elements (``--host-sizes``; a software device leaves 2^26 out), beside torch CPU AdamW and torch
CUDA fused AdamW with copies in and out; ``host.json`` and ``host.md``. docs/usage.md ("NumPy
params against torch") says what each row times. In short: the median wall time of ``--repeats``
steps after ``--warmup``, each step timed alone, of ``opt.step([g])`` (vk-adam), ``opt.step()``
(torch CPU, over ``from_numpy`` tensors; foreach and fused tried, the faster kept), and the grad's
copy in, ``opt.step()``, the param's copy out and a synchronize (torch CUDA). Gradients are
*reused* (the same arrays every step, rewritten in place before each) or *fresh* (a new array
each step, made while the previous one lives); making them is never timed. Yardsticks: one copy
of the gradient's bytes to the GPU (pinned for reused, pageable for fresh) and ``np.copyto``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..._runtime import DeviceInfo
from .peers import cuda_available, torch_available

SIZES = (2**20, 2**24, 2**26)
SOFTWARE_SIZES = (2**20, 2**24)
ARRAYS = ("reused", "fresh")
LABELS = {
    "vk-adam": "vk-adam, NumPy params",
    "torch-cpu": "torch CPU AdamW",
    "torch-cuda": "torch CUDA fused AdamW, copying grads in and params out",
}
#: What runs at each size, in order: (backend, gradient arrays).
JOBS = [(b, a) for b in LABELS for a in ARRAYS] + [("yardsticks", "")]
Row = dict[str, Any]


def add_host_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host-sizes",
        help="host: fp32 elements of the one tensor, comma-separated, 2^k allowed (default "
        "2^20,2^24,2^26; 2^20,2^24 on a software device)",
    )


def parse_sizes(spec: str) -> tuple[int, ...]:
    parts = [p.strip().partition("^") for p in spec.replace("**", "^").split(",") if p.strip()]
    sizes = tuple(int(base) ** int(exp) if exp else int(base) for base, _, exp in parts)
    if not sizes or min(sizes) < 1:
        raise ValueError(f"--host-sizes: positive element counts, e.g. 2^20,2^24 (got {spec!r})")
    return sizes


def size_label(n: int) -> str:
    return f"2^{n.bit_length() - 1}" if n & (n - 1) == 0 else f"{n:,}"


class Grads:
    """A param, and the gradient of each step, made before the step's clock starts (``next``)."""

    def __init__(self, n: int, arrays: str, pinned: np.ndarray | None = None) -> None:
        self.param = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
        self.base = np.random.default_rng(1).standard_normal(n, dtype=np.float32) * np.float32(1e-2)
        self.arrays, self.addresses = arrays, list[int]()
        self.current = self.base.copy() if pinned is None else pinned
        self.current[...] = self.base

    def next(self) -> None:
        if self.arrays == "reused":
            np.negative(self.current, out=self.current)  # new values, in place
            return
        self.current = np.empty(self.base.size, np.float32)  # made while the previous one lives
        np.multiply(self.base, np.float32(1 + 1e-3 * len(self.addresses)), out=self.current)
        self.addresses.append(self.current.ctypes.data)


def samples(step: Callable[[], Any], warmup: int, repeats: int, ready: Callable[[], Any]) -> list[float]:
    """Seconds of ``repeats`` calls of ``step`` after ``warmup``, each after ``ready`` (untimed)."""
    out = []
    for i in range(warmup + repeats):
        ready()
        t0 = time.perf_counter()
        step()
        if i >= warmup:
            out.append(time.perf_counter() - t0)
    return out


def _row(times: list[float], grads: Grads, before: np.ndarray, after: np.ndarray) -> Row:
    row = {"ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3, "timed_steps": len(times)}
    row["param_max_change"] = float(np.max(np.abs(after - before)))  # > 0: the steps ran
    if grads.arrays == "fresh":
        row["distinct_grad_addresses"] = len(set(grads.addresses[-len(times) :]))
    return row


def bench_vk(n: int, arrays: str, device: int, warmup: int, repeats: int) -> Row:
    import vk_adam

    grads = Grads(n, arrays)
    p, before = grads.param, grads.param.copy()
    with vk_adam.AdamW([p], lr=1e-3, device=device) as opt:
        row = _row(samples(lambda: opt.step([grads.current]), warmup, repeats, grads.next), grads, before, p)
        return row | {"optimizer_steps": int(opt.state_dict()["state"][0]["step"])}


def bench_torch_cpu(n: int, arrays: str, impl: str, warmup: int, repeats: int) -> Row:
    import torch

    grads = Grads(n, arrays)
    p, before = grads.param, grads.param.copy()
    tp = torch.from_numpy(p).requires_grad_()  # the NumPy array's memory
    opt = torch.optim.AdamW([tp], lr=1e-3, foreach=impl == "foreach", fused=impl == "fused")

    def ready() -> None:  # the step's gradient: a view of the NumPy array (no copy)
        grads.next()
        tp.grad = torch.from_numpy(grads.current)

    return _row(samples(opt.step, warmup, repeats, ready), grads, before, p) | {"impl": impl}


def bench_torch_cuda(n: int, arrays: str, warmup: int, repeats: int) -> Row:
    import torch

    host_grad = [torch.empty(n, pin_memory=True)]
    grads = Grads(n, arrays, host_grad[0].numpy() if arrays == "reused" else None)
    p, before = grads.param, grads.param.copy()
    pc = torch.from_numpy(p).cuda().requires_grad_()
    pc.grad = torch.empty_like(pc)
    opt = torch.optim.AdamW([pc], lr=1e-3, fused=True)
    # reused: pinned host grad and param, written in place; fresh: NumPy's pageable memory
    host_param = torch.empty(n, pin_memory=True) if arrays == "reused" else torch.from_numpy(p)

    def ready() -> None:
        grads.next()
        if arrays == "fresh":
            host_grad[0] = torch.from_numpy(grads.current)  # a view, no copy
        torch.cuda.synchronize()

    @torch.no_grad()  # as a training loop copies its params out
    def step() -> None:
        pc.grad.copy_(host_grad[0], non_blocking=True)  # type: ignore[union-attr]
        opt.step()
        host_param.copy_(pc)
        torch.cuda.synchronize()

    return _row(samples(step, warmup, repeats, ready), grads, before, host_param.numpy())


def yardsticks(n: int, cuda: bool, warmup: int, repeats: int) -> dict[str, float]:
    """ms of np.copyto of the gradient, and of one copy of its bytes to the GPU (pinned, pageable)."""
    g = Grads(n, "reused").current
    dst = np.empty_like(g)
    fns: dict[str, Callable[[], Any]] = {"copyto_ms": lambda: np.copyto(dst, g)}
    if cuda:
        import torch

        dev = torch.empty(n, device="cuda")
        for key, src in (("pinned", torch.empty(n, pin_memory=True)), ("pageable", torch.from_numpy(g))):
            fns[f"{key}_h2d_ms"] = partial(dev.copy_, src)  # blocking: returns when the copy is done
    ms = {k: statistics.median(samples(fn, warmup, repeats, lambda: None)) for k, fn in fns.items()}
    return {k: v * 1e3 for k, v in ms.items()}


def _measure(job: tuple[int, str, str], args: argparse.Namespace, device: int, cpu: list[str]) -> Row:
    n, backend, arrays = job
    warmup, repeats = args.warmup, args.repeats
    if backend == "vk-adam":
        return bench_vk(n, arrays, device, warmup, repeats)
    if backend == "yardsticks":
        return yardsticks(n, cuda_available(), warmup, repeats)
    if not torch_available():
        return {"skipped": "torch is not installed"}
    if backend == "torch-cuda":
        if not cuda_available():
            return {"skipped": "no CUDA (torch.cuda.is_available() is False)"}
        return bench_torch_cuda(n, arrays, warmup, repeats)
    if arrays == "fresh":  # the implementation that was faster on reused arrays
        return bench_torch_cpu(n, arrays, cpu[0], warmup, repeats)
    tried = {}
    for impl in ("foreach", "fused"):
        try:
            tried[impl] = bench_torch_cpu(n, arrays, impl, warmup, repeats)
        except (RuntimeError, ValueError) as exc:  # a CPU build without fused AdamW
            tried[impl] = {"note": f"{type(exc).__name__}: {exc}"}
    cpu[:] = [min(tried, key=lambda i: tried[i].get("ms", float("inf")))]
    return tried[cpu[0]] | {"impls_ms": {i: tried[i].get("ms") for i in tried}}


def run_host_bench(args: argparse.Namespace, info: DeviceInfo) -> str:
    from tqdm import tqdm

    sizes = parse_sizes(args.host_sizes) if args.host_sizes else SOFTWARE_SIZES if info.is_software else SIZES
    why = "a software Vulkan device, where one step takes seconds (--host-sizes runs it)"
    skipped = {} if args.host_sizes else {size_label(n): why for n in SIZES if n not in sizes}
    (out := Path(args.out)).mkdir(parents=True, exist_ok=True)
    report: Row = {"meta": _meta(args, info, sizes) | {"skipped_sizes": skipped}, "rows": []}
    report["yardsticks"], jobs = [], [(n, b, a) for n in sizes for b, a in JOBS]
    # cpu: the torch CPU implementation of the fresh rows; vk_ms: vk-adam's, for the speed-ups
    started, cpu, vk_ms = time.perf_counter(), ["foreach"], {}
    with tqdm(jobs, desc="host", unit="run", dynamic_ncols=True, disable=args.quiet) as bar:
        for n, backend, arrays in bar:
            bar.set_postfix_str(f"{size_label(n)} {backend} {arrays}".strip())
            try:
                result = _measure((n, backend, arrays), args, info.index, cpu)
            except Exception as exc:  # one failed run must not lose the others
                result = {"note": f"failed: {type(exc).__name__}: {exc}"}
            if backend == "yardsticks":
                report["yardsticks"].append({"elements": n} | result)
            else:
                if backend == "vk-adam":
                    vk_ms[(n, arrays)] = result.get("ms")
                elif "ms" in result and vk_ms.get((n, arrays)):  # above 1: vk-adam is faster
                    result["vk_adam_speedup"] = result["ms"] / vk_ms[(n, arrays)]
                report["rows"].append({"elements": n, "arrays": arrays, "backend": backend} | result)
            if not args.quiet:  # a line per row, as it ends
                what = f"{size_label(n)} {LABELS.get(backend, backend)}" + f", {arrays} arrays" * bool(arrays)
                bar.write(f"host {what}: {_cell(result, long=True)}")
            (out / "host.json").write_text(json.dumps(report | {"partial": True}, indent=2))
    report["meta"]["seconds"] = time.perf_counter() - started
    (out / "host.json").write_text(json.dumps(report, indent=2))
    table = format_host_table(report)
    (out / "host.md").write_text(table + "\n")
    return table + f"\n\nwrote {out / 'host.json'}, {out / 'host.md'}"


def _meta(args: argparse.Namespace, info: DeviceInfo, sizes: tuple[int, ...]) -> Row:
    import vk_adam

    meta: Row = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    meta |= {"device": info.name, "driver": info.driver, "software_device": info.is_software}
    meta |= {"host": platform.processor() or platform.machine(), "cpu_count": os.cpu_count()}
    meta |= {"vk_adam": vk_adam.__version__, "numpy": np.__version__, "sizes": list(sizes)}
    meta |= {"warmup": args.warmup, "repeats": args.repeats}
    spec = f"{','.join(size_label(n) for n in sizes)} --repeats {args.repeats} --warmup {args.warmup}"
    meta["command"] = f"vk-adam bench --cases host --host-sizes {spec}"
    if torch_available():
        import torch

        meta |= {"torch": torch.__version__, "torch_threads": torch.get_num_threads()}
        meta |= {"cuda_device": torch.cuda.get_device_name()} if cuda_available() else {}
    return meta


def _ms(x: float) -> str:
    return f"{x:.3f}" if x < 10 else f"{x:.2f}" if x < 100 else f"{x:.1f}"


def _cell(row: Row | None, long: bool = False) -> str:
    """A row's figure for the table, or with ``long`` for its progress line."""
    if row is not None and "ms" in row:
        return _ms(row["ms"]) + " ms" * long + (f" ({row['impl']})" if "impl" in row else "")
    if long:  # what failed or was skipped, in full; the yardsticks' times
        times = ", ".join(f"{k[:-3]} {_ms(v)} ms" for k, v in (row or {}).items() if k.endswith("_ms"))
        return times or str((row or {}).get("skipped") or (row or {}).get("note"))
    why = (row or {}).get("skipped", "")
    return "" if row is None else "no CUDA" if "no CUDA" in why else "skipped" if why else "failed"


def format_host_table(report: dict[str, Any]) -> str:
    meta, rows, ticks = report["meta"], report["rows"], {y["elements"]: y for y in report["yardsticks"]}
    find = {(r["elements"], r["arrays"], r["backend"]): r for r in rows}
    lines = [
        f"AdamW on NumPy params (`vk-adam bench --cases host`), one fp32 tensor, lr 1e-3: median ms of "
        f"{meta['repeats']} steps after {meta['warmup']}, each timed alone. Vulkan: {meta['device']}; "
        f"torch {meta.get('torch', 'not installed')}; CUDA: {meta.get('cuda_device', 'none')}.",
        "",
        f"| fp32 elements | grad arrays | {' | '.join(LABELS.values())} | one copy of the grads' bytes "
        "to the GPU | np.copyto of the grads |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    speed = ["", "vk-adam's speed-up, torch ms / vk-adam ms (above 1: vk-adam is faster):", ""]
    speed += ["| fp32 elements | grad arrays | vs torch CPU AdamW | vs torch CUDA fused + copies |"]
    speed += ["|---|---|---:|---:|"]
    for n in meta["sizes"]:
        tick, label = ticks.get(n, {}), f"{size_label(n)} ({n * 4 / 2**20:,.3g} MiB)"
        for arrays, key in zip(ARRAYS, ("pinned", "pageable"), strict=True):
            cells = " | ".join(_cell(find.get((n, arrays, b))) for b in LABELS)
            copy = f"{_ms(tick[key + '_h2d_ms'])} ({key})" if f"{key}_h2d_ms" in tick else "no CUDA"
            copyto = _ms(tick["copyto_ms"]) if "copyto_ms" in tick else ""
            lines.append(f"| {label} | {arrays} | {cells} | {copy} | {copyto} |")
            ratios = [find.get((n, arrays, b), {}).get("vk_adam_speedup") for b in list(LABELS)[1:]]
            speed.append(f"| {label} | {arrays} | {' | '.join(f'{r:.2f}x' if r else '' for r in ratios)} |")
    notes = [f"{LABELS[r['backend']]}: {r.get('skipped') or r.get('note')}" for r in rows if "ms" not in r]
    notes += [f"yardsticks, {size_label(n)}: {y['note']}" for n, y in ticks.items() if "note" in y]
    notes += [f"{label} not run: {why}" for label, why in meta["skipped_sizes"].items()]
    return "\n".join(lines + speed + [""] * bool(notes) + [f"* {note}" for note in dict.fromkeys(notes)])
