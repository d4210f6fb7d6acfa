"""Where a large fp32 step loses copy bandwidth: AdamW over kp tensors at a few sizes and tensor
counts, with the gradient zeroing on and off, under the loop-shape knobs of the path without
8-bit state. A probe for ``benchmarks/largest_step.py`` on cards with less memory than it needs.

    python benchmarks/h200/big_steps.py --out DIR [--configs 1x28 8x28 4x30] [--knobs 1 2 4]
        [--caps 0 1024 4096] [--zero-grad both|on|off]

A config ``PxE`` is P kp tensors of 2^E elements each. Each row: the median of ``--steps``
synchronous steps' update dispatches (Vulkan timestamps), and its share of the copy bandwidth
under each workgroup cap of ``--caps`` ($VK_ADAM_MAX_WORKGROUPS; 0: the default), counting the
bytes the step moves (28 per element, 32 with the gradient zeroing), against the
Vulkan copy shader (``copy_GBps``) and, where CUDA is present, torch's copy of 4 GiB (the
yardstick of largest_step.py), and the same copy sustained over as many bytes as the config's
step moves with the zeroing (``of_sustained_copy``). Writes DIR/big_steps.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

try:  # before kp: on the H200 image kp's import first breaks torch's
    import torch
except ImportError:  # pragma: no cover - the probe runs without torch too
    torch = None  # type: ignore[assignment]


def torch_copy_bandwidth(moved: int = 0) -> float | None:
    """Bytes per second of torch's device-to-device copy of 4 GiB, as largest_step.py measures;
    with ``moved``, of that copy repeated back to back over about ``moved`` bytes (sustained)."""
    if torch is None or not torch.cuda.is_available():
        return None
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from largest_step import copy_bandwidth  # type: ignore[import-not-found]

    return float(copy_bandwidth(moved))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--configs", nargs="+", default=["1x28", "8x28", "4x30"])
    ap.add_argument("--knobs", nargs="+", type=int, default=[1, 2, 4], help="$VK_ADAM_VEC4S values")
    ap.add_argument(
        "--caps", nargs="+", type=int, default=[0], help="$VK_ADAM_MAX_WORKGROUPS values (0: unset)"
    )
    ap.add_argument("--zero-grad", choices=["both", "on", "off"], default="both")
    ap.add_argument("--steps", type=int, default=7)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch_copy = torch_copy_bandwidth()

    import kp

    import vk_adam
    from vk_adam._commands.bench.measure import ClockWarmer, vulkan_copy_bandwidth
    from vk_adam._runtime import Runtime, copy_regions_op

    rt = Runtime()
    copy = vulkan_copy_bandwidth(rt, 2**26, 10)
    warmer = ClockWarmer(rt)
    mgr = rt.manager
    block = np.random.default_rng(0).standard_normal(1 << 24, dtype=np.float32)
    tile = mgr.tensor_t(block, tensor_type=kp.TensorTypes.host)
    rows: list[dict[str, Any]] = []
    torch_note = f", torch's copy {torch_copy / 1e9:.0f} GB/s" if torch_copy else ""
    print(f"copy shader {copy / 1e9:.0f} GB/s{torch_note}", flush=True)
    for config in args.configs:
        parts, log2 = (int(x) for x in config.split("x"))
        n = 1 << log2
        tensors = []
        for _ in range(parts):
            t = mgr.tensor_t(np.zeros(n, np.float32), tensor_type=kp.TensorTypes.storage)
            regions = [(0, at, min(block.nbytes, 4 * n - at)) for at in range(0, 4 * n, block.nbytes)]
            mgr.sequence().eval(copy_regions_op(tile, t, regions))
            tensors.append(t)
        sustained = torch_copy_bandwidth(32 * parts * n) if torch_copy else None
        if sustained:
            print(
                f"{config:6s} torch's copy sustained over {32 * parts * n / 1e9:.0f} GB: "
                f"{sustained / 1e9:.0f} GB/s"
            )
        zeros = {"both": (True, False), "on": (True,), "off": (False,)}[args.zero_grad]
        for vec4s, cap, zero in ((v, c, z) for v in args.knobs for c in args.caps for z in zeros):
            os.environ["VK_ADAM_VEC4S"] = str(vec4s)
            if cap:
                os.environ["VK_ADAM_MAX_WORKGROUPS"] = str(cap)
            else:
                os.environ.pop("VK_ADAM_MAX_WORKGROUPS", None)
            try:
                opt = vk_adam.AdamW(tensors, lr=1e-3, manager=mgr, profile=True, zero_grad=zero)
            except (vk_adam.DeviceCapabilityError, vk_adam.DeviceMemoryError) as exc:
                print(f"{config:6s} not on this device: {exc}", flush=True)
                rows.append(
                    {"config": config, "vec4s": vec4s, "cap": cap, "zero_grad": zero, "error": str(exc)}
                )
                continue
            try:
                times: list[float] = []
                for i in range(args.steps + 2):
                    warmer.warm()
                    opt.step()
                    if i >= 2 and opt.last_gpu_seconds is not None:
                        times.append(opt.last_gpu_seconds)
            finally:
                opt.close()
            ms = 1e3 * statistics.median(times)
            moved = (32 if zero else 28) * parts * n
            row = {
                "config": config,
                "elements": parts * n,
                "vec4s": vec4s,
                "cap": cap,
                "zero_grad": zero,
                "gpu_ms": ms,
                "of_copy_shader": moved / (ms / 1e3) / copy,
                "of_torch_copy": moved / (ms / 1e3) / torch_copy if torch_copy else None,
                "sustained_copy_GBps": sustained / 1e9 if sustained else None,
                "of_sustained_copy": moved / (ms / 1e3) / sustained if sustained else None,
            }
            rows.append(row)
            print(
                f"{config:6s} vec4s={vec4s} cap={cap or 'default':7} zero_grad={zero!s:5s} {ms:9.3f} ms  "
                f"{100 * row['of_copy_shader']:.1f}% of copy shader"
                + (f", {100 * row['of_torch_copy']:.1f}% of torch's copy" if torch_copy else "")
                + (f", {100 * row['of_sustained_copy']:.1f}% of it sustained" if sustained else ""),
                flush=True,
            )
        for t in tensors:
            t.destroy()
    os.environ.pop("VK_ADAM_VEC4S", None)
    os.environ.pop("VK_ADAM_MAX_WORKGROUPS", None)
    tile.destroy()
    warmer.close()
    rt.close()
    result = {"copy_GBps": copy / 1e9, "torch_copy_GBps": torch_copy and torch_copy / 1e9, "rows": rows}
    (args.out / "big_steps.json").write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
