"""The report: ``build_report`` (per case and backend: the figures, effective bandwidth, and the
peers' ratios to vk-adam), and ``render``, which writes ``bench.json``, the Markdown table
``bench.md`` and the plot ``bench.png``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from .cases import BYTES_PER_ELEMENT, Case
from .measure import Result


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
        "GPU ms: Vulkan timestamps / CUDA events. sync step: wall time, host waits (vk-adam: no "
        "timestamps). back-to-back: wall "
        "time per step of steps issued without host waits (vk-adam: recorded into one sequence with "
        "`record_step`, then submitted; torch: launched in a loop), then one wait. overlapped: "
        "vk-adam's steps recorded in batches over two sequences, each batch recorded while the GPU "
        "runs the one before (docs/usage.md). host us: vk-adam's own time per "
        "synchronous step outside the driver's submit-and-wait. peer/vk-adam > 1: vk-adam is faster.",
        "",
        "| case | backend | dispatches | GPU ms | GB/s | % copy BW | sync step ms | back-to-back ms/step | "
        "overlapped ms/step | step(wait=False) ms | host us | peer/vk-adam (GPU, sync, b2b) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
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
                f"{_fmt(row['pipelined_ms'])} | {_fmt(row.get('back_to_back_overlapped_ms'))} | "
                f"{_fmt(row.get('async_step_ms'))} | {_fmt(host_us)} | "
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
