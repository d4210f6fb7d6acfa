"""One NumPy array larger than one device allocation: AdamW steps on a single fp32 param of
``--elements`` (default 1.25 * 2^30: 5 GiB, past the H200's 4,094 MiB ``maxMemoryAllocationSize``),
which vk-adam cuts into pieces of one buffer set each. Writes ``one-array.json`` and prints it.

    python benchmarks/one_array.py --out DIR

Every element is checked against float64: the param and the gradients are one random block of
2^24 elements repeated, so every repeat of the block follows the same float64 trajectory (AdamW
is elementwise); each repeat is compared with it after every step, piece boundaries included.
Timings: wall time of each synchronous ``opt.step([g])`` (the gradient and the param cross PCIe),
and the GPU time from Vulkan timestamps.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

BLOCK = 1 << 24


def filled(n: int, block: np.ndarray) -> np.ndarray:
    out = np.empty(n, np.float32)
    for at in range(0, n, block.size):
        out[at : at + block.size] = block[: n - at]
    return out


def max_error(param: np.ndarray, ref: np.ndarray) -> float:
    """Largest error of any element against the float64 block trajectory, relative to the
    param's scale (the block's largest magnitude)."""
    scale = float(np.max(np.abs(ref)))
    worst = 0.0
    for at in range(0, param.size, ref.size):
        got = param[at : at + ref.size]
        worst = max(worst, float(np.max(np.abs(got - ref[: got.size]))) / scale)
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--elements", type=int, default=(5 << 30) // 4)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    import vk_adam

    n = args.elements
    rng = np.random.default_rng(0)
    p_block = rng.standard_normal(BLOCK, dtype=np.float32)
    g_block = rng.standard_normal(BLOCK, dtype=np.float32)
    param, grad = filled(n, p_block), filled(n, g_block)
    lr, (b1, b2), eps, wd = 1e-3, (0.9, 0.999), 1e-8, 0.01
    ref = p_block.astype(np.float64)
    m, v = np.zeros_like(ref), np.zeros_like(ref)
    g64 = g_block.astype(np.float64)
    t0 = time.perf_counter()
    opt = vk_adam.AdamW([param], lr=lr, weight_decay=wd, profile=True)
    built = time.perf_counter() - t0
    internals = opt.internals()
    group = internals.groups[0]
    pieces = [(part.start, part.size) for part in group.slots[0].parts()]
    print(f"built in {built:.1f} s: {len(group.sets)} buffer sets, pieces {pieces}", flush=True)
    wall, gpu, errors = [], [], []
    for t in range(1, args.steps + 1):
        start = time.perf_counter()
        opt.step([grad])
        wall.append(time.perf_counter() - start)
        gpu.append(opt.last_gpu_seconds)
        ref *= 1 - lr * wd
        m = b1 * m + (1 - b1) * g64
        v = b2 * v + (1 - b2) * g64**2
        ref -= lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
        errors.append(max_error(param, ref))
        print(
            f"step {t}: wall {1e3 * wall[-1]:.1f} ms, gpu {1e3 * gpu[-1]:.2f} ms, max error {errors[-1]:.2e}",
            flush=True,
        )
    row = {
        "device": opt.device.name,
        "elements": n,
        "bytes_per_buffer": 4 * n,
        "max_allocation_bytes": internals.runtime.facts.max_allocation_bytes,
        "buffer_sets": len(group.sets),
        "pieces": pieces,
        "build_s": built,
        "wall_ms": [1e3 * w for w in wall],
        "gpu_ms": [1e3 * g for g in gpu],
        "median_wall_ms": 1e3 * statistics.median(wall),
        "max_error_per_step": errors,
        "memory_bytes": opt.memory_bytes(),
    }
    opt.close()
    text = json.dumps(row, indent=1)
    (args.out / "one-array.json").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
