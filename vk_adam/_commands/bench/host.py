"""``vk-adam bench --cases host``: AdamW on NumPy params, one fp32 tensor of 2^20, 2^24 and 2^26
elements (``--host-sizes``; a software device leaves 2^26 out), beside torch; ``host.json`` and
``host.md``. docs/usage.md ("NumPy params against torch") says what each row times; the
measurements are in ``host_peers``. Rows: vk-adam's ``opt.step([g])`` (host-memory imports, the
params held on the device with ``device_params=True``, and the staging path with
``VK_ADAM_HOST_IMPORT=0``), torch CPU AdamW (defaults, and fused), torch CUDA fused AdamW with the
grad's copy in and the param's copy out (the NumPy arrays as they are, and pinned staging
tensors), DeepSpeed's CPU Adam (``DeepSpeedCPUAdam``, ``adamw_mode=True``; skipped, with the
reason, without ``deepspeed`` or its built op). Gradients are *reused* (the same arrays every
step, rewritten in place) or *fresh* (a new array each step; the previous one dies inside the
timed region). A second table gives vk-adam's speed-up over every other row, and a line per size
sets the ``device_params=True`` row against torch's pinned CUDA row (the same semantics: params
on the GPU, the gradient in, the param copied out).
Yardsticks: one copy of the gradient's bytes to the GPU (pinned, pageable) and ``np.copyto``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..._runtime import DeviceInfo
from . import host_peers as hp
from .peers import cuda_available, torch_available

SIZES = (2**20, 2**24, 2**26)
SOFTWARE_SIZES = (2**20, 2**24)
ARRAYS = ("reused", "fresh")
#: Every row, by its key in host.json; vk-adam's speed-up is over every row after the first.
LABELS = {
    "vk-adam": "vk-adam, NumPy params",
    "vk-adam-device-params": "vk-adam, device_params=True",
    "vk-adam-staging": "vk-adam, staging path (VK_ADAM_HOST_IMPORT=0)",
    "torch-cpu": "torch CPU AdamW (defaults)",
    "torch-cpu-fused": "torch CPU AdamW, fused",
    "torch-cuda": "torch CUDA fused AdamW, copying grads in and params out",
    "torch-cuda-pinned": "torch CUDA fused AdamW, pinned host copies",
    "deepspeed-cpu": "DeepSpeedCPUAdam (adamw_mode=True)",
}
#: Rows run on reused arrays only (pinned staging tensors the application keeps).
REUSED_ONLY = ("torch-cuda-pinned",)
#: Rows of the same semantics (params on the GPU, the gradient in, the param copied out), set
#: against each other in the report: (vk-adam's, torch's).
SAME_SEMANTICS = ("vk-adam-device-params", "torch-cuda-pinned")
#: What runs at each size, in order: (backend, gradient arrays).
JOBS = [(b, a) for b in LABELS for a in ARRAYS if a == "reused" or b not in REUSED_ONLY]
JOBS += [("yardsticks", "")]
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


def _measure(job: tuple[int, str, str], args: argparse.Namespace, device: int) -> Row:
    n, backend, arrays = job
    warmup, repeats = args.warmup, args.repeats
    if backend in ("vk-adam", "vk-adam-device-params", "vk-adam-staging"):
        host_import, device_params = backend != "vk-adam-staging", backend == "vk-adam-device-params"
        return hp.bench_vk(n, arrays, device, warmup, repeats, host_import, device_params)
    if backend == "yardsticks":
        return hp.yardsticks(n, cuda_available(), warmup, repeats)
    if not torch_available():
        return {"skipped": "torch is not installed", "cell": "no torch"}
    if backend == "deepspeed-cpu":
        return hp.bench_deepspeed_cpu(n, arrays, warmup, repeats)
    if backend == "torch-cpu":
        return hp.bench_torch_cpu(n, arrays, False, warmup, repeats)
    if backend == "torch-cpu-fused":
        try:
            return hp.bench_torch_cpu(n, arrays, True, warmup, repeats)
        except (RuntimeError, ValueError) as exc:  # a torch without fused CPU AdamW
            return {"skipped": f"fused CPU AdamW unavailable: {type(exc).__name__}: {exc}", "cell": "n/a"}
    if not cuda_available():
        return {"skipped": "no CUDA (torch.cuda.is_available() is False)", "cell": "no CUDA"}
    if backend == "torch-cuda-pinned":
        return hp.bench_torch_cuda_pinned(n, warmup, repeats)
    return hp.bench_torch_cuda(n, arrays, warmup, repeats)


def run_host_bench(args: argparse.Namespace, info: DeviceInfo) -> str:
    from tqdm import tqdm

    sizes = parse_sizes(args.host_sizes) if args.host_sizes else SOFTWARE_SIZES if info.is_software else SIZES
    why = "a software Vulkan device, where one step takes seconds (--host-sizes runs it)"
    skipped = {} if args.host_sizes else {size_label(n): why for n in SIZES if n not in sizes}
    (out := Path(args.out)).mkdir(parents=True, exist_ok=True)
    report: Row = {"meta": _meta(args, info, sizes) | {"skipped_sizes": skipped}, "labels": LABELS}
    report |= {"speedup_over": list(LABELS)[1:], "rows": [], "yardsticks": []}
    jobs = [(n, b, a) for n in sizes for b, a in JOBS]
    started, vk_ms = time.perf_counter(), {}  # vk_ms: vk-adam's, for the speed-ups
    ours, theirs = SAME_SEMANTICS
    ours_ms: dict[tuple[int, str], float] = {}  # the device_params row's, for torch's pinned row
    with tqdm(jobs, desc="host", unit="run", dynamic_ncols=True, disable=args.quiet) as bar:
        for n, backend, arrays in bar:
            bar.set_postfix_str(f"{size_label(n)} {backend} {arrays}".strip())
            try:
                result = _measure((n, backend, arrays), args, info.index)
            except Exception as exc:  # one failed run must not lose the others
                result = {"note": f"failed: {type(exc).__name__}: {exc}"}
            if backend == "yardsticks":
                report["yardsticks"].append({"elements": n} | result)
            else:
                if backend == "vk-adam":
                    vk_ms[(n, arrays)] = result.get("ms")
                elif "ms" in result and vk_ms.get((n, arrays)):  # above 1: vk-adam is faster
                    result["vk_adam_speedup"] = result["ms"] / vk_ms[(n, arrays)]
                if backend == ours and result.get("ms"):
                    ours_ms[(n, arrays)] = result["ms"]
                elif backend == theirs and "ms" in result and (n, arrays) in ours_ms:
                    result["device_params_speedup"] = result["ms"] / ours_ms[(n, arrays)]
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
        return _ms(row["ms"]) + " ms" * long
    if long:  # what failed or was skipped, in full; the yardsticks' times
        times = ", ".join(f"{k[:-3]} {_ms(v)} ms" for k, v in (row or {}).items() if k.endswith("_ms"))
        return times or str((row or {}).get("skipped") or (row or {}).get("note"))
    return "n/a" if row is None else str(row.get("cell") or ("skipped" if "skipped" in row else "failed"))


def _same_semantics(
    sizes: list[int], find: dict[tuple[int, str, str], Row], labels: dict[str, str]
) -> list[str]:
    """A line per size setting the ``device_params=True`` row against torch's pinned CUDA row
    (reused arrays, the pinned row's only kind): torch's ms over vk-adam's, or why there is none."""
    ours, theirs = SAME_SEMANTICS
    if ours not in labels or theirs not in labels:
        return []
    out = ["", f"{labels[ours]} against {labels[theirs]}, the same semantics (params on the GPU, the "]
    out[-1] += f"gradient in, the param copied out), {theirs} ms / {ours} ms (above 1: vk-adam is faster):"
    out += [""]
    for n in sizes:
        pair = [find.get((n, "reused", b)) for b in (ours, theirs)]
        ratio = (pair[1] or {}).get("device_params_speedup")
        why = next((_cell(r) for r in pair if r is None or "ms" not in r), "n/a")
        figure = f"{ratio:.2f}x" if ratio else why
        out.append(
            f"* {size_label(n)} ({n * 4 / 2**20:,.3g} MiB): device_params vs torch CUDA pinned: {figure}"
        )
    return out


def format_host_table(report: dict[str, Any]) -> str:
    meta, rows, ticks = report["meta"], report["rows"], {y["elements"]: y for y in report["yardsticks"]}
    labels = report.get("labels", LABELS)
    ds = next((r for r in rows if "deepspeed" in r), None)
    find = {(r["elements"], r["arrays"], r["backend"]): r for r in rows}
    others = report.get("speedup_over", list(labels)[1:])
    lines = [
        f"AdamW on NumPy params (`vk-adam bench --cases host`), one fp32 tensor, lr 1e-3: median ms of "
        f"{meta['repeats']} steps after {meta['warmup']}, each timed alone (fresh arrays: the previous "
        f"step's gradient array is dropped inside the timed region). Vulkan: {meta['device']}; "
        f"torch {meta.get('torch', 'not installed')}"
        + (f" ({meta['torch_threads']} threads)" if "torch_threads" in meta else "")
        + (f"; DeepSpeed {ds['deepspeed']} ({ds['threads']} threads)" if ds else "")
        + f"; CUDA: {meta.get('cuda_device', 'none')}.",
        "",
        f"| fp32 elements | grad arrays | {' | '.join(labels.values())} |",
        "|---|---|" + "---:|" * len(labels),
    ]
    speed = ["", f"vk-adam's speed-up, other ms / {labels['vk-adam']} ms (above 1: vk-adam is faster):", ""]
    speed += [f"| fp32 elements | grad arrays | {' | '.join(f'vs {labels[b]}' for b in others)} |"]
    speed += ["|---|---|" + "---:|" * len(others)]
    yard = ["", "Yardsticks, the gradient's bytes:", ""]
    yard += ["| fp32 elements | one copy to the GPU, pinned | one copy to the GPU, pageable | np.copyto |"]
    yard += ["|---|---:|---:|---:|"]
    for n in meta["sizes"]:
        tick, label = ticks.get(n, {}), f"{size_label(n)} ({n * 4 / 2**20:,.3g} MiB)"
        for arrays in ARRAYS:
            lines.append(
                f"| {label} | {arrays} | {' | '.join(_cell(find.get((n, arrays, b))) for b in labels)} |"
            )
            ratios = [(find.get((n, arrays, b)) or {}).get("vk_adam_speedup") for b in others]
            speed.append(f"| {label} | {arrays} | {' | '.join(f'{r:.2f}x' if r else '' for r in ratios)} |")
        copies = [_ms(tick[k]) if k in tick else "no CUDA" for k in ("pinned_h2d_ms", "pageable_h2d_ms")]
        yard.append(
            f"| {label} | {' | '.join(copies)} | {_ms(tick['copyto_ms']) if 'copyto_ms' in tick else ''} |"
        )
    notes = [f"{labels[b]}: reused arrays only" for b in REUSED_ONLY if b in labels]
    notes += [f"{labels[r['backend']]}: {r.get('skipped') or r.get('note')}" for r in rows if "ms" not in r]
    off = "host-memory imports off (a device without VK_EXT_external_memory_host): the staging path too"
    notes += [
        f"{labels['vk-adam']}: {off}"
        for r in rows
        if r["backend"] == "vk-adam" and r.get("host_import") is False
    ]
    notes += [f"yardsticks, {size_label(n)}: {y['note']}" for n, y in ticks.items() if "note" in y]
    notes += [f"{label} not run: {why}" for label, why in meta["skipped_sizes"].items()]
    body = lines + speed + _same_semantics(meta["sizes"], find, labels) + yard
    return "\n".join(body + [""] * bool(notes) + [f"* {note}" for note in dict.fromkeys(notes)])
