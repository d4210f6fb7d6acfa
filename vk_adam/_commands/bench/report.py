"""The report: ``build_report`` (per case and backend: the figures, effective bandwidth, and the
peers' ratios to vk-adam), and ``render``, which writes ``bench.json``, the Markdown tables
``bench.md`` (the step against its peers; captured steps and their replay) and the plot
``bench.png``."""

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
                replay = ours.extra.get("replay_ms")
                if replay and backend == "torch-cuda-fused":
                    # torch's back-to-back steps (launched; replayed from a CUDA graph) against
                    # vk-adam's one recording of captured steps evaluated again and again (both
                    # unclipped: the clipped rows have no replay of their own)
                    row["peer_over_vk_adam_replay"] = {
                        k: v / replay
                        for k, v in (
                            ("pipelined_ms", r.pipelined_ms),
                            ("graph_replay_ms", r.extra.get("graph_replay_ms")),
                        )
                        if v
                    }
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
    return "\n".join(lines + format_captured_table(report))


#: What the captured-steps table's figures mean, printed above it.
CAPTURED_LEGEND = (
    "Captured steps (`capturable=True`: the step count and lr live on the device, so one recording "
    "may be evaluated any number of times), vk-adam's flat buffer. GPU ms push / captured: Vulkan "
    "timestamps around the update dispatches of a synchronous step, push-constant and captured, "
    "timed alternately in one loop; clock cost = captured / push (> 1: the clock costs). replay: "
    "one recording of N captured steps (N = --steps-per-batch), recorded once, evaluated "
    "repeatedly (submit and wait each), wall ms per step; replay / GPU = replay ms per step over the "
    "captured step's own GPU ms. one-step replay: one captured step recorded once, evaluated "
    "repeatedly, wall ms per evaluation. torch (CUDA): fused AdamW launched back to back (ms/step), "
    "and fused AdamW with capturable=True, one step captured in a CUDA graph and replayed back to "
    "back (wall ms/step; GPU ms/step by CUDA events); torch / replay > 1: vk-adam's replay is faster."
)


def format_captured_table(report: dict[str, Any]) -> list[str]:
    """The captured-steps table (lines to append), or nothing for a report with neither its
    figures nor a note on why they are missing (a bench.json from before captured steps)."""
    rows = [
        (name, entry, entry["results"].get("vk-adam", {}), entry["results"].get("torch-cuda-fused", {}))
        for name, entry in report["cases"].items()
    ]
    if not any("captured_gpu_ms" in ours or "captured_note" in ours for _, _, ours, _ in rows):
        return []
    lines = [
        "",
        "## Captured steps and replay",
        "",
        CAPTURED_LEGEND,
        "",
        "| case | GPU ms push | GPU ms captured | clock cost | replay ms/step (N) | replay / GPU | "
        "one-step replay ms | torch b2b ms/step | torch graph ms/step (GPU ms) | torch b2b / replay | "
        "torch graph / replay |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, entry, ours, torch in rows:
        ratios = torch.get("peer_over_vk_adam_replay", {})
        notes = [n for n in (ours.get("captured_note"), torch.get("graph_note")) if n]
        graph = torch.get("graph_replay_ms")
        lines.append(
            f"| {name} ({entry['tensors']} t, {entry['elements'] / 1e6:.1f}M) | "
            f"{_fmt(ours.get('captured_push_gpu_ms'))} | {_fmt(ours.get('captured_gpu_ms'))} | "
            f"{_ratio(ours.get('clock_cost_ratio'))} | {_fmt(ours.get('replay_ms'))}"
            f"{' (' + str(ours['replay_steps']) + ')' if 'replay_steps' in ours else ''} | "
            f"{_ratio(ours.get('replay_over_captured_gpu'))} | {_fmt(ours.get('replay_single_ms'))} | "
            f"{_fmt(torch.get('pipelined_ms'))} | "
            f"{_fmt(graph)}{' (' + _fmt(torch['graph_gpu_ms']) + ')' if graph else ''} | "
            f"{_ratio(ratios.get('pipelined_ms'))} | {_ratio(ratios.get('graph_replay_ms'))}"
            f"{(' ' + '; '.join(notes)) if notes else ''} |"
        )
    if not report["meta"].get("cuda_device"):
        lines += ["", "torch columns: skipped, CUDA is not available on this machine."]
    return lines


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}x"


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
