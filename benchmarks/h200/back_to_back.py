"""Back-to-back AdamW steps on one fp32 param, ms per step: torch's fused AdamW against vk-adam's
steps recorded into kp sequences, three ways (docs/usage.md), and the host's time per record_step.

    python benchmarks/h200/back_to_back.py [--sizes 20,22,24,26] [--steps 100] [--repeats 10]
                                           [--batch 16] [--no-torch] [--out FILE.json]

Per size 2^k (one param of 2^k elements, its gradient on the device: vk-adam's in
``opt.grad_buffer()``, read by ``record_step(seq)``; AdamW lr=1e-4 and torch's other defaults;
vk-adam with zero_grad=False, so both keep the gradient), each figure the median
of --repeats runs of --steps steps after one untimed run:

* torch_events_ms: torch.optim.AdamW(fused=True) steps launched in a loop, timed by CUDA events;
  torch_wall_ms: the same loop on the host's clock, then torch.cuda.synchronize() (the bench's
  torch back-to-back figure).
* vk_gpu_ms: one synchronous vk-adam step's GPU time (Vulkan timestamps, ``profile=True``).
* vk_eval_only_ms: --steps steps recorded into one sequence beforehand; only ``seq.eval()`` timed.
* vk_record_submit_ms: ``seq.clear()``, --steps ``record_step`` calls, ``seq.eval()``, all timed
  (the bench's vk-adam back-to-back figure).
* vk_overlapped_ms: the same steps in batches of 1, 2, 4, ... --batch over two sequences, each
  submitted with ``eval_async()`` and the next recorded while the GPU runs it (docs/usage.md,
  "Recording while the GPU runs"), then both waited for.
* record_step_us: median host microseconds of one ``record_step`` call.

It runs on lavapipe too, with small sizes: ``--sizes 16,18 --no-torch``. torch is imported before
kp (on the H200 image the other order aborts the process). JSON goes to --out, a line per size
to stdout.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", default="20,22,24,26", help="exponents k of 2^k elements (default %(default)s)"
    )
    parser.add_argument("--steps", type=int, default=100, help="steps per timed run (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=10, help="timed runs per figure (default %(default)s)")
    parser.add_argument(
        "--batch", type=int, default=16, help="largest overlapped batch (default %(default)s)"
    )
    parser.add_argument("--no-torch", action="store_true", help="leave torch out (no CUDA, e.g. lavapipe)")
    parser.add_argument("--device", default=None, help="Vulkan device index or name substring")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    args.exponents = [int(k) for k in args.sizes.split(",") if k.strip()]
    return args


def median_ms(fn: Callable[[], Any], repeats: int, per: int) -> float:
    """Median wall ms of ``fn`` over ``repeats`` runs after one untimed, divided by ``per``."""
    fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e3 / per


def torch_figures(n: int, steps: int, repeats: int) -> dict[str, float]:
    import torch

    gen = torch.Generator(device="cuda").manual_seed(0)
    param = torch.nn.Parameter(torch.randn(n, device="cuda", generator=gen))
    param.grad = torch.randn(n, device="cuda", generator=gen)
    opt = torch.optim.AdamW([param], lr=1e-4, fused=True)

    def loop() -> None:
        for _ in range(steps):
            opt.step()

    for _ in range(3):
        loop()
    torch.cuda.synchronize()
    events = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        loop()
        end.record()
        torch.cuda.synchronize()
        events.append(start.elapsed_time(end) / steps)

    def loop_and_wait() -> None:
        loop()
        torch.cuda.synchronize()

    wall = median_ms(loop_and_wait, repeats, steps)
    return {"torch_events_ms": statistics.median(events), "torch_wall_ms": wall}


def overlapped(opt: Any, sequences: list[Any], steps: int, max_batch: int) -> None:
    """docs/usage.md's pattern: batches over two sequences, each recorded while the GPU runs
    the other's, submitted with eval_async(); both waited for at the end."""
    submitted = [False] * len(sequences)
    done, batch, i = 0, 1, 0
    while done < steps:
        seq = sequences[i]
        if submitted[i]:
            seq.eval_await()
        seq.clear()
        for _ in range(min(batch, steps - done)):
            opt.record_step(seq)
            done += 1
        seq.eval_async()
        submitted[i] = True
        i, batch = (i + 1) % len(sequences), min(2 * batch, max_batch)
    for seq, pending in zip(sequences, submitted, strict=True):
        if pending:
            seq.eval_await()


