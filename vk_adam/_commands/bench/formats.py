"""``vk-adam bench --cases formats``: one AdamW step of one large tensor in each storage format
(fp32, fp16 and bf16 params, with an fp32 master copy or stochastic rounding; fp32, bf16 and
8-bit blockwise state), against torch's fused AdamW (fp32, and bf16 params with bf16 state) on
CUDA when it runs on the same machine.

Every row times the GPU, not a bus: the params stay on the device (fp32: kp tensors on the
runtime's manager, as the main bench; 16-bit: NumPy arrays with ``device_params=True``, which the
device holds between steps), the gradient is on the device, and the time is the update
dispatch's alone (Vulkan timestamps, ``Optimizer.last_gpu_seconds``, median of ``repeats``: the
main bench's timing; CUDA events for torch, steps back to back).

Reported per row: that GPU time, the bytes one step moves per element, the effective bandwidth
(those bytes over the GPU time) and its share of the device's copy bandwidth, resident bytes per
param (``Optimizer.memory_bytes()``: param, gradient, master copy, state, block scales), and the
time relative to vk-adam's fp32 step.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ... import _formats as fmt
from .peers import cuda_available


@dataclass(frozen=True)
class FormatConfig:
    label: str
    param_dtype: str
    stochastic_rounding: bool
    state_dtype: str


#: Every param format (fp32; fp16 and bf16 with an fp32 master copy or stochastic rounding)
#: with the state formats it is used with.
CONFIGS = (
    FormatConfig("fp32 params, fp32 state", "float32", False, "float32"),
    FormatConfig("fp32 params, bf16 state", "float32", False, "bfloat16"),
    FormatConfig("fp32 params, int8 state", "float32", False, "int8-blockwise"),
    FormatConfig("bf16 params + master, bf16 state", "bfloat16", False, "bfloat16"),
    FormatConfig("bf16 params + master, int8 state", "bfloat16", False, "int8-blockwise"),
    FormatConfig("bf16 params (SR), bf16 state", "bfloat16", True, "bfloat16"),
    FormatConfig("bf16 params (SR), int8 state", "bfloat16", True, "int8-blockwise"),
    FormatConfig("fp16 params + master, int8 state", "float16", False, "int8-blockwise"),
    FormatConfig("fp16 params (SR), bf16 state", "float16", True, "bfloat16"),
    FormatConfig("fp16 params (SR), int8 state", "float16", True, "int8-blockwise"),
)


def bytes_per_element(cfg: FormatConfig) -> float:
    """Bytes one AdamW step moves per element (gradient read, not zeroed; as torch's)."""
    param = fmt.bytes_per_element(cfg.param_dtype)
    moved = 2.0 * param + param  # param read + write, gradient read
    if cfg.param_dtype != "float32" and not cfg.stochastic_rounding:
        moved += 8.0  # the fp32 master copy, read + write
    state = {"float32": 8.0, "bfloat16": 4.0, "int8-blockwise": 2.0 + 8.0 / fmt.BLOCK}[cfg.state_dtype]
    return moved + 2 * state  # exp_avg and exp_avg_sq, each read + written


def format_data(cfg: FormatConfig, n: int) -> tuple[Any, Any]:
    """A param and a gradient of ``n`` elements in ``cfg``'s param dtype (the same every call)."""
    rng = np.random.default_rng(0)
    dtype = fmt.NUMPY_DTYPES[cfg.param_dtype]
    p = rng.standard_normal(n, dtype=np.float32).astype(dtype)
    g = (rng.standard_normal(n, dtype=np.float32) * 1e-2).astype(dtype)
    return p, g


def time_format_step(
    cfg: FormatConfig,
    p: Any,
    g: Any,
    repeats: int,
    warmup: int,
    device_index: int | None = None,
) -> tuple[list[float], str, dict[str, int], str]:
    """GPU seconds of ``repeats`` AdamW update dispatches of ``p`` in ``cfg``'s formats, with
    the params and the gradient ``g`` on the device (see the module's docstring), the shader
    that ran (variants.py), ``Optimizer.memory_bytes()`` and where the params lie."""
    from ..._optim import Optimizer
    from ..._runtime import Runtime, host_view

    rt = Runtime(device=device_index) if cfg.param_dtype == "float32" else None
    params: list[Any] = [p]
    where = "device (NumPy, device_params=True)"
    if rt is not None:  # fp32: the application's kp tensor, as in the main bench
        params = [rt.buffer(np.ascontiguousarray(p, np.float32))]
        rt.run([rt.upload_op(params)])
        where = "device (kp tensor)"
    opt = Optimizer(
        params,
        "adamw",
        manager=None if rt is None else rt.manager,
        device=device_index,
        zero_grad=False,
        profile=True,
        lr=1e-4,
        state_dtype=cfg.state_dtype,
        stochastic_rounding=cfg.stochastic_rounding,
        device_params=rt is None,
    )
    try:
        if rt is not None:
            grad = opt.grad_buffer(0, 0)
            host_view(grad)[:] = g
            rt.run([rt.upload_op([grad])])
            opt.step()
        else:
            opt.step([g])  # uploads the gradient once; later steps read it on the device
        for _ in range(warmup):
            opt.step()
        gpu = []
        for _ in range(repeats):
            opt.step()
            assert opt.last_gpu_seconds is not None
            gpu.append(opt.last_gpu_seconds)
        inside = opt.internals()
        bset = inside.groups[0].sets[0]
        bound = inside.host_traffic.bound.get((0, 0)) if rt is None else None
        if bound is not None and (bound[0] is not bset.param or bound[2] is not bset.grad):
            raise RuntimeError(  # the row would time a bus, not the GPU
                f"{cfg.label}: the update bound host memory instead of the device's buffers"
            )
        return gpu, str(bset.spirv), opt.memory_bytes(), where
    finally:
        opt.close()
        if rt is not None:
            for t in params:
                rt.free_buffer(t)
            rt.close()


def bench_format(cfg: FormatConfig, n: int, device_index: int, repeats: int, warmup: int) -> dict[str, Any]:
    p, g = format_data(cfg, n)
    gpu, shader, mem, where = time_format_step(cfg, p, g, repeats, warmup, device_index)
    resident = sum(mem[k] for k in ("param", "grad", "master", "state", "absmax"))
    return {
        "backend": "vk-adam",
        "config": cfg.label,
        "elements": n,
        "gpu_ms": statistics.median(gpu) * 1e3,
        "bytes_per_element": bytes_per_element(cfg),
        "resident_bytes_per_param": resident / n,
        "shader": shader,
        "params": where,
    }


def knob_settings() -> dict[str, str]:
    """The loop-shape knobs set in the environment (variants.py), for the report."""
    import os

    from ..._optim import INT8_VEC4S_ENV, INT8_WORKGROUPS_ENV, SUBGROUPS_ENV, VEC4S_ENV
    from ..._runtime import MAX_WORKGROUPS_ENV

    names = (SUBGROUPS_ENV, VEC4S_ENV, INT8_VEC4S_ENV, INT8_WORKGROUPS_ENV, MAX_WORKGROUPS_ENV)
    return {name: os.environ[name] for name in names if name in os.environ}


def bench_torch_formats(n: int, steps: int) -> list[dict[str, Any]]:
    """torch fused AdamW on CUDA: fp32, and bf16 params with bf16 state (torch keeps state in
    the param dtype); CUDA events around ``steps`` back-to-back steps."""
    import torch

    rows = []
    for label, dtype, nbytes in (
        ("torch fused AdamW, fp32", torch.float32, 28.0),
        ("torch fused AdamW, bf16 params + bf16 state", torch.bfloat16, 14.0),
    ):
        p = torch.randn(n, device="cuda").to(dtype).requires_grad_()
        p.grad = (torch.randn(n, device="cuda") * 1e-2).to(dtype)
        opt = torch.optim.AdamW([p], lr=1e-4, fused=True)
        for _ in range(3):
            opt.step()
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        torch.cuda.synchronize()
        start.record()
        for _ in range(steps):
            opt.step()
        end.record()
        torch.cuda.synchronize()
        rows.append(
            {
                "backend": "torch-cuda",
                "config": label,
                "elements": n,
                "gpu_ms": start.elapsed_time(end) / steps,
                "bytes_per_element": nbytes,
                # param, grad, exp_avg, exp_avg_sq in the param's dtype
                "resident_bytes_per_param": 4.0 * (4 if dtype == torch.float32 else 2),
            }
        )
        del opt, p
        torch.cuda.empty_cache()
    return rows


def run_formats_bench(
    device_index: int,
    software: bool,
    copy_gbps: float | None,
    repeats: int,
    warmup: int,
    out: Path,
    quiet: bool = False,
    sizes: tuple[int, ...] | None = None,
) -> str:
    """Every config of ``CONFIGS`` at each of ``sizes`` (default: 2^24 and 2^28 elements on a
    GPU, 2^20 and 2^22 on a CPU driver), then torch's rows; writes formats.json, formats.md and
    the plot formats.png into ``out`` and returns the table."""
    from tqdm import tqdm

    if sizes is None:
        sizes = (2**20, 2**22) if software else (2**24, 2**28)
    cuda = not software and cuda_available()
    rows: list[dict[str, Any]] = []
    jobs = [(cfg, n) for n in sizes for cfg in CONFIGS]
    for cfg, n in tqdm(jobs, desc="formats", unit="run", dynamic_ncols=True, disable=quiet):
        try:
            rows.append(bench_format(cfg, n, device_index, repeats, warmup))
        except Exception as exc:  # one failed run must not lose the others
            rows.append({"backend": "vk-adam", "config": cfg.label, "elements": n, "note": f"failed: {exc}"})
    if cuda:
        for n in sizes:
            rows += bench_torch_formats(n, 50)
    for row in rows:
        if "gpu_ms" not in row:
            continue
        base = next(
            (r for r in rows if r["config"] == CONFIGS[0].label and r["elements"] == row["elements"]), None
        )
        row["vs_vk_fp32"] = row["gpu_ms"] / base["gpu_ms"] if base and "gpu_ms" in base else None
        row["GBps"] = row["bytes_per_element"] * row["elements"] / (row["gpu_ms"] * 1e-3) / 1e9
        row["copy_fraction"] = row["GBps"] / copy_gbps if copy_gbps else None
    report = {"copy_GBps": copy_gbps, "knobs": knob_settings(), "rows": rows}
    out.mkdir(parents=True, exist_ok=True)
    (out / "formats.json").write_text(json.dumps(report, indent=2))
    return render_formats(report, out)


def is_formats_report(report: dict[str, Any]) -> bool:
    """Whether a saved report is this bench's formats.json (not the main bench's bench.json)."""
    return "rows" in report and "cases" not in report


def render_formats(report: dict[str, Any], out: Path) -> str:
    """Write formats.md and formats.png for a saved formats.json's report; return the table."""
    out.mkdir(parents=True, exist_ok=True)
    table = format_table(report)
    (out / "formats.md").write_text(table + "\n")
    plot_formats(report, out / "formats.png")
    return table


#: The marks a storage format's step is held to: its share of the copy bandwidth at 268M
#: elements (2^28) and at 16.8M (2^24).
TARGETS = {2**28: 0.90, 2**24: 0.80}


def plot_formats(report: dict[str, Any], path: Path) -> None:
    """One bar per format and size: the step's share of the copy bandwidth (its GB/s where the
    report has no copy bandwidth), the GPU ms written at the bar's end; the marks of TARGETS
    as dashed lines of the size's colour."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in report["rows"] if "gpu_ms" in r]
    share = all(r.get("copy_fraction") for r in rows) and bool(rows)
    labels = list(dict.fromkeys((r["backend"], r["config"]) for r in rows))
    sizes = sorted({r["elements"] for r in rows})
    fig, ax = plt.subplots(figsize=(11, 0.3 * max(1, len(labels)) * max(1, len(sizes)) + 1.6))
    width = 0.8 / max(1, len(sizes))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, n in enumerate(sizes):
        color = colors[k % len(colors)]
        legend: str | None = f"{n:,} elements"  # on the size's first bar
        for i, label in enumerate(labels):
            row = next((r for r in rows if (r["backend"], r["config"]) == label and r["elements"] == n), None)
            if row is None:
                continue
            value = 100 * row["copy_fraction"] if share else row["GBps"]
            y = i + k * width
            ax.barh(y, value, width, color=color, label=legend)
            legend = None
            ax.text(value, y, f" {row['gpu_ms']:.3f} ms", va="center", fontsize=7)
        if share and n in TARGETS:
            ax.axvline(100 * TARGETS[n], color=color, linestyle="--", linewidth=1)
    ax.set_xlim(0, 1.15 * max([100 * r["copy_fraction"] if share else r["GBps"] for r in rows], default=1.0))
    ax.set_yticks([i + 0.4 - width / 2 for i in range(len(labels))])
    ax.set_yticklabels([c if b == "vk-adam" else f"{c} ({b})" for b, c in labels], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("share of the copy bandwidth, % (bytes the step must move)" if share else "GB/s")
    ax.grid(True, axis="x", alpha=0.3)
    if rows:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.07), ncol=len(sizes), fontsize=8, frameon=False)
    marks = ", ".join(f"{100 * t:.0f}% at {n:,}" for n, t in TARGETS.items() if n in sizes)
    title = "AdamW step per storage format (higher is better)"
    ax.set_title(title + (f"; dashed: {marks}" if share and marks else ""), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")  # the legend below the axes
    plt.close(fig)


def format_table(report: dict[str, Any]) -> str:
    lines = [
        "| elements | format | GPU ms | vs vk fp32 | bytes/elem | GB/s | of copy BW | resident B/param |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["rows"]:
        if "gpu_ms" not in r:
            lines.append(f"| {r['elements']:,} | {r['config']} | {r.get('note', '')} | | | | | |")
            continue
        ratio = f"{r['vs_vk_fp32']:.2f}x" if r.get("vs_vk_fp32") else ""
        share = f"{100 * r['copy_fraction']:.0f}%" if r.get("copy_fraction") else ""
        name = r["config"] if r["backend"] == "vk-adam" else f"*{r['config']}*"
        lines.append(
            f"| {r['elements']:,} | {name} | {r['gpu_ms']:.3f} | {ratio} | {r['bytes_per_element']:.2f} "
            f"| {r['GBps']:.0f} | {share} | {r['resident_bytes_per_param']:.2f} |"
        )
    shaders = sorted({r["shader"] for r in report["rows"] if r.get("shader")})
    knobs = " ".join(f"{k}={v}" for k, v in report.get("knobs", {}).items()) or "none set"
    lines += [
        "",
        "GPU ms: the update dispatch alone (Vulkan timestamps), params and gradient on the device "
        "(fp32: kp tensors; 16-bit: NumPy with device_params=True).",
        f"Shaders: {', '.join(shaders) or 'n/a'}. Knobs: {knobs}.",
    ]
    return "\n".join(lines)
