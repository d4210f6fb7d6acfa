"""Where the 8-bit rows' time goes: AdamW built against patched copies of the shader harness, each
timed against the release build, interleaved step by step, at 2^24 and 2^28 elements.

    python benchmarks/h200/format_costs.py --out DIR [--sizes 24 28] [--rounds 15]

Builds (each a copy of vk_adam/include with one part replaced; only ``release`` gives correct
results, the others are for timing):
  release        the harness as shipped (one table entry per float's top 16 bits, read in
                 place, the code one add and one shift from it, no clamp, ordered bits in the
                 signed map; the map values in shared memory)
  map-in-place   the map values read from the table buffer, through the L1 cache, as the
                 bucket entries are (the harness before format_costs.py measured the two)
  quant-arith    the quantizer without its bucket table: the decade by seven compares, the step
                 in it by one multiply (about the instructions an exact arithmetic quantizer needs)
  deq-arith      the dequantizer without its table: the decade from the code's top bit, the value
                 by a multiply-add and exp2
  no-tables      quant-arith and deq-arith: no table read at all
  bare           no-tables, and the rule's math replaced by one multiply-add per value: what the
                 harness's loads, stores, 16-bit conversions, rounding stream and block maxima
                 cost with no tables (the same bytes and the same loop; not a floor since
                 the table lookups cost less than no-tables' arithmetic)
  floor          the same loads, stores and loop with as little between them as each part
                 allows: trivial-quant, trivial-deq, no-hash, no-absmax, f16-fast and the rule's
                 math replaced by one multiply-add per value (the same bytes; what the loop and
                 its memory traffic cost alone: a bandwidth-only floor); wrong results,
                 for timing only
  clamped        the release's lookup with clamps before it, as a table of the buckets that
                 matter would need: the signed map's ordered bits clamped below -2 (one min), the
                 unsigned map's bits into 2**-23..2 (two); the same codes but for NaNs with
                 the sign bit set in the signed map (code 0, not 255)
  hash-per-value the rounding stream of harness 10, one hash per value (the release: one per two
                 values, 16 bits each): other random bits, for timing only
  trivial-quant  a quantizer of three instructions (the code a linear map of the value): what
                 any quantizer costs at least; wrong codes, for timing only
  trivial-deq    a dequantizer without the map: the code times 1/255 (no shared-memory read);
                 wrong values, for timing only
  no-hash        the rounding stream without its hash (the element's counter as the bits):
                 what the hash costs; biased rounding, for timing only
  no-absmax      every block's absmax 1 (no subgroup or shared-memory reduction, no per-value
                 largest |value|): what finding the block maxima costs; for timing only
  f16-fast       fp16 conversions by their fast paths alone (unpackHalf2x16 instead of the
                 exact bit conversion; the roundings of normal halves without the test per vec4
                 for the rest): what the exact handling of subnormals, inf and NaN costs; wrong
                 for those, for timing only
  f16-unpack     f16-fast's conversion in alone (unpackHalf2x16, unchecked)
  f16-untested   f16-fast's roundings out alone (no test per vec4)
Knob builds: the release under one of the loop-shape settings (bit-identical; variants.py):
  vec4s2 (VK_ADAM_INT8_VEC4S=2), wg1024 / wg4096 / wg8192 / wg16384 / wg32768 / wg131072
  (VK_ADAM_INT8_WORKGROUPS; the last one pass at 2^28 on 32-lane subgroups), wgsize128 /
  wgsize512 (VK_ADAM_WORKGROUP_SIZE).
Harness builds (``--harness NAME=PATH``, any number): another harness file whole, such as the
one of an earlier commit (``git show REV:vk_adam/include/vk_adam_rule.glsl``), or a unified diff
of the shipped harness (PATH ending in .diff or .patch, as a results folder keeps a candidate;
each hunk must match the shipped file exactly, no fuzz, or the script stops); they claim the
release's codes and ``--check`` compares them. A file of an older harness version runs with its
own version's table buffer (``TABLE_LAYOUTS``: version 9; version 10 has this one's table but a
hash per value in its rounding stream, so its stochastic-rounding rows differ from the release's
in ``--check``), its version mark set to this one's. ``--timing-harness NAME=PATH`` builds are
timed the same way and left out of ``--check`` (diagnostics that change results).
With ``--check``, each build that claims the release's codes (``EXACT``) is first compared with
the release, state and params bit for bit, after three steps at 2^16 + 3 elements in every row.
The bytes each step moves are those of ``vk-adam bench --cases formats`` (bytes_per_element); the
yardstick is the same copy shader (``copy_GBps``). Writes DIR/format_costs.json and prints a table.
Rows: the formats bench's rows with 8-bit state, and bf16 and fp16 params (SR) with bf16 state;
every build times every row but bf16 (SR) + bf16, which the release times alone.
Params on the device as in the formats bench (fp32: kp tensors; 16-bit: device_params=True). The
builds take turns step by step, each step after a moment of copies (``ClockWarmer``: the GPU at
a busy clock); the median of ``--rounds`` steps each.
"""

