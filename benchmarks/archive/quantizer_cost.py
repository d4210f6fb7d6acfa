"""Where the 8-bit path's time goes: the AdamW shader rebuilt with parts of the harness's
per-value work taken out, or with another loop shape, timed side by side in one process.

    python benchmarks/archive/quantizer_cost.py [--elements 16777216 268435456] [--repeats 1]
        [--rounds 25] [--harness NAME=PATH ...] [--knobs NAME=VAR=VALUE[,...][@BUILD] ...]
        [--builds NAME ...] [--pipeline-stats benchmarks/archive/pipeline_stats/pipeline_stats]
        [--copy-elements 9586981 5991863] [--configs LABEL ...]

Each build compiles ``glsl/adam.comp`` (both SPIR-V variants) against a copy of the harness in
a temporary folder and runs it as an ``UpdateRule`` beside the built-in one:

* ``harness``: the installed harness, unchanged (the same code as the built-in AdamW);
* ``--harness NAME=PATH``: another harness file, e.g. an earlier release's
  (``git show REV:vk_adam/include/vk_adam_rule.glsl > old.glsl``);
* ``--knobs``: the installed harness (or the build named after ``@``) with loop-shape knobs
  set while its optimizer is built (``vk_adam/_optim/variants.py``);
* ablations, **timing only, their results are wrong by design**: ``no-dequant-lookup`` (a
  code's value computed as code/255 instead of read from the table), ``no-quantizer`` (a
  value's code taken from its top 8 bits instead of the bucket table), ``no-absmax`` (every
  block's scale 1, no reduction), all three, and all three in one pass of the grid
  (``VK_ADAM_INT8_WORKGROUPS=65535``: no workgroup loops);
* other shapes, same results: ``shared tables`` (the tables copied into shared memory by every
  workgroup, as before the 2026-12-02 harness), two blocks per subgroup per iteration
  (``VK_ADAM_INT8_VEC4S=2``, the earlier default), alone and with shared tables, ``fp16 SR
  general path`` (stochastic rounding to fp16 without the release's fast path for the normal
  range), ``lean quantizer`` (the bucket-table lookup in fewer instructions) and ``shared
  bucket tables`` (only the quantizer's tables in shared memory, the map values read in place);
* ``no SR hash`` (timing only): the stochastic-rounding counter used as its own random bits,
  what the per-value hash costs the 16-bit SR rows.

``--builds`` picks ablations and shapes by name (default: all). Every build's optimizer is made
first; then the builds take turns, ``--repeats`` steps each per round, for ``--rounds`` rounds, so
a change of the machine's speed during the run (another tenant on the GPU) touches all of them
alike. One JSON line per (build, format, size): GPU time of the update dispatch (Vulkan
timestamps): median, 10th percentile and minimum over every step, and each round's median.
``--pipeline-stats``: also what the driver reports of each build's pipeline (registers, shared
memory; ``benchmarks/archive/pipeline_stats``). ``--copy-elements``: also a copy of 28 B per element at
that size (the bytes of one fp32 AdamW step; pass 16/28 or 10/28 of a size for the 8-bit rows),
by the Vulkan copy shader and torch's device copy: the bandwidth a step could reach at most.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import vk_adam
from vk_adam._commands.bench.formats import CONFIGS, format_data
from vk_adam._rules.builtin import ADAMW
from vk_adam._rules.rule import UpdateRule
from vk_adam.shaderc import compile_shaders

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = Path(vk_adam.__file__).parent / "include"


def _replace_function(source: str, signature: str, body: str) -> str:
    """``source`` with the function that starts with ``signature`` given a new ``body``."""
    start = source.index(signature)
    open_brace = source.index("{", start)
    depth, i = 0, open_brace
    while True:
        depth += {"{": 1, "}": -1}.get(source[i], 0)
        if depth == 0:
            break
        i += 1
    return source[: open_brace + 1] + "\n    " + body + "\n" + source[i:]


def _edit_function(signature: str, body: str) -> Callable[[str], str]:
    return lambda text: _replace_function(text, signature, body)


def _in_shared_memory(text: str, declaration: str, copy_loop: str) -> tuple[str, int]:
    """``text`` with ``declaration`` (a shared array) after the tables' defines, and
    ``copy_loop`` run by every workgroup of an 8-bit step at the start of main(), behind a
    barrier; and how many of the two places were found (2 when both)."""
    text, declared = re.subn(
        r"^(#define VK_ADAM_MAP_WORDS .*\n)", lambda m: m.group(1) + declaration + "\n", text, flags=re.M
    )
    copy = f"    if (VK_ADAM_ANY_INT8) {{\n{copy_loop}        barrier();\n    }}\n"
    main = r"^(void main\(\) \{\n    const uint lid = gl_LocalInvocationID.x;\n)"
    text, copied = re.subn(main, lambda m: m.group(1) + copy, text, flags=re.M)
    return text, declared + copied


def _shared_tables(text: str) -> str:
    """The quantization tables copied into shared memory by every workgroup (behind a barrier)
    and read from there, as releases before 2026-12-02's harness did. Same results."""
    text, renamed = re.subn(r"^    uint vk_adam_tables\[\];$", "    uint vk_adam_qtable[];", text, flags=re.M)
    text, found = _in_shared_memory(
        text,
        "shared uint vk_adam_tables[2u * VK_ADAM_MAP_WORDS];",
        "        for (uint w = lid; w < 2u * VK_ADAM_MAP_WORDS; w += gl_WorkGroupSize.x) "
        "vk_adam_tables[w] = vk_adam_qtable[w];\n",
    )
    assert renamed == 1 and found == 2, "the harness's tables are not where this probe expects them"
    return text


