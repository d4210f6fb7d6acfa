"""The largest steps: one AdamW step on one param group far past the old 2^30-element ceiling,
beside torch's CUDA fused AdamW on the same element count, one after the other (memory freed in
between). Writes ``largest.json`` and prints a table.

    python benchmarks/largest_step.py --elements 4294967296 --out DIR
    python benchmarks/largest_step.py --elements 4294967296 --bf16-int8 --out DIR

fp32 rows: the param is one float32 kp tensor on vk-adam's device (the application's buffer),
and vk-adam's grad, exp_avg and exp_avg_sq are its own buffers, bound in windows wherever a
buffer is larger than the device's maxStorageBufferRange. ``--bf16-int8``: bfloat16 NumPy
params (stochastic rounding) with int8-blockwise state; torch's row is fused AdamW on bfloat16
params and state (torch has no 8-bit state). Timings: median of ``--steps`` synchronous steps
after one warm-up; vk-adam's GPU time from Vulkan timestamps, torch's from CUDA events. Copy
bandwidth: torch's device-to-device copy of a 4 GiB tensor in the same run.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch  # before kp: on the H200 image kp's import first breaks torch's (KOMPUTE.md)


def copy_bandwidth() -> float:
    """Bytes per second of a device-to-device copy of 4 GiB (read + write counted)."""
    src = torch.empty(1 << 30, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    times = []
    for _ in range(6):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * 4 * (1 << 30) / statistics.median(times[1:])


def torch_step(n: int, bf16: bool, steps: int) -> dict:
    dtype = torch.bfloat16 if bf16 else torch.float32
    p = torch.nn.Parameter(torch.randn(n, dtype=dtype, device="cuda"))
    p.grad = torch.randn(n, dtype=dtype, device="cuda")
    opt = torch.optim.AdamW([p], lr=1e-3, fused=True)
    times = []
    for i in range(steps + 1):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        opt.step()
        end.record()
        torch.cuda.synchronize()
        if i:
            times.append(start.elapsed_time(end) / 1e3)
    memory = torch.cuda.max_memory_allocated()
    del opt, p
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    return {"gpu_ms": 1e3 * statistics.median(times), "device_bytes_per_param": memory / n}


def vk_adam_step(n: int, bf16: bool, steps: int) -> dict:
    import kp

    import vk_adam

    handle = vk_adam.open_device()
    mgr = handle.manager
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    if bf16:
        import ml_dtypes

        param = np.empty(n, ml_dtypes.bfloat16)
        grad = np.empty(n, ml_dtypes.bfloat16)
        for at in range(0, n, 1 << 28):
            param[at : at + (1 << 28)] = rng.standard_normal(min(1 << 28, n - at), np.float32)
            grad[at : at + (1 << 28)] = rng.standard_normal(min(1 << 28, n - at), np.float32)
        opt = vk_adam.AdamW(
            [param], lr=1e-3, state_dtype="int8-blockwise", stochastic_rounding=True, profile=True
        )
        grads = [grad]
    else:
        values = np.empty(n, np.float32)
        for at in range(0, n, 1 << 28):
            values[at : at + (1 << 28)] = rng.standard_normal(min(1 << 28, n - at), np.float32)
        param = mgr.tensor(values)
        del values
        mgr.sequence().eval(kp.OpTensorSyncDevice([param]))
        opt = vk_adam.AdamW([param], lr=1e-3, manager=mgr, profile=True)
        grad_buffer = opt.grad_buffer()
        grads = None
        # the gradient: written on the device by the optimizer's own buffer (zeros here would
        # skip nothing: the update reads and writes every element either way)
        del grad_buffer
    built = time.perf_counter() - t0
    gpu, wall = [], []
    for i in range(steps + 1):
        t = time.perf_counter()
        opt.step(grads)
        if i:
            wall.append(time.perf_counter() - t)
            gpu.append(opt.last_gpu_seconds)
    dispatches = opt._dev.dispatches_per_step()
    memory = sum(opt.memory_bytes().values()) + (0 if bf16 else 4 * n)
    opt.close()
    if not bf16:
        param.destroy()
    handle.close()
    return {
        "gpu_ms": 1e3 * statistics.median(gpu),
        "wall_ms": 1e3 * statistics.median(wall),
        "dispatches_per_step": dispatches,
        "build_s": built,
        "device_bytes_per_param": memory / n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--elements", type=int, default=1 << 32)
    parser.add_argument("--bf16-int8", action="store_true")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    n, bf16 = args.elements, args.bf16_int8
    cuda = torch.cuda.is_available()
    bandwidth = copy_bandwidth() if cuda else None
    rows: dict = {"elements": n, "format": "bf16 params + int8 state" if bf16 else "fp32"}
    rows["copy_GBps"] = bandwidth / 1e9 if bandwidth else None
    try:
        rows["torch"] = torch_step(n, bf16, args.steps) if cuda else {"error": "no CUDA device"}
    except Exception as exc:
        rows["torch"] = {"error": f"{type(exc).__name__}: {exc}"}
    try:
        rows["vk_adam"] = vk_adam_step(n, bf16, args.steps)
    except Exception as exc:
        rows["vk_adam"] = {"error": f"{type(exc).__name__}: {exc}"}
    # bytes a step reads and writes per element: param read+write, grad read (vk-adam also zeroes
    # it), each state read+write; torch's bf16 row keeps bf16 state, vk-adam's int8 codes
    moved = {"torch": 14 if bf16 else 28, "vk_adam": 12 if bf16 else 32}
    for key in ("torch", "vk_adam"):
        if "gpu_ms" in rows[key] and bandwidth:
            rows[key]["share_of_copy_bandwidth"] = moved[key] * n / (rows[key]["gpu_ms"] / 1e3) / bandwidth
    name = "largest-bf16-int8.json" if bf16 else "largest-fp32.json"
    (args.out / name).write_text(json.dumps(rows, indent=2))
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