from __future__ import annotations

import argparse
import json
import os
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
QUANTIZE = re.compile(r"uint vk_adam_quantize\(float x, bool signed_map\) \{.*?\n\}", re.S)
LOAD_MAP = "        vk_adam_load_map_values();\n"
UPDATE_CALL = "vk_adam_update(P, vk_adam_load_grad(i, n) * vk_adam_grad_scale, S);"

DEQ_IN_PLACE = """float vk_adam_dequantize(uint c, bool signed_map) {
    return uintBitsToFloat(
        vk_adam_tables[(signed_map ? 0u : 256u) + c]);
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
}
uint vk_adam_quantize(float x, bool signed_map) {
    if (!signed_map) {
        return vk_adam_code_of(max(x, 0.0), 1u);
    }
    uint c = vk_adam_code_of(abs(x), 0u);
    return x < 0.0 ? 254u - min(c, 254u) : c;
}"""
# The release's lookup, its bits clamped first (entries at the clamp's edges give the same codes).
CLAMPED = """uint vk_adam_quantize(float x, bool signed_map) {
    uint bits = floatBitsToUint(x);
    if (!signed_map) {
        bits = uint(clamp(int(bits), 0x34000000, 0x3FFFFFFF));
        return (vk_adam_tables[VK_ADAM_UNSIGNED_ENTRIES + (bits >> 16)] + bits) >> 16;
    }
    bits ^= uint(floatBitsToInt(x) >> 31) & 0x7FFFFFFFu;
    bits = uint(max(int(bits), int(0xBFFFFFFFu)));
    return (vk_adam_tables[VK_ADAM_SIGNED_ENTRIES + (bits >> 16)] + bits) >> 16;
}"""
TRIVIAL_QUANT = """uint vk_adam_quantize(float x, bool signed_map) {
    return min(uint(abs(x) * 255.0), 255u);
}"""
TRIVIAL_DEQ = """float vk_adam_dequantize(uint c, bool signed_map) {
    return float(c) * (1.0 / 255.0);
}"""
NO_HASH = """    const uint h0 = key + first;
    const uint h1 = key + first + 2u;
"""
ABSMAX = """        const vec4 amax0 = vk_adam_subgroup_absmax(bits0);
        const vec4 amax1 = B > 1u ? vk_adam_subgroup_absmax(bits1) : vec4(0.0);
"""
NO_ABSMAX = """        const vec4 amax0 = vec4(1.0);
        const vec4 amax1 = vec4(1.0);
"""
SR_HASH = """    const uint h0 = vk_adam_mix32(key + first * 0x9E3779B9u);  // elements first and first + 1
    const uint h1 = vk_adam_mix32(key + (first + 2u) * 0x9E3779B9u);
    const uvec4 r = uvec4(h0, h0 >> 16, h1, h1 >> 16);  // the fast paths read the low 16 bits
"""
SR_HASH_PER_VALUE = """    uvec4 r;
    for (uint l = 0u; l < 4u; l++) {
        r[l] = vk_adam_mix32(key + (first + l) * 0x9E3779B9u);
    }
"""
# The exact fp16 conversion of a vec4, and its fast stand-in (subnormals may flush); the fp16
# roundings' tests for values off their fast paths, always true.
F16_EXACT = re.compile(r"vec4 vk_adam_f16x4_to_f32\(uvec2 w\) \{\n.*?\n\}", re.S)
F16_UNPACK = (
    "vec4 vk_adam_f16x4_to_f32(uvec2 w) {\n    return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));\n}"
)
F16_SR_ODD = (
    "        if (all(greaterThanEqual(abs(v), vec4(6.103515625e-05)))\n"
    "            && all(lessThanEqual(abs(v), vec4(65504.0)))) {\n"
)
F16_NEAREST_ODD = "        if (all(lessThan(a - 0x38800000u, uvec4(0x477FF000u - 0x38800000u)))) {\n"
# f16-fast's two halves: the conversion in unchecked, and the roundings out untested.
F16_IN: list[tuple[Any, str]] = [(F16_EXACT, F16_UNPACK)]
F16_OUT: list[tuple[Any, str]] = [
    (F16_SR_ODD, "        if (true) {\n"),
    (F16_NEAREST_ODD, "        if (true) {\n"),
]
BARE_UPDATE = "P = fma(vk_adam_load_grad(i, n), vec4(HYPER(0)), P); S[0] = fma(S[0], vec4(0.5), P);"

