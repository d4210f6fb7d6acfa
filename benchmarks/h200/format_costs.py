"""Where the 8-bit rows' time goes: AdamW built against patched copies of the shader harness, each
timed against the release build, interleaved step by step, at 2^24 and 2^28 elements.

    python benchmarks/h200/format_costs.py --out DIR [--sizes 24 28] [--rounds 15]

Builds (each a copy of vk_adam/include with one part replaced; only ``release`` gives correct
results, the others are for timing):
  release        the harness as shipped (the map values in shared memory, the bucket entries
                 read in place)
  map-in-place   the map values read from the table buffer, through the L1 cache, as the
                 bucket entries are (the harness before format_costs.py measured the two)
  quant-arith    the quantizer without its bucket table: the decade by seven compares, the step
                 in it by one multiply (about the instructions an exact arithmetic quantizer needs)
  deq-arith      the dequantizer without its table: the decade from the code's top bit, the value
                 by a multiply-add and exp2
  no-tables      quant-arith and deq-arith: no table read at all
  bare           no-tables, and the rule's math replaced by one multiply-add per value: what the
                 harness's loads, stores, 16-bit conversions, rounding stream and block maxima
                 cost on their own (a floor with the same bytes and the same loop)
The bytes each step moves are those of ``vk-adam bench --cases formats`` (bytes_per_element); the
yardstick is the same copy shader (``copy_GBps``). Writes DIR/format_costs.json and prints a table.
Params on the device as in the formats bench (fp32: kp tensors; 16-bit: device_params=True). The
builds take turns step by step, each step after a moment of copies (``ClockWarmer``: the GPU at
a busy clock); the median of ``--rounds`` steps each.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]

DEQ = re.compile(
    r"float vk_adam_dequantize\(uint c, bool signed_map\) \{\n    return vk_adam_map_values\[.*?\];\n\}", re.S
)
CODE_OF = re.compile(r"uint vk_adam_code_of\(float a, uint map\) \{.*?\n\}", re.S)
LOAD_MAP = "        vk_adam_load_map_values();\n"
UPDATE_CALL = "vk_adam_update(P, vk_adam_load_grad(i, n) * vk_adam_grad_scale, S);"

DEQ_IN_PLACE = """float vk_adam_dequantize(uint c, bool signed_map) {
    return uintBitsToFloat(
        vk_adam_tables[(signed_map ? 0u : VK_ADAM_MAP_WORDS) + VK_ADAM_TABLE_BUCKETS / 2u + c]);
}"""
DEQ_ARITH = """float vk_adam_dequantize(uint c, bool signed_map) {
    uint m = signed_map ? (c >= 127u ? c - 127u : 127u - c) : c;
    uint i = uint(findMSB(max(m, 1u)));
    float k = float(m - (1u << i));
    float v = fma((k + 0.5) * exp2(-float(i)), 0.9, 0.1) * exp2(float(i) * 3.3219281 - 19.931569);
    return (signed_map && c < 127u) ? -v : v;
}"""
QUANT_ARITH = """uint vk_adam_code_of(float a, uint map) {
    const bool u = map != 0u;
    uint i = uint(a >= 1e-5) + uint(a >= 1e-4) + uint(a >= 1e-3) + uint(a >= 1e-2) + uint(a >= 1e-1)
        + uint(a >= 0.99);
    float decade = i == 0u ? 1e6 : i == 1u ? 1e5 : i == 2u ? 1e4 : i == 3u ? 1e3
        : i == 4u ? 1e2 : i == 5u ? 1e1 : 1.0;
    uint width = 1u << (i + (u ? 1u : 0u));
    float k = clamp((a * decade - 0.1) * (float(width) * 1.1111112), 0.0, float(width - 1u));
    uint code = width - 1u + uint(k);
    float lo = (floor(k) + 0.5) / decade, hi = (floor(k) + 1.5) / decade;
    return min(code + (a + a >= lo + hi ? 1u : 0u), 255u);
}"""
BARE_UPDATE = "P = fma(vk_adam_load_grad(i, n), vec4(HYPER(0)), P); S[0] = fma(S[0], vec4(0.5), P);"

#: (build, patches): each patch a (pattern or str, replacement); each must match once.
BUILDS: dict[str, list[tuple[Any, str]]] = {
    "release": [],
    "map-in-place": [(DEQ, DEQ_IN_PLACE), (LOAD_MAP, "")],
    "quant-arith": [(CODE_OF, QUANT_ARITH)],
    "deq-arith": [(DEQ, DEQ_ARITH), (LOAD_MAP, "")],
    "no-tables": [(CODE_OF, QUANT_ARITH), (DEQ, DEQ_ARITH), (LOAD_MAP, "")],
    "bare": [(CODE_OF, QUANT_ARITH), (DEQ, DEQ_ARITH), (LOAD_MAP, ""), (UPDATE_CALL, BARE_UPDATE)],
}

#: (label, param dtype, stochastic rounding, state dtype) as the formats bench's rows.
FORMATS = (
    ("fp32 params, int8 state", "float32", False, "int8-blockwise"),
    ("bf16 params + master, int8 state", "bfloat16", False, "int8-blockwise"),
    ("bf16 params (SR), int8 state", "bfloat16", True, "int8-blockwise"),
    ("fp16 params (SR), int8 state", "float16", True, "int8-blockwise"),
    ("bf16 params (SR), bf16 state", "bfloat16", True, "bfloat16"),
)


def patched(source: str, patches: list[tuple[Any, str]]) -> str:
    for pattern, replacement in patches:
        if isinstance(pattern, str):
            assert source.count(pattern) == 1, f"patch target not found once: {pattern[:60]!r}"
            source = source.replace(pattern, replacement)
        else:
            source, count = pattern.subn(replacement.replace("\\", "\\\\"), source)
            assert count == 1, f"patch target not found once: {pattern.pattern[:60]!r}"
    return source


def build_rules(work: Path) -> dict[str, Any]:
    """One AdamW rule per build, its SPIR-V compiled from a patched copy of the harness."""
    from vk_adam._rules import ADAMW
    from vk_adam.shaderc import INCLUDE_DIR, compile_shaders

    rules = {}
    for name, patches in BUILDS.items():
        src = work / name / "glsl"
        src.mkdir(parents=True)
        for f in ("adam.comp", "adam_amsgrad.comp", "adam_body.glsl"):
            shutil.copy(ROOT / "glsl" / f, src / f)
        shutil.copy(Path(INCLUDE_DIR) / "vk_adam_16bit.glsl", src / "vk_adam_16bit.glsl")
        harness = (Path(INCLUDE_DIR) / "vk_adam_rule.glsl").read_text()
        # included relative to the including file first, so this copy wins over INCLUDE_DIR
        (src / "vk_adam_rule.glsl").write_text(patched(harness, patches))
        compile_shaders(src, work / name / "spirv")
        variants = {
            k: replace(v, spirv=work / name / "spirv" / f"{v.spirv}.spv") for k, v in ADAMW.variants.items()
        }
        rules[name] = replace(ADAMW, name=f"adamw-{name}", variants=variants)
    return rules


def make(rule: Any, label: str, param_dtype: str, sr: bool, state: str, n: int, rt: Any) -> tuple[Any, Any]:
    from vk_adam import _formats as fmt
    from vk_adam._optim import Optimizer
    from vk_adam._runtime import host_view

    rng = np.random.default_rng(0)
    p = rng.standard_normal(n, dtype=np.float32)
    g = rng.standard_normal(n, dtype=np.float32) * 1e-2
    common: dict[str, Any] = dict(
        zero_grad=False, profile=True, lr=1e-4, state_dtype=state, stochastic_rounding=sr
    )
    if param_dtype == "float32":
        t = rt.buffer(p)
        rt.run([rt.upload_op([t])])
        opt = Optimizer([t], rule, manager=rt.manager, **common)
        grad = opt.grad_buffer(0, 0)
        host_view(grad)[:] = g
        rt.run([rt.upload_op([grad])])
        opt.step()
        return opt, t
    dtype = fmt.NUMPY_DTYPES[param_dtype]
    opt = Optimizer([p.astype(dtype)], rule, device_params=True, **common)
    opt.step([g.astype(dtype)])
    return opt, None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--sizes", type=int, nargs="+", default=[24, 28])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--builds", nargs="+", default=list(BUILDS))
    args = ap.parse_args()
    from vk_adam._commands.bench.formats import FormatConfig, bytes_per_element
    from vk_adam._commands.bench.measure import ClockWarmer, vulkan_copy_bandwidth
    from vk_adam._runtime import Runtime

    args.out.mkdir(parents=True, exist_ok=True)
    rt = Runtime()
    copy = vulkan_copy_bandwidth(rt, 2**26, 10) / 1e9
    # Each timed step follows a moment of copies: between steps the host works (a 16-bit row
    # copies its params out), and an idle GPU lowers its clock.
    warmer = ClockWarmer(rt)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        rules = build_rules(Path(tmp))
        for log2 in args.sizes:
            n = 2**log2
            for label, param_dtype, sr, state in FORMATS:
                builds = args.builds if state == "int8-blockwise" else ["release"]
                made = {b: make(rules[b], label, param_dtype, sr, state, n, rt) for b in builds}
                try:
                    samples: dict[str, list[float]] = {b: [] for b in builds}
                    for b in builds:
                        for _ in range(3):
                            made[b][0].step()
                    for _ in range(args.rounds):
                        for b in builds:
                            warmer.warm()
                            made[b][0].step()
                            samples[b].append(made[b][0].last_gpu_seconds * 1e3)
                finally:
                    for opt, t in made.values():
                        opt.close()
                        if t is not None:
                            rt.free_buffer(t)
                nbytes = bytes_per_element(FormatConfig(label, param_dtype, sr, state))
                base = statistics.median(samples["release"])
                for b in builds:
                    ms = statistics.median(samples[b])
                    row = {
                        "elements": n,
                        "format": label,
                        "build": b,
                        "gpu_ms": ms,
                        "min_ms": min(samples[b]),
                        "vs_release": ms / base,
                        "of_copy": nbytes * n / (ms * 1e-3) / 1e9 / copy,
                    }
                    results.append(row)
                    print(
                        f"2^{log2} {label:34s} {b:12s} {ms:8.4f} ms  {row['vs_release']:.3f}x  "
                        f"{100 * row['of_copy']:.0f}% of copy",
                        flush=True,
                    )
    warmer.close()
    rt.close()
    (args.out / "format_costs.json").write_text(json.dumps({"copy_GBps": copy, "rows": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
