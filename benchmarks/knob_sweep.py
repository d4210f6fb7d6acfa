"""Sweep the update shader's loop-shape knobs (vk_adam/_optim/variants.py) on one device.

    python benchmarks/knob_sweep.py [--repeats 10] [--quick]

One AdamW step of one tensor per format and size (the formats of ``vk-adam bench --cases
formats``), GPU time of the update dispatch from Vulkan timestamps (median of ``--repeats``
steps), for each setting of the knobs that applies to it: ``VK_ADAM_SUBGROUPS``,
``VK_ADAM_INT8_VEC4S`` and ``VK_ADAM_INT8_WORKGROUPS`` for 8-bit state, ``VK_ADAM_VEC4S`` for the
rest. The knobs are read when an optimizer is built, so one process sweeps them all and each
tensor's host data is made once. Results are bit-identical across settings (tests/test_subgroups.py);
only time changes. Prints one JSON line per (format, size, setting), then the best setting per
format and size.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

from vk_adam._commands.bench.formats import CONFIGS, format_data, time_format_step

INT8_SETTINGS = [
    {"VK_ADAM_SUBGROUPS": "0", "VK_ADAM_INT8_VEC4S": "2", "VK_ADAM_INT8_WORKGROUPS": "2048"},
    {"VK_ADAM_SUBGROUPS": "1", "VK_ADAM_INT8_VEC4S": "1", "VK_ADAM_INT8_WORKGROUPS": "2048"},
    {"VK_ADAM_SUBGROUPS": "1", "VK_ADAM_INT8_VEC4S": "2", "VK_ADAM_INT8_WORKGROUPS": "1024"},
    {"VK_ADAM_SUBGROUPS": "1", "VK_ADAM_INT8_VEC4S": "2", "VK_ADAM_INT8_WORKGROUPS": "2048"},
    {"VK_ADAM_SUBGROUPS": "1", "VK_ADAM_INT8_VEC4S": "2", "VK_ADAM_INT8_WORKGROUPS": "4096"},
    {"VK_ADAM_SUBGROUPS": "1", "VK_ADAM_INT8_VEC4S": "1", "VK_ADAM_INT8_WORKGROUPS": "8192"},
]
PLAIN_SETTINGS = [{"VK_ADAM_VEC4S": v} for v in ("1", "2", "4")]
KNOBS = sorted({k for s in INT8_SETTINGS + PLAIN_SETTINGS for k in s})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--elements", type=int, nargs="+", default=[2**22, 2**24, 2**28])
    args = parser.parse_args()
    best: dict[tuple[str, int], tuple[float, dict[str, str]]] = {}
    for n in args.elements:
        for cfg in CONFIGS:
            int8 = cfg.state_dtype == "int8-blockwise"
            if n < 2**24 and int8:
                continue  # the 8-bit targets are at 16.8M and 268M
            p, g = format_data(cfg, n)
            for setting in INT8_SETTINGS if int8 else PLAIN_SETTINGS:
                for k in KNOBS:
                    os.environ.pop(k, None)
                os.environ.update(setting)
                times, shader, _ = time_format_step(cfg, p, g, args.repeats, 3)
                ms = statistics.median(times) * 1e3
                row = {"config": cfg.label, "elements": n, **setting, "gpu_ms": round(ms, 4)}
                row["shader"] = shader
                print(json.dumps(row), flush=True)
                key = (cfg.label, n)
                if key not in best or ms < best[key][0]:
                    best[key] = (ms, setting)
            del p, g
    for (label, n), (ms, setting) in best.items():
        print(json.dumps({"best": label, "elements": n, "gpu_ms": round(ms, 4), **setting}), flush=True)


if __name__ == "__main__":
    main()