#: (build, patches): each patch a (pattern or str, replacement); each must match once.
BUILDS: dict[str, list[tuple[Any, str]]] = {
    "release": [],
    "map-in-place": [(DEQ, DEQ_IN_PLACE), (LOAD_MAP, "")],
    "quant-arith": [(QUANTIZE, QUANT_ARITH)],
    "deq-arith": [(DEQ, DEQ_ARITH), (LOAD_MAP, "")],
    "no-tables": [(QUANTIZE, QUANT_ARITH), (DEQ, DEQ_ARITH), (LOAD_MAP, "")],
    "bare": [
        (QUANTIZE, QUANT_ARITH),
        (DEQ, DEQ_ARITH),
        (LOAD_MAP, ""),
        (UPDATE_CALL, BARE_UPDATE),
    ],
    "floor": [
        (QUANTIZE, TRIVIAL_QUANT),
        (DEQ, TRIVIAL_DEQ),
        (LOAD_MAP, ""),
        (SR_HASH.split("    const uvec4 r")[0], NO_HASH),
        (ABSMAX, NO_ABSMAX),
        *F16_IN,
        *F16_OUT,
        (UPDATE_CALL, BARE_UPDATE),
    ],
    "clamped": [(QUANTIZE, CLAMPED)],
    "hash-per-value": [(SR_HASH, SR_HASH_PER_VALUE)],
    "trivial-quant": [(QUANTIZE, TRIVIAL_QUANT)],
    "trivial-deq": [(DEQ, TRIVIAL_DEQ), (LOAD_MAP, "")],
    "no-hash": [(SR_HASH.split("    const uvec4 r")[0], NO_HASH)],
    "no-absmax": [(ABSMAX, NO_ABSMAX)],
    "f16-fast": F16_IN + F16_OUT,
    "f16-unpack": F16_IN,
    "f16-untested": F16_OUT,
}
#: Builds from whole harness files (--harness NAME=PATH), filled in by main().
HARNESS_FILES: dict[str, Path] = {}
#: Builds that are the release under loop-shape settings (environment variables read when an
#: optimizer is made; bit-identical results).
KNOBS: dict[str, dict[str, str]] = {
    "vec4s2": {"VK_ADAM_INT8_VEC4S": "2"},
    "wg1024": {"VK_ADAM_INT8_WORKGROUPS": "1024"},
    "wg4096": {"VK_ADAM_INT8_WORKGROUPS": "4096"},
    "wg8192": {"VK_ADAM_INT8_WORKGROUPS": "8192"},
    "wg16384": {"VK_ADAM_INT8_WORKGROUPS": "16384"},
    "wg32768": {"VK_ADAM_INT8_WORKGROUPS": "32768"},
    "wg131072": {"VK_ADAM_INT8_WORKGROUPS": "131072"},
    "wgsize128": {"VK_ADAM_WORKGROUP_SIZE": "128"},
    "wgsize512": {"VK_ADAM_WORKGROUP_SIZE": "512"},
}
#: The builds whose codes are the release's (checked by --check).
EXACT = ["release", "map-in-place", "clamped", *KNOBS]