def _shared_bucket_tables(text: str) -> str:
    """Only the quantizer's bucket tables (12 KiB of the 14) copied into shared memory by every
    workgroup, behind a barrier; the dequantizer's 2 x 256 map values still read in place.
    The quantizer's reads are scattered over 6 KiB per map; shared memory serves a scattered
    read in about as many cycles as the most lanes that hit one bank, the L1 cache in as many
    as the lines it touches. Same results."""
    text, read = re.subn(
        r"vk_adam_tables\[map \+ \(bucket >> 1\)\]",
        "vk_adam_buckets[(map == 0u ? 0u : VK_ADAM_TABLE_BUCKETS / 2u) + (bucket >> 1)]",
        text,
    )
    text, found = _in_shared_memory(
        text,
        "shared uint vk_adam_buckets[VK_ADAM_TABLE_BUCKETS];",
        "        for (uint w = lid; w < VK_ADAM_TABLE_BUCKETS; w += gl_WorkGroupSize.x) {\n"
        "            const uint words = VK_ADAM_TABLE_BUCKETS / 2u;  // per map\n"
        "            vk_adam_buckets[w] = vk_adam_tables[w < words ? w : w - words + VK_ADAM_MAP_WORDS];\n"
        "        }\n",
    )
    assert read == 1 and found == 2, "the harness's tables are not where this probe expects them"
    return text