def vk_figures(mgr: Any, kp: Any, vk_adam: Any, n: int, args: argparse.Namespace) -> dict[str, float]:
    rng = np.random.default_rng(0)
    param = mgr.tensor(rng.standard_normal(n, dtype=np.float32))
    mgr.sequence().eval(kp.OpTensorSyncDevice([param]))
    opt = vk_adam.AdamW([param], manager=mgr, lr=1e-4, zero_grad=False, profile=True)
    grad = opt.grad_buffer()  # where an application's shaders write the gradient
    grad.data()[:] = rng.standard_normal(n, dtype=np.float32)
    mgr.sequence().eval(kp.OpTensorSyncDevice([grad]))
    steps, repeats = args.steps, args.repeats
    seq, other = mgr.sequence(), mgr.sequence()
    try:
        gpu = []
        for i in range(repeats + 3):
            opt.step()
            if i >= 3:
                gpu.append(opt.last_gpu_seconds * 1e3)
        opt.profile = False

        def record_batch(times: list[float] | None = None) -> None:
            seq.clear()
            for _ in range(steps):
                t0 = time.perf_counter()
                opt.record_step(seq)
                if times is not None:
                    times.append(time.perf_counter() - t0)

        record: list[float] = []
        eval_only = []
        for i in range(repeats + 1):
            record_batch(record)
            t0 = time.perf_counter()
            seq.eval()
            if i:
                eval_only.append((time.perf_counter() - t0) * 1e3 / steps)

        def record_submit() -> None:
            record_batch()
            seq.eval()

        return {
            "vk_gpu_ms": statistics.median(gpu),
            "vk_eval_only_ms": statistics.median(eval_only),
            "vk_record_submit_ms": median_ms(record_submit, repeats, steps),
            "vk_overlapped_ms": median_ms(
                lambda: overlapped(opt, [seq, other], steps, args.batch), repeats, steps
            ),
            "record_step_us": statistics.median(record) * 1e6,
        }
    finally:
        seq.destroy()
        other.destroy()
        opt.close()
        param.destroy()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch: Any = None
    if not args.no_torch:
        import torch as torch_module  # before kp: the other order aborts the process on the H200 image

        torch = torch_module

        if not torch.cuda.is_available():
            print("torch has no CUDA device: pass --no-torch", file=sys.stderr)
            return 2
    import kp

    import vk_adam

    handle = vk_adam.open_device(args.device)
    mgr = handle.manager
    meta: dict[str, Any] = {
        "device": handle.info.name,
        "kp": str(getattr(kp, "__version__", "unknown")),
        "vk_adam": vk_adam.__version__,
        "torch": None if torch is None else torch.__version__,
        "cuda_device": None if torch is None else torch.cuda.get_device_name(0),
        "host": platform.machine(),
        "python": platform.python_version(),
        "steps": args.steps,
        "repeats": args.repeats,
        "batch": args.batch,
        "command": " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    print(f"# {meta['device']} ({meta['kp']}); {args.steps} steps per run, median of {args.repeats}")
    print(
        "size | torch events | torch wall | vk GPU | vk eval-only | vk record+submit | vk overlapped | "
        "record_step us | torch wall / vk overlapped"
    )
    results: dict[str, dict[str, float]] = {}
    try:
        for k in args.exponents:
            row = vk_figures(mgr, kp, vk_adam, 2**k, args)
            if torch is not None:
                row.update(torch_figures(2**k, args.steps, args.repeats))
                row["torch_wall_over_vk_overlapped"] = row["torch_wall_ms"] / row["vk_overlapped_ms"]
                row["torch_wall_over_vk_record_submit"] = row["torch_wall_ms"] / row["vk_record_submit_ms"]
            results[f"2^{k}"] = row

            def f(key: str, r: dict[str, float] = row) -> str:
                return f"{r[key]:.4f}" if key in r else "-"

            ratio = row.get("torch_wall_over_vk_overlapped")
            print(
                f"2^{k} | {f('torch_events_ms')} | {f('torch_wall_ms')} | {f('vk_gpu_ms')} | "
                f"{f('vk_eval_only_ms')} | {f('vk_record_submit_ms')} | {f('vk_overlapped_ms')} | "
                f"{row['record_step_us']:.1f} | {'-' if ratio is None else f'{ratio:.3f}x'}",
                flush=True,
            )
    finally:
        handle.close()
    if args.out:
        Path(args.out).write_text(json.dumps({"meta": meta, "sizes": results}, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