def tables_9() -> Any:
    """The table buffer of harness 9: per map (signed at word 0, unsigned at 3,328) one word per
    bucket of |x| (2**-23 to 2, a float's top 15 bits; the value's bits are clamped into them),
    then the 256 map values."""
    from vk_adam import _formats as fmt

    words = np.zeros(2 * (fmt.TABLE_BUCKETS + 256), np.uint32)
    bucket = np.arange(fmt.TABLE_BUCKETS, dtype=np.int64) + fmt.TABLE_FIRST_BUCKET
    for offset, signed in ((0, True), (fmt.TABLE_BUCKETS + 256, False)):
        code, threshold = fmt.bucket_codes(signed)
        entries = ((code << 16) + (0x10000 - threshold) - (bucket << 16)) & 0xFFFFFFFF
        words[offset : offset + fmt.TABLE_BUCKETS] = entries.astype(np.uint32)
        words[offset + fmt.TABLE_BUCKETS : offset + fmt.TABLE_BUCKETS + 256] = fmt.dynamic_map(signed).view(
            np.uint32
        )
    return words


#: The table buffers of older harness versions (harness-file builds of that version use them;
#: None: the release's).
TABLE_LAYOUTS = {9: tables_9, 10: None}
VERSION = re.compile(r"#define VK_ADAM_HARNESS_VERSION (\d+)")
MARK = re.compile(r"(layout\(constant_id = 31\) const uint VK_ADAM_HARNESS = )\d+u;")


HARNESS_PATH = "vk_adam/include/vk_adam_rule.glsl"
HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")


def applied(shipped: str, diff: str, name: str) -> str:
    """``shipped`` with the unified ``diff`` of it applied: every hunk's old lines (context and
    removed) must be the shipped file's at the hunk's line, exactly (a candidate made against
    another harness fails here, before any GPU work, instead of timing something else)."""
    lines = shipped.splitlines(keepends=True)
    out: list[str] = []
    at = 0  # lines of ``shipped`` consumed
    files = re.findall(r"^\+\+\+ (?:b/)?(\S+)", diff, re.M)
    if files != [HARNESS_PATH]:
        raise SystemExit(f"--harness {name}: the diff must change {HARNESS_PATH} alone (it changes {files})")
    hunks = re.split(r"^(?=@@ )", diff.split("\n+++ ", 1)[1].split("\n", 1)[1], flags=re.M)
    for hunk in (h for h in hunks if h.startswith("@@ ")):
        head, _, body = hunk.partition("\n")
        found = HUNK.match(head)
        if found is None:
            raise SystemExit(f"--harness {name}: not a hunk header: {head!r}")
        start = int(found.group(1)) - (0 if found.group(2) == "0" else 1)
        old: list[str] = []
        new: list[str] = []
        for line in body.splitlines(keepends=True):
            if line.startswith("\\"):  # "\ No newline at end of file"
                continue
            tag, text = line[:1], line[1:]
            if tag == "\n":  # a blank context line whose leading space an editor took off
                tag, text = " ", "\n"
            if tag in (" ", "-"):
                old.append(text)
            if tag in (" ", "+"):
                new.append(text)
            if tag not in (" ", "-", "+"):
                raise SystemExit(f"--harness {name}: unexpected line in hunk {head!r}: {line!r}")
        if start < at or lines[start : start + len(old)] != old:
            raise SystemExit(
                f"--harness {name}: hunk {head!r} does not match the shipped {HARNESS_PATH} (a diff of "
                "another harness version? make it against this one)"
            )
        out += lines[at:start] + new
        at = start + len(old)
    return "".join(out + lines[at:])


def harness_file(name: str) -> str:
    """A harness-file build's source (a diff applied to the shipped harness), its version mark
    set to this vk-adam's (the optimizer runs no other) and, for an older version, its table
    buffer registered in ``TABLES``."""
    from vk_adam._rules.spirv import HARNESS_VERSION
    from vk_adam.shaderc import INCLUDE_DIR

    path = HARNESS_FILES[name]
    text = path.read_text()
    if path.suffix in (".diff", ".patch"):
        text = applied((Path(INCLUDE_DIR) / "vk_adam_rule.glsl").read_text(), text, name)
    found = VERSION.search(text)
    version = int(found.group(1)) if found else 0
    if version != HARNESS_VERSION:
        if version not in TABLE_LAYOUTS:
            raise SystemExit(f"--harness {name}: harness version {version} has no table layout here")
        if TABLE_LAYOUTS[version] is not None:
            TABLES[name] = TABLE_LAYOUTS[version]
        text = VERSION.sub(f"#define VK_ADAM_HARNESS_VERSION {HARNESS_VERSION}", text)
        text, marked = MARK.subn(rf"\g<1>{HARNESS_VERSION}u;", text)
        assert marked == 1, f"--harness {name}: no version mark"
    return text


