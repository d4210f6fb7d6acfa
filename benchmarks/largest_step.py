"""The largest steps: one AdamW step on one param group of billions of elements, beside torch's
CUDA fused AdamW on the same element count, one after the other (memory freed in between).
Writes ``largest-fp32.json`` or ``largest-bf16-int8.json`` and prints it.

    python benchmarks/largest_step.py --elements 6442450944 --out DIR
    python benchmarks/largest_step.py --elements 8589934592 --bf16-int8 --out DIR

A Vulkan device allocates at most ``maxMemoryAllocationSize`` bytes at once (4,094 MiB on the
H200), so a group past that holds several params, each within one allocation, as a model's
weights are:

- fp32 rows: the group's params are ``--parts`` float32 kp tensors on vk-adam's device (the
  application's buffers; vk-adam's grad, exp_avg and exp_avg_sq per tensor are its own).
- ``--bf16-int8``: bfloat16 NumPy params (stochastic rounding) with int8-blockwise state; vk-adam
  packs them into buffer sets of at most one allocation each. torch's row is fused AdamW on
  bfloat16 params and state (torch has no 8-bit state).

torch steps the same parts as one list. Timings: median of ``--steps`` synchronous steps after
one warm-up; vk-adam's GPU time from Vulkan timestamps, torch's from CUDA events. Copy bandwidth:
torch's device-to-device copy of a 4 GiB tensor in the same run. Inputs are a 2^24-element random
block repeated (drawing billions of normals on the host would take minutes; the step's time does
not depend on the values).
"""

from __future__ import annotations

import argparse
import faulthandler
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


def torch_step(n: int, parts: int, bf16: bool, steps: int) -> dict:
    dtype = torch.bfloat16 if bf16 else torch.float32
    sizes = split(n, parts)
    params = [torch.nn.Parameter(torch.randn(k, dtype=dtype, device="cuda")) for k in sizes]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(params, lr=1e-3, fused=True)
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
    del opt, params
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    return {"gpu_ms": 1e3 * statistics.median(times), "device_bytes_per_param": memory / n}


def split(n: int, parts: int) -> list[int]:
    """``parts`` sizes summing to ``n``, multiples of 2^20 but the last."""
    per = -(-n // parts) // (1 << 20) * (1 << 20) or n
    sizes = [per] * (n // per)
    return sizes + ([n - per * len(sizes)] if n % per else [])


def filled(n: int, dtype: object, block: np.ndarray) -> np.ndarray:
    """An ``n``-element array of ``dtype`` holding ``block`` over and over."""
    out = np.empty(n, dtype)  # type: ignore[call-overload]
    tile = block.astype(dtype)
    for at in range(0, n, tile.size):
        out[at : at + tile.size] = tile[: n - at]
    return out


def vk_adam_step(n: int, parts: int, bf16: bool, steps: int) -> dict:
    import kp

    import vk_adam

    handle = vk_adam.open_device()
    mgr = handle.manager
    rng = np.random.default_rng(0)
    block = rng.standard_normal(1 << 24, dtype=np.float32)
    sizes = split(n, parts)
    t0 = time.perf_counter()
    tensors: list = []
    print(f"vk-adam: {len(sizes)} params of {sizes[0]} elements", flush=True)
    if bf16:
        import ml_dtypes

        params = [filled(k, ml_dtypes.bfloat16, block) for k in sizes]
        grads = [filled(k, ml_dtypes.bfloat16, block[::-1]) for k in sizes]
        opt = vk_adam.AdamW(
            params, lr=1e-3, state_dtype="int8-blockwise", stochastic_rounding=True, profile=True
        )
        step_grads: list | None = grads
    else:
        for k in sizes:
            tensors.append(mgr.tensor(filled(k, np.float32, block)))
            mgr.sequence().eval(kp.OpTensorSyncDevice([tensors[-1]]))
        opt = vk_adam.AdamW(tensors, lr=1e-3, manager=mgr, profile=True)
        # the gradients: vk-adam's own grad buffers (zeros here would skip nothing: the update
        # reads and writes every element either way)
        step_grads = None
    built = time.perf_counter() - t0
    print(f"vk-adam: built in {built:.1f} s", flush=True)
    gpu, wall = [], []
    for i in range(steps + 1):
        t = time.perf_counter()
        opt.step(step_grads)
        if i:
            wall.append(time.perf_counter() - t)
            gpu.append(opt.last_gpu_seconds)
    memory = opt.memory_bytes()
    row = {
        "gpu_ms": 1e3 * statistics.median(gpu),
        "wall_ms": 1e3 * statistics.median(wall),
        "dispatches_per_step": opt.dispatches_per_step(),
        "params": len(sizes),
        "build_s": built,
        # memory_bytes counts the params too: bf16 NumPy params' buffer sets, or the fp32 kp
        # tensors the group steps
        "device_bytes_per_param": memory["total"] / n,
        "memory_bytes": memory,
    }
    opt.close()
    for t in tensors:
        t.destroy()
    handle.close()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--elements", type=int, default=6 << 30)
    parser.add_argument("--parts", type=int, default=8, help="params the group holds (default 8)")
    parser.add_argument("--bf16-int8", action="store_true")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    faulthandler.enable()  # a crash in a driver or kp still says where it was
    args.out.mkdir(parents=True, exist_ok=True)
    n, bf16 = args.elements, args.bf16_int8
    cuda = torch.cuda.is_available()
    bandwidth = copy_bandwidth() if cuda else None
    rows: dict = {
        "elements": n,
        "params": len(split(n, args.parts)),
        "format": "bf16 params + int8 state" if bf16 else "fp32",
    }
    rows["copy_GBps"] = bandwidth / 1e9 if bandwidth else None
    try:
        rows["torch"] = torch_step(n, args.parts, bf16, args.steps) if cuda else {"error": "no CUDA device"}
    except Exception as exc:
        rows["torch"] = {"error": f"{type(exc).__name__}: {exc}"}
    print("torch:", rows["torch"], flush=True)
    try:
        rows["vk_adam"] = vk_adam_step(n, args.parts, bf16, args.steps)
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
