"""The largest steps: one AdamW step on one param group of billions of elements, beside torch's
CUDA fused AdamW on the same element count, one after the other (memory freed in between).
Writes ``largest-fp32.json`` or ``largest-bf16-int8.json`` and prints it.

    python benchmarks/largest_step.py --elements 6442450944 --out DIR
    python benchmarks/largest_step.py --elements 8589934592 --bf16-int8 --out DIR

A Vulkan device allocates at most ``maxMemoryAllocationSize`` bytes at once (4,094 MiB on the
H200), so a group past that holds several params, each within one allocation, as a model's
weights are:

- fp32 rows: the group's params are ``--parts`` float32 kp storage tensors (device memory only)
  on vk-adam's device (the application's buffers; vk-adam's grad, exp_avg and exp_avg_sq per
  tensor are its own; its state holds no host staging copy either).
- ``--bf16-int8``: bfloat16 NumPy params (stochastic rounding) with int8-blockwise state; vk-adam
  packs them into buffer sets of at most one allocation each. torch's row is fused AdamW on
  bfloat16 params and state (torch has no 8-bit state).

torch steps the same parts as one list. Timings: median of ``--steps`` synchronous steps after
one warm-up; vk-adam's GPU time from Vulkan timestamps, torch's from CUDA events. Copy bandwidth:
torch's device-to-device copy of a 4 GiB tensor in the same run (``share_of_copy_bandwidth``),
and the same copy repeated back to back over as many bytes as vk-adam's step moves
(``share_of_sustained_copy``: the rate the GPU holds for as long as the step runs). Inputs are a
2^24-element random block repeated (drawing billions of normals on the host would take minutes;
the step's time does not depend on the values).
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


def copy_bandwidth(moved: int = 0) -> float:
    """Bytes per second of a device-to-device copy of 4 GiB (read + write counted). With
    ``moved``, of back-to-back copies of 4 GiB that move about ``moved`` bytes in one timed span:
    the copy sustained as long as a step that moves as much (a short copy may run at a rate the
    GPU does not hold for tens of milliseconds)."""
    src = torch.empty(1 << 30, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    once = 2 * src.numel() * src.element_size()
    copies = max(1, round(moved / once))
    times = []
    for _ in range(6 if copies == 1 else 4):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(copies):
            dst.copy_(src)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    del src, dst
    torch.cuda.empty_cache()
    return copies * once / statistics.median(times[1:])


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


def max_error_after_zero_grads(
    mgr: object, param: object, block: np.ndarray, opt: object, steps: int
) -> float:
    import kp

    from vk_adam._runtime import copy_regions_op, host_read_barrier_op

    n = 1 << 20
    out = mgr.tensor_t(np.zeros(n, np.float32), tensor_type=kp.TensorTypes.host)  # type: ignore[attr-defined]
    seq = mgr.sequence()  # type: ignore[attr-defined]
    seq.record(copy_regions_op(param, out, [(0, 0, 4 * n)]))
    seq.record(host_read_barrier_op([out]))
    seq.eval()
    group = opt.param_groups[0]  # type: ignore[attr-defined]
    want = block[:n].astype(np.float64) * (1 - group["lr"] * group["weight_decay"]) ** steps
    got = np.array(out.data(), np.float64)
    out.destroy()
    return float(np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-30)))


def vk_adam_step(n: int, parts: int, bf16: bool, steps: int) -> dict:
    import kp

    import vk_adam
    from vk_adam._runtime import copy_regions_op

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
        # The application's params: device memory only (storage tensors, no host staging copy,
        # as an application holding 24 GiB of weights would keep them), each filled by copies of
        # one block staged once.
        tile = mgr.tensor_t(block, tensor_type=kp.TensorTypes.host)
        for k in sizes:
            tensors.append(mgr.tensor_t(np.zeros(k, np.float32), tensor_type=kp.TensorTypes.storage))
            step = block.nbytes
            regions = [(0, at, min(step, 4 * k - at)) for at in range(0, 4 * k, step)]
            mgr.sequence().eval(copy_regions_op(tile, tensors[-1], regions))
        tile.destroy()
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
    check = None if bf16 else max_error_after_zero_grads(mgr, tensors[0], block, opt, steps + 1)
    row = {
        "gpu_ms": 1e3 * statistics.median(gpu),
        "wall_ms": 1e3 * statistics.median(wall),
        "dispatches_per_step": opt.dispatches_per_step(),
        "params": len(sizes),
        "build_s": built,
        # memory_bytes counts the params too: bf16 NumPy params' buffer sets, or the fp32 kp
        # tensors the group steps
        "device_bytes_per_param": memory["total"] / n,
        # fp32: vk-adam's own grad buffers hold zeros, so each AdamW step only decays the params
        # (p *= 1 - lr * weight_decay); the first 2^20 elements against that, float64
        "max_rel_error_first_mib": check,
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
    # bytes a step reads and writes per element: param read+write, grad read (vk-adam also zeroes
    # it), each state read+write; torch's bf16 row keeps bf16 state, vk-adam's int8 codes
    moved = {"torch": 14 if bf16 else 28, "vk_adam": 12 if bf16 else 32}
    bandwidth = copy_bandwidth() if cuda else None
    sustained = copy_bandwidth(moved["vk_adam"] * n) if cuda else None
    rows: dict = {
        "elements": n,
        "params": len(split(n, args.parts)),
        "format": "bf16 params + int8 state" if bf16 else "fp32",
    }
    rows["copy_GBps"] = bandwidth / 1e9 if bandwidth else None
    rows["sustained_copy_GBps"] = sustained / 1e9 if sustained else None
    try:
        rows["torch"] = torch_step(n, args.parts, bf16, args.steps) if cuda else {"error": "no CUDA device"}
    except Exception as exc:
        rows["torch"] = {"error": f"{type(exc).__name__}: {exc}"}
    print("torch:", rows["torch"], flush=True)
    try:
        rows["vk_adam"] = vk_adam_step(n, args.parts, bf16, args.steps)
    except Exception as exc:
        rows["vk_adam"] = {"error": f"{type(exc).__name__}: {exc}"}
    for key in ("torch", "vk_adam"):
        if "gpu_ms" in rows[key] and bandwidth:
            rows[key]["share_of_copy_bandwidth"] = moved[key] * n / (rows[key]["gpu_ms"] / 1e3) / bandwidth
            if sustained:
                rows[key]["share_of_sustained_copy"] = (
                    moved[key] * n / (rows[key]["gpu_ms"] / 1e3) / sustained
                )
    name = "largest-bf16-int8.json" if bf16 else "largest-fp32.json"
    (args.out / name).write_text(json.dumps(rows, indent=2))
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