#: fp16 stochastic rounding without the release's fast path for the normal fp16 range: every
#: value unpacked into exponent and mantissa and shifted by a variable count (the harness before
#: 2026-12-02's second release).
FP16_SR_GENERAL = _edit_function(
    "uint vk_adam_f16_stochastic(float f, uint r)",
    """uint u = floatBitsToUint(f);
    uint sign = (u >> 16) & 0x8000u;
    uint a = u & 0x7FFFFFFFu;
    if (a >= 0x7F800000u) {
        return sign | (a > 0x7F800000u ? 0x7E00u : 0x7C00u);
    }
    if (a < 0x00800000u) {
        return sign;
    }
    int e = int(a >> 23) - 127;
    uint mant = (a & 0x7FFFFFu) | 0x800000u;
    uint drop = uint(clamp(13 + max(0, -14 - e), 13, 31));
    uint kept = (mant + (r & ((1u << drop) - 1u))) >> drop;
    uint h = e >= -14 ? (uint(e + 14) << 10) + kept : kept;
    return sign | min(h, 0x7C00u);""",
)
#: The bucket-table quantizer in fewer instructions, same table: the clamp folded into the table
#: index, bitfield extracts for the entry and the value's position in its bucket, and "no
#: threshold" (position 0) folded into one unsigned comparison (0 - 1 wraps to the largest uint).
LEAN_QUANTIZER = _edit_function(
    "uint vk_adam_code_of(float a, uint map)",
    """uint bits = floatBitsToUint(a);
    const uint first = VK_ADAM_TABLE_FIRST_BUCKET;
    uint c = clamp(bits >> 16, first, first + VK_ADAM_TABLE_BUCKETS - 1u);
    uint word = vk_adam_tables[map + ((c - first) >> 1)];
    uint entry = bitfieldExtract(word, int((c & 1u) << 4), 16);  // FIRST_BUCKET is even
    return (entry & 0xFFu) + uint(bitfieldExtract(bits, 8, 8) > (entry >> 8) - 1u);""",
)
NO_DEQUANT = _edit_function(
    "float vk_adam_dequantize(uint c, bool signed_map)", "return float(c) * (1.0 / 255.0);"
)
NO_QUANT = _edit_function(
    "uint vk_adam_quantize(float x, bool signed_map)", "return floatBitsToUint(x) >> 24;"
)
NO_ABSMAX = _edit_function("vec4 vk_adam_subgroup_absmax(uvec4 b)", "return vec4(1.0);")
#: The stochastic-rounding stream's hash taken out (the counter itself as the random bits).
NO_SR_HASH = _edit_function("uint vk_adam_mix32(uint x)", "return x;")
ONE_PASS = {"VK_ADAM_INT8_WORKGROUPS": "65535"}
#: Builds that must give the release's bits (tests/test_benchmark_probes.py checks them).
SAME_RESULTS: dict[str, Callable[[str], str]] = {
    "shared tables": _shared_tables,
    "fp16 SR general path": FP16_SR_GENERAL,
    "lean quantizer": LEAN_QUANTIZER,
    "shared bucket tables": _shared_bucket_tables,
}
#: name: (edits of the harness's text, knobs set while it runs)
ABLATIONS: dict[str, tuple[list[Callable[[str], str]], dict[str, str]]] = {
    "no-dequant-lookup": ([NO_DEQUANT], {}),
    "no-quantizer": ([NO_QUANT], {}),
    "no-absmax": ([NO_ABSMAX], {}),
    "none of the three": ([NO_DEQUANT, NO_QUANT, NO_ABSMAX], {}),
    "none of the three, one pass": ([NO_DEQUANT, NO_QUANT, NO_ABSMAX], ONE_PASS),
    "shared tables": ([_shared_tables], {}),
    "fp16 SR general path": ([FP16_SR_GENERAL], {}),
    "lean quantizer": ([LEAN_QUANTIZER], {}),
    "shared bucket tables": ([_shared_bucket_tables], {}),
    "no SR hash": ([NO_SR_HASH], {}),
    "two blocks per subgroup": ([], {"VK_ADAM_INT8_VEC4S": "2"}),
    "shared tables, two blocks per subgroup": ([_shared_tables], {"VK_ADAM_INT8_VEC4S": "2"}),
}


def build_rule(name: str, harness: str, workdir: Path) -> UpdateRule:
    """AdamW running ``glsl/adam.comp`` compiled against ``harness`` (the harness's text)."""
    slug = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    folder = workdir / slug
    folder.mkdir()
    # The includer's own folder comes first in glslang's search for quoted includes, so these
    # copies win over the installed harness.
    for source in ("adam.comp", "adam_body.glsl"):
        shutil.copy(ROOT / "glsl" / source, folder / source)
    shutil.copy(INCLUDE / "vk_adam_16bit.glsl", folder / "vk_adam_16bit.glsl")
    (folder / "vk_adam_rule.glsl").write_text(harness)
    compile_shaders(folder, folder / "spirv", include_dirs=[folder])
    variants = dict(ADAMW.variants)
    variants["adam"] = dataclasses.replace(variants["adam"], spirv=str(folder / "spirv" / "adam.spv"))
    return dataclasses.replace(ADAMW, name=f"adamw_{slug}", variants=variants)


