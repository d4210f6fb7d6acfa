"""``vk-adam bench --cases train``: whole training steps of the demo's model (forward, backward,
global-norm clipping, AdamW update), the GPU-resident Vulkan loop against torch.

* **vk-adam resident**: ``demo/resident_example`` (the demo's loop): ``steps_per_submit`` steps
  recorded once, back to back, with a capturable optimizer; the recording evaluated again and
  again, one wait and one loss download per evaluation. The timed rounds are evaluations only;
  the one recording is timed on its own (``record_ms``).
* **update share**: as many captured ``record_step`` calls alone (clipping and AdamW, no
  forward or backward), recorded once and evaluated the same way, over the whole step's time.
* **torch**: eager on CUDA with fused AdamW and with the default (foreach) AdamW, and on the CPU;
  steps launched in a loop, one synchronize at the end.
* **torch CUDA graph**: the whole torch step (forward, backward, clipping, fused AdamW with
  ``capturable=True``) captured once as a CUDA graph that picks its own batch on the device;
  one replay per step, one synchronize at the end. Without CUDA the row says why it was skipped.

Model: the anchor's shape on a GPU (8 blocks, dim 128, q and v LoRA r8, batch 64, clipping 1.0,
AdamW); the demo's smaller default on a software device, where a step takes a good part of a
second.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..._runtime import Runtime, open_device

#: Submissions timed after one warm-up submission.
REPEATS = 5


def _config(software: bool, steps: int) -> Any:
    from ..demo.config import DemoConfig

    base = DemoConfig() if software else DemoConfig(layers=8, dim=128)
    return dataclasses.replace(base, steps=steps)


def time_submissions(trainer: Any, per_submit: int, repeats: int) -> tuple[list[float], list[float]]:
    """Seconds per step of ``repeats`` evaluations of the trainer's recording of ``per_submit``
    steps (after one warm-up evaluation, which records it): whole ``run`` calls, and the
    evaluation alone (submission, GPU work, wait, loss download; ``run`` adds reading the losses
    out). Each evaluation trains the next steps: nothing is recorded between them."""
    walls, evals = [], []
    for r in range(repeats + 1):
        t0 = time.perf_counter()
        trainer.run(r * per_submit, (r + 1) * per_submit)
        t1 = time.perf_counter()
        if r:
            walls.append((t1 - t0) / per_submit)
            evals.append(trainer.last_eval_seconds / per_submit)
    return walls, evals


def bench_resident(device_index: int, software: bool, per_submit: int) -> dict[str, Any]:
    from ..demo.model import fresh_run, make_dataset
    from ..demo.resident import load_example

    repeats = 2 if software else REPEATS
    cfg = _config(software, per_submit * (repeats + 1))
    example = load_example()
    adapter, model, _ = fresh_run(cfg)
    x, y = make_dataset(cfg, model)
    base = {path: w.astype(np.float32) for path, w in model.base.items()}
    dev = open_device(device_index)  # the process's shared device, as the optimizer's
    mgr = dev.manager
    try:
        # capturable: the trainer's recording is evaluated again and again (the lr is constant).
        opt = adapter.optimizer(cfg.rule, manager=mgr, capturable=True, **cfg.optimizer_options())
        with opt:
            trainer = example.ResidentTrainer(mgr, adapter, opt, model.blocks, base, x, y)
            t0 = time.perf_counter()
            trainer.recording(per_submit)  # once; the timed rounds evaluate it
            record_s = time.perf_counter() - t0
            walls, evals = time_submissions(trainer, per_submit, repeats)
            kinds = [type(op).__name__ for op in trainer.gradient_ops(0)]
            # The update alone: as many captured steps recorded once, no forward or backward.
            rt = Runtime(manager=mgr)  # the sequence below is its own; the manager stays the app's
            seq = rt.new_sequence()
            for _ in range(per_submit):
                opt.record_step(seq)
            updates = []
            for r in range(repeats + 1):
                t0 = time.perf_counter()
                rt.evaluate(seq)
                if r:
                    updates.append((time.perf_counter() - t0) / per_submit)
            rt.close()
            trainer.close()
        adapter.device_params = None
    finally:
        dev.close()
    step_s, update_s = statistics.median(walls), statistics.median(updates)
    return {
        "backend": "vk-adam resident",
        "ms_per_step": step_s * 1e3,
        "steps_per_s": 1 / step_s,
        "eval_ms_per_step": statistics.median(evals) * 1e3,
        "record_ms": record_s * 1e3,
        "app_dispatches_per_step": kinds.count("OpAlgoDispatch"),
        "app_barriers_per_step": kinds.count("OpMemoryBarrier"),
        "rows_per_group": trainer.rows,
        "row_threads": trainer.threads,
        "update_ms_per_step": update_s * 1e3,
        "update_share": update_s / step_s,
        "steps_per_submission": per_submit,
        "model": {"layers": cfg.layers, "dim": cfg.dim, "rank": cfg.rank, "batch": cfg.batch},
    }


def bench_torch(software: bool, per_submit: int, dev: str, fused: bool | None) -> dict[str, Any]:
    import torch

    from ..demo.torch_peer import torch_trainer

    repeats = 2 if software else REPEATS
    steps = per_submit * (repeats + 1)
    step_fn = torch_trainer(_config(software, steps), dev, fused=fused)

    def sync() -> None:
        if dev == "cuda":
            torch.cuda.synchronize()

    walls = []
    for r in range(repeats + 1):
        t0 = time.perf_counter()
        for step in range(r * per_submit, (r + 1) * per_submit):
            step_fn(step)
        sync()
        if r:
            walls.append((time.perf_counter() - t0) / per_submit)
    wall = statistics.median(walls)
    name = f"torch {dev} " + {True: "fused AdamW", False: "AdamW (for-loop)", None: "AdamW (default)"}[fused]
    return {"backend": name, "ms_per_step": wall * 1e3, "steps_per_s": 1 / wall}


GRAPH = "torch CUDA graph (whole step), fused AdamW"


def bench_torch_graph(software: bool, per_submit: int) -> dict[str, Any]:
    """The whole torch step as one CUDA graph, replayed ``per_submit`` times per measurement;
    a row with ``skipped`` (the reason) where torch or CUDA is missing."""
    try:
        import torch
    except ImportError:
        return {"backend": GRAPH, "skipped": "torch is not installed"}
    if not torch.cuda.is_available():
        return {"backend": GRAPH, "skipped": "CUDA is not available"}
    from ..demo.torch_peer import torch_graph_trainer

    repeats = 2 if software else REPEATS
    replay = torch_graph_trainer(_config(software, per_submit * (repeats + 1)), "cuda")
    walls = []
    for r in range(repeats + 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(per_submit):
            replay()
        torch.cuda.synchronize()
        if r:
            walls.append((time.perf_counter() - t0) / per_submit)
    wall = statistics.median(walls)
    return {"backend": GRAPH, "ms_per_step": wall * 1e3, "steps_per_s": 1 / wall}


def run_train_bench(device_index: int, software: bool, per_submit: int, out: Path) -> str:
    """Run every backend available, write train.json and train.md into ``out``; return the table."""
    rows = [bench_resident(device_index, software, per_submit)]
    try:
        import torch

        has_torch = True
    except ImportError:
        has_torch = False
    rows.append(bench_torch_graph(software, per_submit))
    if has_torch:
        if torch.cuda.is_available():
            rows += [bench_torch(software, per_submit, "cuda", fused) for fused in (True, None)]
        rows.append(bench_torch(software, min(per_submit, 10), "cpu", None))
    ours = rows[0]["ms_per_step"]
    for row in rows[1:]:
        if "ms_per_step" in row:
            row["vk_adam_speedup"] = row["ms_per_step"] / ours
    model = rows[0]["model"]
    lines = [
        f"Training step of the demo model ({model['layers']} blocks, dim {model['dim']}, q and v "
        f"LoRA r{model['rank']}, batch {model['batch']}, clipping 1.0, AdamW); vk-adam: "
        f"{rows[0]['steps_per_submission']} steps recorded once ({rows[0]['record_ms']:.1f} ms) and "
        f"evaluated again and again, {rows[0]['app_dispatches_per_step']} "
        f"dispatches of the example's shaders per step ({rows[0]['rows_per_group']} batch rows per "
        f"workgroup of {rows[0]['row_threads']} threads) plus record_step's; "
        f"{rows[0]['eval_ms_per_step']:.3f} ms/step of it in the evaluation "
        "(submission, GPU work, wait, loss download). Update share: record_step alone "
        f"{rows[0]['update_ms_per_step']:.3f} ms/step = {100 * rows[0]['update_share']:.1f}% of the step.",
        "",
        "| backend | ms/step | steps/s | vk-adam speed-up |",
        "|---|---|---|---|",
    ]
    for row in rows:
        if "skipped" in row:
            lines.append(f"| {row['backend']} | skipped: {row['skipped']} | | |")
            continue
        speedup = f"{row['vk_adam_speedup']:.2f}x" if "vk_adam_speedup" in row else ""
        ms, per_s = row["ms_per_step"], row["steps_per_s"]
        lines.append(f"| {row['backend']} | {ms:.3f} | {per_s:.0f} | {speedup} |")
    table = "\n".join(lines)
    out.mkdir(parents=True, exist_ok=True)
    (out / "train.json").write_text(json.dumps(rows, indent=2))
    (out / "train.md").write_text(table + "\n")
    return table
