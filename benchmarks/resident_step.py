"""Where the time of one GPU-resident training step goes (the demo's resident_example), and how
the shape of forward_backward.comp's workgroups changes it.

    python benchmarks/resident_step.py [--layers 8 --dim 128 --batch 64] [--rows 1,2,4]
                                       [--threads 128,256,512,1024] [--steps 100] [--device D]

For each (rows per workgroup, threads per workgroup): ms/step of ``--steps`` training steps
recorded once into one sequence (captured steps) and evaluated again and again, as ``vk-adam
bench --cases train`` counts it: whole ``run`` calls, and the evaluation alone (submission, GPU
work, wait, loss download); and, from Vulkan
timestamps over one such submission, the GPU time per step of forward_backward.comp,
weight_grads.comp and record_step (clipping and AdamW), each with the barrier after it. The
defaults are the bench's shape on a GPU; on lavapipe try ``--layers 2 --dim 32 --steps 4``.
One JSON line per shape on stdout, then a Markdown table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
from typing import Any

import numpy as np

from vk_adam._commands.bench.train import time_submissions
from vk_adam._commands.demo.config import DemoConfig
from vk_adam._commands.demo.model import fresh_run, make_dataset
from vk_adam._commands.demo.resident import load_example
from vk_adam._runtime import open_device

REPEATS = 5  # timed submissions, after one warm-up


def measure(mgr: Any, example: Any, cfg: DemoConfig, rows: int, threads: int, steps: int) -> dict[str, Any]:
    adapter, model, _ = fresh_run(cfg)
    x, y = make_dataset(cfg, model)
    base = {path: w.astype(np.float32) for path, w in model.base.items()}
    opt = adapter.optimizer(cfg.rule, manager=mgr, capturable=True, **cfg.optimizer_options())
    with opt:
        trainer = example.ResidentTrainer(
            mgr, adapter, opt, model.blocks, base, x, y, rows_per_group=rows, row_threads=threads
        )
        try:
            walls, evals = time_submissions(trainer, steps, REPEATS)
            # One more submission with a timestamp after every op (steps of the data set reused).
            app_ops = len(trainer.gradient_ops(0))
            ops_per_step = app_ops + _count_ops(mgr, opt)
            seq = mgr.sequence(0, steps * ops_per_step + 1)
            for step in range(steps):
                for op in trainer.gradient_ops(step):
                    seq.record(op)
                opt.record_step(seq)
            seq.eval()
            ticks = np.diff(np.array(seq.get_timestamps(), dtype=np.float64)).reshape(steps, ops_per_step)
            ns = ticks * float(mgr.get_device_properties().get("timestamp_period", 1.0))
            seq.destroy()
        finally:
            trainer.close()
    adapter.device_params = None
    per_step = np.median(ns, axis=0) / 1e6  # ms per op, median over the steps
    return {
        "rows_per_group": trainer.rows,
        "threads": threads,
        "ms_per_step": statistics.median(walls) * 1e3,
        "eval_ms_per_step": statistics.median(evals) * 1e3,
        "gpu_forward_backward_ms": float(per_step[0] + per_step[1]),
        "gpu_weight_grads_ms": float(per_step[2] + per_step[3]),
        "gpu_record_step_ms": float(per_step[app_ops:].sum()),
        "gpu_step_ms": float(per_step.sum()),
        "ops_per_step": ops_per_step,
    }


def _count_ops(mgr: Any, opt: Any) -> int:
    """Ops record_step adds to a sequence: the timestamps of a sequence holding one step (an
    update with the gradients at hand: every recorded step is evaluated once)."""
    seq = mgr.sequence(0, 64)
    opt.record_step(seq)
    seq.eval()
    count = len(seq.get_timestamps()) - 1
    seq.destroy()
    return count


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--rows", default="1,2,4", help="batch rows per workgroup, comma-separated")
    parser.add_argument("--threads", default="128,256,512,1024", help="threads per workgroup")
    parser.add_argument("--steps", type=int, default=100, help="steps per submission")
    parser.add_argument("--device", help="Vulkan device index or name substring")
    args = parser.parse_args()
    cfg = DemoConfig(layers=args.layers, dim=args.dim, batch=args.batch)
    cfg = dataclasses.replace(cfg, steps=args.steps * (REPEATS + 1))
    example = load_example()
    dev = open_device(args.device)
    results = []
    try:
        for rows in (int(r) for r in args.rows.split(",")):
            for threads in (int(t) for t in args.threads.split(",")):
                try:
                    row = measure(dev.manager, example, cfg, rows, threads, args.steps)
                except ValueError as exc:  # e.g. more shared memory than the example allows
                    row = {"rows_per_group": rows, "threads": threads, "skipped": str(exc)}
                print(json.dumps(row), flush=True)
                results.append(row)
    finally:
        dev.close()
    print(
        f"\n{dev.info.name}: {cfg.layers} blocks, dim {cfg.dim}, batch {cfg.batch}, "
        f"{args.steps} steps per submission\n"
    )
    print(
        "| rows | threads | ms/step | after recording "
        "| GPU: forward_backward | weight_grads | record_step | step |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        if "skipped" in r:
            print(f"| {r['rows_per_group']} | {r['threads']} | skipped: {r['skipped']} | | | | | |")
            continue
        print(
            f"| {r['rows_per_group']} | {r['threads']} "
            f"| {r['ms_per_step']:.3f} | {r['eval_ms_per_step']:.3f} "
            f"| {r['gpu_forward_backward_ms']:.3f} | {r['gpu_weight_grads_ms']:.3f} "
            f"| {r['gpu_record_step_ms']:.3f} | {r['gpu_step_ms']:.3f} |"
        )


if __name__ == "__main__":
    main()