def builds(
    extra: list[str], workdir: Path, only: list[str] | None = None
) -> dict[str, tuple[UpdateRule, dict[str, str]]]:
    current = (INCLUDE / "vk_adam_rule.glsl").read_text()
    rules: dict[str, tuple[UpdateRule, dict[str, str]]] = {
        "harness": (build_rule("harness", current, workdir), {})
    }
    for item in extra:
        name, _, path = item.partition("=")
        rules[name] = (build_rule(name, Path(path).read_text(), workdir), {})
    for name, (edits, knobs) in ABLATIONS.items():
        if only is not None and name not in only:
            continue
        text = current
        for edit in edits:
            text = edit(text)
        rules[name] = (build_rule(name, text, workdir), knobs)
    return rules


def copy_rows(sizes: list[int], repeats: int, emit: Callable[[dict[str, object]], None]) -> None:
    from vk_adam._commands.bench.measure import cuda_copy_bandwidth, vulkan_copy_bandwidth
    from vk_adam._commands.bench.peers import cuda_available
    from vk_adam._runtime.runtime import Runtime

    rt = Runtime()
    for n in sizes:
        floats = 28 * n // 8  # a copy reads and writes 4 B per float: 28 B per AdamW element
        row: dict[str, object] = {"copy_of_adamw_step_elements": n, "bytes": 28 * n}
        vk = vulkan_copy_bandwidth(rt, floats, repeats)
        row |= {"vulkan_copy_GBps": round(vk / 1e9), "vulkan_copy_ms": round(28 * n / vk * 1e3, 4)}
        if cuda_available():
            cu = cuda_copy_bandwidth(floats, 50)
            row |= {"torch_copy_GBps": round(cu / 1e9), "torch_copy_ms": round(28 * n / cu * 1e3, 4)}
        emit(row)
    rt.close()


def pipeline_stats(tool: str, opt: Any, workdir: Path) -> dict[str, object]:
    """What the driver made of ``opt``'s update pipeline (benchmarks/archive/pipeline_stats): its
    statistics by name (NVIDIA: registers, shared memory, ...), or an "error"."""
    bset = opt._dev.groups[0].sets[0]
    spv = workdir / "stats.spv"
    spv.write_bytes(opt._dev.builder.shader(bset.spirv))
    words = ",".join(hex(w) for w in np.asarray(bset.spec, np.float32).view(np.uint32))
    run = subprocess.run([tool, "-s", words, str(spv)], capture_output=True, text=True, timeout=60)
    if not run.stdout.strip():
        return {"error": run.stderr.strip() or f"exit {run.returncode}"}
    report = json.loads(run.stdout)
    if "error" in report:
        return {"error": report["error"]}
    return {e["name"]: e["statistics"] for e in report["executables"]}


