"""Sweep the update shader's loop-shape knobs (vk_adam/_optim/variants.py) on one device.

    python benchmarks/knob_sweep.py [--repeats 10] [--elements N ...] [--rounds 2] [--only plain]

One AdamW step of one tensor per format and size (the formats of ``vk-adam bench --cases
formats``), GPU time of the update dispatch from Vulkan timestamps (median of ``--repeats``
steps), for each setting of the knobs that applies to it: ``VK_ADAM_SUBGROUPS``,
``VK_ADAM_INT8_VEC4S``, ``VK_ADAM_INT8_WORKGROUPS`` and ``VK_ADAM_WORKGROUP_SIZE`` for 8-bit
state, ``VK_ADAM_VEC4S`` and ``VK_ADAM_WORKGROUP_SIZE`` for the rest. ``--rounds 2`` runs every
setting twice, the second time in reverse order, so a slow spell does not favour one end. The
knobs are read when an optimizer is built, so one process sweeps them all and each tensor's host
data is made once. Results are bit-identical across settings (tests/test_subgroups.py);
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
] + [
    {
        "VK_ADAM_SUBGROUPS": "1",
        "VK_ADAM_INT8_VEC4S": "1",
        "VK_ADAM_INT8_WORKGROUPS": wg,
        "VK_ADAM_WORKGROUP_SIZE": t,
    }
    for t, wg in (("128", "4096"), ("512", "1024"), ("1024", "512"), ("1024", "1024"))
]
PLAIN_SETTINGS = [{"VK_ADAM_VEC4S": v} for v in ("1", "2", "4")] + [
    {"VK_ADAM_VEC4S": v, "VK_ADAM_WORKGROUP_SIZE": t}
    for v, t in (("1", "64"), ("1", "128"), ("1", "512"), ("1", "1024"), ("2", "512"), ("2", "1024"))
]
KNOBS = sorted({k for s in INT8_SETTINGS + PLAIN_SETTINGS for k in s})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--elements", type=int, nargs="+", default=[2**22, 2**24, 2**28])
    parser.add_argument("--rounds", type=int, default=1, help="passes over the settings (alternating order)")
    parser.add_argument("--only", choices=("all", "plain", "int8"), default="all", help="which formats")
    args = parser.parse_args()
    best: dict[tuple[str, int], tuple[float, dict[str, str]]] = {}
    for n in args.elements:
        for cfg in CONFIGS:
            int8 = cfg.state_dtype == "int8-blockwise"
            if (n < 2**24 and int8) or args.only == ("plain" if int8 else "int8"):
                continue  # the 8-bit targets are at 16.8M and 268M
            p, g = format_data(cfg, n)
            settings = INT8_SETTINGS if int8 else PLAIN_SETTINGS
            for r in range(args.rounds):
                for setting in settings if r % 2 == 0 else settings[::-1]:
                    for k in KNOBS:
                        os.environ.pop(k, None)
                    os.environ.update(setting)
                    times, shader, _ = time_format_step(cfg, p, g, args.repeats, 3)
                    ms = statistics.median(times) * 1e3
                    row = {"config": cfg.label, "elements": n, "round": r, **setting, "gpu_ms": round(ms, 4)}
                    row["shader"] = shader
                    print(json.dumps(row), flush=True)
                    key = (cfg.label, n)
                    if key not in best or ms < best[key][0]:
                        best[key] = (ms, setting)
            del p, g
    for k in KNOBS:
        os.environ.pop(k, None)
    for (label, n), (ms, setting) in best.items():
        print(json.dumps({"best": label, "elements": n, "gpu_ms": round(ms, 4), **setting}), flush=True)


if __name__ == "__main__":
    main()
