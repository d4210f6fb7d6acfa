"""What the demo shows and draws: the progress bar, the gap between two loss curves, the
loss-curve figure (``loss_curve.png``) and the closing lines."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def progress_bar(total: int, start: int, enabled: bool, label: str) -> Callable[[float | None], None]:
    if not enabled:
        return lambda loss: None
    from tqdm import tqdm

    bar = tqdm(total=total, initial=start, desc=label, unit="step", leave=True, dynamic_ncols=True)

    def update(loss: float | None) -> None:
        if loss is None:
            bar.close()
            return
        bar.set_postfix(loss=f"{loss:.3e}", refresh=False)
        bar.update(1)

    return update


def curve_gap(a: list[float], b: list[float]) -> float:
    """max_t |a_t - b_t| / b_t: the largest relative gap between two loss curves."""
    x, y = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(x - y) / np.maximum(np.abs(y), 1e-30)))


def plot_loss_curves(path: Path, curves: dict[str, list[float]], title: str) -> None:
    """The curves on a log scale (the first is vk-adam's run), and each other curve's relative
    gap to the first."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, gap) = plt.subplots(2, 1, figsize=(8, 7), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    first = next(iter(curves))
    styles = {first: ("-", 2.2), "float64 reference": ("--", 1.4), "vk-adam host path": ("-.", 1.2)}
    for label, losses in curves.items():
        ls, lw = styles.get(label, (":", 1.6) if label.startswith("torch") else ("-", 1.0))
        ax.semilogy(range(1, len(losses) + 1), losses, ls, lw=lw, label=label)
    ax.set_ylabel("training loss (MSE)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    ours = np.asarray(curves[first])
    for label, losses in curves.items():
        if label.startswith("vk-adam"):
            continue
        other = np.asarray(losses)
        gap.semilogy(range(1, len(ours) + 1), np.abs(ours - other) / other + 1e-16, label=f"vs {label}")
    gap.set_xlabel("step")
    gap.set_ylabel("relative gap")
    gap.grid(True, which="both", alpha=0.3)
    if len(curves) > 1:
        gap.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def print_summary(formats: str, summary: dict[str, Any], tensors: int, out: Path) -> None:
    """The demo's closing lines on the terminal."""
    print(
        f"{summary['path']} path on {summary['device']}  ({tensors} LoRA tensors, "
        f"{summary['elements']} elements, {summary['dispatches_per_step']} update dispatch per step)"
    )
    memory = summary["memory_bytes"]
    kinds = ", ".join(f"{k} {v}" for k, v in memory.items() if k != "total" and v)
    print(
        f"{formats}: {summary['resident_bytes_per_param']:.2f} bytes per param in params, grads "
        f"and state; {summary['bytes_per_param']:.2f} with the fixed buffers ({memory['total']} "
        f"bytes: {kinds})"
    )
    first, last = summary["initial_loss"], summary["final_loss"]
    print(f"loss: {first:.4e} -> {last:.4e}  ({summary['loss_reduction']:.0f}x lower)")
    for key, label in (
        ("max_relative_gap_vs_host", "the host path"),
        ("max_relative_gap_vs_float64_reference", "float64 reference"),
        ("max_relative_gap_vs_torch", "torch"),
    ):
        if key in summary:
            print(f"loss curve vs {label}: max relative gap {summary[key]:.2e}")
    print(f"wrote {out / 'adapter'} (PEFT), {out / 'loss_curve.png'}, {out / 'summary.json'}")
    print(f"took {summary['total_seconds']:.1f} s")