def time_builds(
    cfg: Any,
    n: int,
    rules: dict[str, tuple[UpdateRule, dict[str, str]]],
    repeats: int,
    rounds: int,
    stats_tool: str | None,
    workdir: Path,
) -> list[dict[str, object]]:
    """GPU ms of each build's step of ``cfg`` at ``n`` elements. Every build's optimizer is
    made first, then the builds take turns, ``repeats`` steps each per round, so a drift of the
    machine's speed during the run touches all of them alike."""
    from vk_adam._optim.optimizer import Optimizer

    p, g = format_data(cfg, n)
    opts: dict[str, Any] = {}
    rows: dict[str, dict[str, object]] = {}
    times: dict[str, list[float]] = {}
    try:
        for name, (rule, knobs) in rules.items():
            os.environ.update(knobs)  # read when the optimizer is built
            try:
                opt = Optimizer(
                    [p.copy()],
                    rule,
                    zero_grad=False,
                    profile=True,
                    lr=1e-4,
                    state_dtype=cfg.state_dtype,
                    stochastic_rounding=cfg.stochastic_rounding,
                )
            finally:
                for k in knobs:
                    del os.environ[k]
            opts[name] = opt
            opt.step([g])  # uploads the gradient once; later steps read it on the device
            for _ in range(3):
                opt.step()
            row: dict[str, object] = {"build": name, "config": cfg.label, "elements": n}
            row |= knobs | {"shader": Path(opt._dev.groups[0].sets[0].spirv).name}
            if stats_tool:
                row["pipeline"] = pipeline_stats(stats_tool, opt, workdir)
            rows[name], times[name] = row, []
        per_round: dict[str, list[float]] = {name: [] for name in opts}
        for _ in range(rounds):
            for name, opt in opts.items():
                ts = []
                for _ in range(repeats):
                    opt.step()
                    ts.append(opt.last_gpu_seconds * 1e3)
                times[name] += ts
                per_round[name].append(round(statistics.median(ts), 4))
        for name, row in rows.items():
            ts = sorted(times[name])
            row["gpu_ms"] = round(statistics.median(ts), 4)
            # Another tenant's work only ever adds time: the fastest steps are the uncontended.
            row["min_ms"], row["p10_ms"] = round(ts[0], 4), round(ts[len(ts) // 10], 4)
            row["round_medians_ms"] = per_round[name]
        return list(rows.values())
    finally:
        for opt in opts.values():
            opt.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--elements", type=int, nargs="+", default=[2**24, 2**28])
    parser.add_argument("--repeats", type=int, default=1, help="steps per build per round")
    parser.add_argument("--rounds", type=int, default=25, help="turns each build takes (interleaved)")
    parser.add_argument("--harness", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument(
        "--knobs",
        action="append",
        default=[],
        metavar="NAME=VAR=VALUE[,VAR=VALUE][@BUILD]",
        help="also time the installed harness (or BUILD) with these loop-shape knobs (variants.py)",
    )
    parser.add_argument("--builds", nargs="+", help="time only these builds (names as printed)")
    parser.add_argument("--pipeline-stats", metavar="TOOL", help="benchmarks/archive/pipeline_stats binary")
    parser.add_argument("--copy-elements", type=int, nargs="*", default=[])
    parser.add_argument(
        "--configs",
        nargs="+",
        default=[c.label for c in CONFIGS if c.state_dtype == "int8-blockwise"] + [CONFIGS[0].label],
        help="formats (labels of vk-adam bench --cases formats); default: every 8-bit one and fp32",
    )
    args = parser.parse_args()

    def emit(row: dict[str, object]) -> None:
        print(json.dumps(row), flush=True)

    copy_rows(args.copy_elements, max(args.repeats, 20), emit)
    with tempfile.TemporaryDirectory() as tmp:
        rules = builds(args.harness, Path(tmp), args.builds)
        for item in args.knobs:
            name, _, settings = item.partition("=")
            settings, _, base = settings.partition("@")
            knobs = dict(kv.split("=", 1) for kv in settings.split(","))
            rules[name] = (rules[base or "harness"][0], rules[base or "harness"][1] | knobs)
        for n in args.elements:
            for cfg in CONFIGS:
                if cfg.label not in args.configs:
                    continue
                int8 = cfg.state_dtype == "int8-blockwise"
                # The ablations touch only the 8-bit path; knobs and other harness files may
                # touch any.
                whole = {"harness", *(item.partition("=")[0] for item in args.harness)}
                chosen = {k: v for k, v in rules.items() if int8 or k in whole or v[1]}
                stats, work = args.pipeline_stats, Path(tmp)
                for row in time_builds(cfg, n, chosen, args.repeats, args.rounds, stats, work):
                    emit(row)


if __name__ == "__main__":
    main()
