"""Where the 8-bit path's time goes: the AdamW shader rebuilt with parts of the harness's
per-value work taken out, timed side by side in one process.

    python benchmarks/quantizer_cost.py [--elements 16777216 268435456] [--repeats 10]
        [--harness NAME=PATH ...] [--copy-elements 4194304 16777216] [--configs LABEL ...]

Each build compiles ``glsl/adam.comp`` (both SPIR-V variants) against a copy of the harness in
a temporary folder and runs it as an ``UpdateRule`` beside the built-in one:

* ``harness``: the installed harness, unchanged (the same code as the built-in AdamW);
* ``--harness NAME=PATH``: another harness file, e.g. an earlier release's
  (``git show REV:vk_adam/include/vk_adam_rule.glsl > old.glsl``). A harness built before
  version 5 reads the layout-1 quantization tables, which the optimizer uploads for it, so its
  results are correct too;
* ablations, **timing only, their results are wrong by design**: ``no-dequant-lookup`` (a
  code's value computed as code/255 instead of read from the table), ``no-quantizer`` (a
  value's code taken from its top 8 bits instead of the bucket table), ``no-absmax`` (every
  block's scale 1, no reduction), all three, and all three in one pass of the grid
  (``VK_ADAM_INT8_WORKGROUPS=65535``: no workgroup loops);
* ``global tables``: the tables read from their buffer through the L1 cache instead of copied
  into shared memory by every workgroup (same results), also in one pass, and in one pass with
  all three ablations (what is left: the loop and the memory traffic).

GPU time of the update dispatch (Vulkan timestamps, median of ``--repeats`` steps) for each
8-bit format of ``vk-adam bench --cases formats`` and the fp32 row, at each size; one JSON
line per (build, format, size). ``--copy-elements``: also a copy of the bytes one fp32 AdamW
step moves at that size (28 B per element), by the Vulkan copy shader and torch's device copy:
the bandwidth a step of that size could reach at most.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

import vk_adam
from vk_adam._commands.bench.formats import CONFIGS, format_data, time_format_step
from vk_adam._rules.builtin import ADAMW
from vk_adam._rules.rule import UpdateRule
from vk_adam.shaderc import compile_shaders

ROOT = Path(__file__).resolve().parent.parent
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


def _global_tables(text: str) -> str:
    """Read the quantization tables from their buffer (through the L1 cache) instead of
    copying them into shared memory once per workgroup: no copy, no barrier before the loop."""
    text, declared = re.subn(
        r"^shared uint vk_adam_tables\[.*\];$", "#define vk_adam_tables vk_adam_qtable", text, flags=re.M
    )
    text, copied = re.subn(
        r"^\s*for \(uint w = lid;.*vk_adam_qtable\[w\];\n\s*barrier\(\);\n", "", text, flags=re.M
    )
    assert declared == copied == 1, "the harness's table copy is not where this probe expects it"
    return text


NO_DEQUANT = _edit_function(
    "float vk_adam_dequantize(uint c, bool signed_map)", "return float(c) * (1.0 / 255.0);"
)
NO_QUANT = _edit_function(
    "uint vk_adam_quantize(float x, bool signed_map)", "return floatBitsToUint(x) >> 24;"
)
NO_ABSMAX = _edit_function("vec4 vk_adam_subgroup_absmax(uvec4 b)", "return vec4(1.0);")
ONE_PASS = {"VK_ADAM_INT8_WORKGROUPS": "65535"}
#: name: (edits of the harness's text, knobs set while it runs)
ABLATIONS: dict[str, tuple[list[Callable[[str], str]], dict[str, str]]] = {
    "no-dequant-lookup": ([NO_DEQUANT], {}),
    "no-quantizer": ([NO_QUANT], {}),
    "no-absmax": ([NO_ABSMAX], {}),
    "none of the three": ([NO_DEQUANT, NO_QUANT, NO_ABSMAX], {}),
    "none of the three, one pass": ([NO_DEQUANT, NO_QUANT, NO_ABSMAX], ONE_PASS),
    "global tables": ([_global_tables], {}),
    "global tables, one pass": ([_global_tables], ONE_PASS),
    "global tables, none of the three, one pass": (
        [_global_tables, NO_DEQUANT, NO_QUANT, NO_ABSMAX],
        ONE_PASS,
    ),
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


def builds(extra: list[str], workdir: Path) -> dict[str, tuple[UpdateRule, dict[str, str]]]:
    current = (INCLUDE / "vk_adam_rule.glsl").read_text()
    rules: dict[str, tuple[UpdateRule, dict[str, str]]] = {
        "harness": (build_rule("harness", current, workdir), {})
    }
    for item in extra:
        name, _, path = item.partition("=")
        rules[name] = (build_rule(name, Path(path).read_text(), workdir), {})
    for name, (edits, knobs) in ABLATIONS.items():
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--elements", type=int, nargs="+", default=[2**24, 2**28])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--harness", action="append", default=[], metavar="NAME=PATH")
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

    copy_rows(args.copy_elements, args.repeats, emit)
    with tempfile.TemporaryDirectory() as tmp:
        rules = builds(args.harness, Path(tmp))
        for n in args.elements:
            for cfg in CONFIGS:
                int8 = cfg.state_dtype == "int8-blockwise"
                if cfg.label not in args.configs:
                    continue
                p, g = format_data(cfg, n)
                for name, (rule, knobs) in rules.items() if int8 else [("harness", rules["harness"])]:
                    os.environ.update(knobs)
                    try:
                        times, shader, _ = time_format_step(cfg, p, g, args.repeats, 3, rule=rule)
                    finally:
                        for k in knobs:
                            del os.environ[k]
                    ms = statistics.median(times) * 1e3
                    row = {"build": name, "config": cfg.label, "elements": n, "gpu_ms": round(ms, 4)}
                    emit(row | knobs | {"shader": Path(shader).name})
                del p, g


if __name__ == "__main__":
    main()
