"""Where a captured step's extra GPU time goes: its grid.

A captured update dispatch (``capturable=True``) runs a power-of-two grid of at most
``vk_adam._optim.clock.MAX_CLOCK_WORKGROUPS`` workgroups, the unit of the device's step count, and loops
over the rest; a push-constant dispatch runs as many workgroups as the elements need (up to the
device's cap). This times, for each size and each cap of the captured grid, one fp32 AdamW step
of each kind on kp tensors, alternately in one loop (so both run at the same GPU clock): GPU ms
from Vulkan timestamps around the update dispatch, medians.

    python benchmarks/h200/clock_grid.py [--sizes 20,24,26,28] [--caps 256,1024,4096,16384]
                                         [--repeats 30] [--out DIR]

One JSON line per (size, cap) on stdout and in DIR/clock_grid.json, then a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import numpy as np

import vk_adam
from vk_adam._optim import clock
from vk_adam._runtime import Runtime


def measure(rt: Runtime, n: int, cap: int, repeats: int) -> dict[str, Any]:
    clock.MAX_CLOCK_WORKGROUPS = cap  # read when a captured pipeline is made
    rng = np.random.default_rng(0)
    init = rng.standard_normal(n).astype(np.float32)
    tensors = [rt.buffer(init), rt.buffer(init), rt.buffer(rng.standard_normal(n).astype(np.float32))]
    rt.run([rt.upload_op(tensors)])
    a, b, g = tensors
    kw: dict[str, Any] = {"manager": rt.manager, "profile": True, "zero_grad": False, "lr": 1e-4}
    try:
        with vk_adam.AdamW([a], **kw) as push, vk_adam.AdamW([b], capturable=True, **kw) as captured:
            times: dict[str, list[float]] = {"push": [], "captured": []}
            for k in range(repeats + 5):
                for name, opt in (("push", push), ("captured", captured)):
                    opt.step([g])
                    if k >= 5:
                        assert opt.last_gpu_seconds is not None
                        times[name].append(opt.last_gpu_seconds * 1e3)
            steps = captured.state_dict()["state"][0]["step"]
    finally:
        for t in tensors:
            rt.free_buffer(t)
    push_ms, captured_ms = statistics.median(times["push"]), statistics.median(times["captured"])
    return {
        "elements": n,
        "cap": cap,
        "push_gpu_ms": push_ms,
        "captured_gpu_ms": captured_ms,
        "ratio": captured_ms / push_ms,
        "captured_steps_counted": int(steps),
        "captured_steps_run": repeats + 5,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="20,24,26,28", help="log2 of the element counts")
    parser.add_argument("--caps", default="256,1024,4096,16384", help="caps of the captured grid")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rt = Runtime()
    rows = []
    try:
        for log2 in (int(s) for s in args.sizes.split(",")):
            for cap in (int(c) for c in args.caps.split(",")):
                row = measure(rt, 1 << log2, cap, args.repeats)
                print(json.dumps(row), flush=True)
                rows.append(row)
    finally:
        rt.close()
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "clock_grid.json").write_text(json.dumps(rows, indent=2))
    print("\n| elements | captured grid cap | push GPU ms | captured GPU ms | captured / push |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| 2^{r['elements'].bit_length() - 1} | {r['cap']} | {r['push_gpu_ms']:.4f} | "
            f"{r['captured_gpu_ms']:.4f} | {r['ratio']:.3f}x |"
        )


if __name__ == "__main__":
    main()
