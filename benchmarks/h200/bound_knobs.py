"""Does the update's loop shape change how fast it reads and writes NumPy arrays over PCIe?

    python benchmarks/h200/bound_knobs.py [--sizes 24,26] [--repeats 10] [--out DIR]

A lone float32 NumPy param's import is bound to the update shader (``_optim/host/to_device``): the
shader itself reads the param and the gradient from host memory and writes the param back. Its
loads are issued by the shader's threads, so how many are in flight depends on the loop shape:
``VK_ADAM_VEC4S`` (vec4s per thread per iteration), ``VK_ADAM_WORKGROUP_SIZE`` and
``VK_ADAM_MAX_WORKGROUPS`` (fewer workgroups loop over more elements each). For each setting,
one fp32 AdamW step on reused arrays, default and ``device_params=True``: wall time and the
update's GPU span (``profile=True``), medians. The knobs are read when an optimizer is built,
so one process sweeps them all. Writes ``bound_knobs.json`` with ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

import vk_adam
from vk_adam._commands.bench.timing import median_ms

SETTINGS = [
    {},
    {"VK_ADAM_VEC4S": "2"},
    {"VK_ADAM_VEC4S": "4"},
    {"VK_ADAM_WORKGROUP_SIZE": "1024"},
    {"VK_ADAM_VEC4S": "4", "VK_ADAM_WORKGROUP_SIZE": "1024"},
    {"VK_ADAM_MAX_WORKGROUPS": "4096"},
    {"VK_ADAM_MAX_WORKGROUPS": "1024"},
    {"VK_ADAM_MAX_WORKGROUPS": "256"},
    {"VK_ADAM_VEC4S": "4", "VK_ADAM_MAX_WORKGROUPS": "1024"},
]


def one(n: int, repeats: int, device_params: bool) -> dict[str, float | bool]:
    rng = np.random.default_rng(0)
    p = rng.standard_normal(n, dtype=np.float32)
    g = rng.standard_normal(n, dtype=np.float32)
    wall, gpu = [], []
    with vk_adam.AdamW([p], lr=1e-3, profile=True, device_params=device_params) as opt:
        for i in range(repeats + 3):
            opt.step([g])
            if i >= 3:
                wall.append((opt.last_host_seconds or 0.0) + (opt.last_gpu_seconds or 0.0))
                gpu.append(opt.last_gpu_seconds or 0.0)
        bound = bool(opt.internals().host_traffic.bound)
    return {"gpu_ms": round(median_ms(gpu), 4), "host+gpu_ms": round(median_ms(wall), 4), "bound": bound}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="24,26", help="log2 of the element counts")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rows = []
    for k in (int(s) for s in args.sizes.split(",")):
        for setting in SETTINGS:
            saved = {name: os.environ.get(name) for name in setting}
            os.environ.update(setting)
            try:
                for device_params in (False, True):
                    row = {"elements": f"2^{k}", "setting": setting, "device_params": device_params}
                    row.update(one(1 << k, args.repeats, device_params))
                    rows.append(row)
                    print(json.dumps(row), flush=True)
            finally:
                for name, value in saved.items():
                    if value is None:
                        os.environ.pop(name, None)
                    else:
                        os.environ[name] = value
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bound_knobs.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