#: Builds whose table buffer differs from the release's.
TABLES: dict[str, Any] = {}

#: (label, param dtype, stochastic rounding, state dtype) as the formats bench's rows.
FORMATS = (
    ("fp32 params, int8 state", "float32", False, "int8-blockwise"),
    ("bf16 params + master, int8 state", "bfloat16", False, "int8-blockwise"),
    ("bf16 params (SR), int8 state", "bfloat16", True, "int8-blockwise"),
    ("fp16 params + master, int8 state", "float16", False, "int8-blockwise"),
    ("fp16 params (SR), int8 state", "float16", True, "int8-blockwise"),
    ("bf16 params (SR), bf16 state", "bfloat16", True, "bfloat16"),
    ("fp16 params (SR), bf16 state", "float16", True, "bfloat16"),
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


def build_rules(work: Path, names: list[str]) -> dict[str, Any]:
    """One AdamW rule per build, its SPIR-V compiled from a patched copy of the harness."""
    from vk_adam._rules import ADAMW
    from vk_adam.shaderc import INCLUDE_DIR, compile_shaders

    rules = {}
    for name in dict.fromkeys(n for n in names if n not in KNOBS):
        src = work / name / "glsl"
        src.mkdir(parents=True)
        for f in ("adam.comp", "adam_amsgrad.comp", "adam_body.glsl"):
            shutil.copy(ROOT / "glsl" / f, src / f)
        shutil.copy(Path(INCLUDE_DIR) / "vk_adam_16bit.glsl", src / "vk_adam_16bit.glsl")
        if name in HARNESS_FILES:
            harness = harness_file(name)
        else:
            harness = patched((Path(INCLUDE_DIR) / "vk_adam_rule.glsl").read_text(), BUILDS[name])
        # included relative to the including file first, so this copy wins over INCLUDE_DIR
        (src / "vk_adam_rule.glsl").write_text(harness)
        compile_shaders(src, work / name / "spirv")
        variants = {
            k: replace(v, spirv=work / name / "spirv" / f"{v.spirv}.spv") for k, v in ADAMW.variants.items()
        }
        rules[name] = replace(ADAMW, name=f"adamw-{name}", variants=variants)
    rules.update({name: rules["release"] for name in names if name in KNOBS})
    return rules


def make(
    rule: Any, build: str, param_dtype: str, sr: bool, state: str, inputs: tuple[Any, Any], rt: Any
) -> tuple[Any, Any]:
    """The row's optimizer with ``build``'s rule (and table buffer), after one step; and its
    fp32 params' kp tensor (None for 16-bit params, held by the optimizer)."""
    from vk_adam import _formats as fmt
    from vk_adam._optim import Optimizer
    from vk_adam._runtime import host_view

    p, g = inputs
    common: dict[str, Any] = dict(
        zero_grad=False, profile=True, lr=1e-4, state_dtype=state, stochastic_rounding=sr
    )
    release_tables = fmt.quant_tables
    if build in TABLES:
        fmt.quant_tables = TABLES[build]  # read once, when the optimizer is made
    knobs = KNOBS.get(build, {})
    saved = {k: os.environ.get(k) for k in knobs}
    os.environ.update(knobs)  # read when the optimizer is made
    try:
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
    finally:
        fmt.quant_tables = release_tables
        for k, v in saved.items():
            if v is None:
                del os.environ[k]
            else:
                os.environ[k] = v


def inputs_of(n: int) -> tuple[Any, Any]:
    rng = np.random.default_rng(0)
    return rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32) * 1e-2


def snapshot(opt: Any, t: Any, rt: Any) -> list[Any]:
    """Everything a step wrote, as raw bytes: the state (codes and block maxima) and params."""
    from vk_adam._runtime import host_view

    state = opt.state_dict()["state"]
    out = [
        np.asarray(v).tobytes()
        for s in state.values()
        for _, v in sorted(s.items())
        if isinstance(v, np.ndarray)
    ]
    if t is not None:
        rt.run([rt.download_op([t])])
        out.append(host_view(t).tobytes())
    else:
        out.append(np.asarray(opt.param_groups[0]["params"][0]).tobytes())
    return out


def check(rules: dict[str, Any], builds: list[str], rt: Any) -> list[str]:
    """Builds in ``EXACT`` whose state or params differ from the release's after three steps."""
    differ = []
    inputs = inputs_of(2**16 + 3)
    for label, param_dtype, sr, state in FORMATS:
        exact = [b for b in dict.fromkeys(["release", *builds]) if b in EXACT]
        made = {b: make(rules[b], b, param_dtype, sr, state, inputs, rt) for b in exact}
        try:
            for opt, _ in made.values():
                opt.step()
                opt.step()
            ref = snapshot(*made["release"], rt)
            for b in exact:
                same = snapshot(*made[b], rt) == ref
                print(f"check {label:34s} {b:14s} {'same bits' if same else 'DIFFERENT'}", flush=True)
                if not same:
                    differ.append(f"{b}: {label}")
        finally:
            for opt, t in made.values():
                opt.close()
                if t is not None:
                    rt.free_buffer(t)
    return differ


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--sizes", type=int, nargs="+", default=[24, 28])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--builds", nargs="+", default=list(BUILDS), choices=[*BUILDS, *KNOBS])
    ap.add_argument("--harness", nargs="*", default=[], metavar="NAME=PATH", help="harness-file builds")
    ap.add_argument(
        "--timing-harness",
        nargs="*",
        default=[],
        metavar="NAME=PATH",
        help="harness-file builds for timing only (other results; --check leaves them out)",
    )
    ap.add_argument("--check", action="store_true", help="first compare the EXACT builds' bits")
    args = ap.parse_args()
    for option, specs in (("--harness", args.harness), ("--timing-harness", args.timing_harness)):
        for spec in specs:
            name, _, path = spec.partition("=")
            if not path or not Path(path).is_file():
                ap.error(f"{option} {spec!r}: expected NAME=PATH of a harness file or a diff of it")
            HARNESS_FILES[name] = Path(path)
            if option == "--harness":
                EXACT.append(name)
            args.builds.append(name)
    from vk_adam._commands.bench.formats import FormatConfig, bytes_per_element
    from vk_adam._commands.bench.measure import ClockWarmer, vulkan_copy_bandwidth
    from vk_adam._runtime import Runtime
    from vk_adam.shaderc import INCLUDE_DIR

    # Every patched build's targets before any GPU work: a patch the harness has outgrown fails
    # here, in a second, not after the copy yardstick on a device machine.
    shipped = (Path(INCLUDE_DIR) / "vk_adam_rule.glsl").read_text()
    for name in dict.fromkeys(args.builds):
        if name in BUILDS and name != "release" and patched(shipped, BUILDS[name]) == shipped:
            ap.error(f"build {name!r} changes nothing in the harness")
    for name in HARNESS_FILES:
        harness_file(name)  # a diff that does not apply stops here

    args.out.mkdir(parents=True, exist_ok=True)
    rt = Runtime()
    copy = vulkan_copy_bandwidth(rt, 2**26, 10) / 1e9
    # Each timed step follows a moment of copies: between steps the host works (a 16-bit row
    # copies its params out), and an idle GPU lowers its clock.
    warmer = ClockWarmer(rt)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        rules = build_rules(Path(tmp), ["release", *args.builds])
        if args.check:
            differ = check(rules, args.builds, rt)
            if differ:
                print("builds whose bits differ from the release's:", "; ".join(differ))
                return 1
        for log2 in args.sizes:
            n = 2**log2
            inputs = inputs_of(n)
            for label, param_dtype, sr, state in FORMATS:
                # Every build where it can differ: 8-bit state, or fp16 params (the harness's
                # fp16 conversions); bf16 params with bf16 state, the 16-bit reference, alone.
                compared = state == "int8-blockwise" or param_dtype == "float16"
                builds = list(dict.fromkeys(["release", *args.builds])) if compared else ["release"]
                made = {b: make(rules[b], b, param_dtype, sr, state, inputs, rt) for b in builds}
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
