"""Storage formats of params, gradients and optimizer state: pure NumPy, no Vulkan device.

The shader harness (``vk_adam/include/vk_adam_rule.glsl``) stores values in these formats and
this module is their host side: the names users pass, the 8-bit dynamic quantization map, the
rounding (nearest-even and stochastic) and the random stream, written so that the float64
reference (``vk_adam.testing``) applies *exactly* the same quantization and rounding as the GPU.

* Params and gradients: ``float32``, ``float16`` (NumPy's) or ``bfloat16`` (``ml_dtypes``, the
  dtype JAX uses). 16-bit values are packed two per 32-bit word on the device. A 16-bit param
  either keeps an fp32 master copy on the device (default) or takes each update by stochastic
  rounding (no master copy), with random bits from a counter-based hash of (seed, buffer, step,
  element): the same seed and step give the same bits, so a resumed run is bit-identical.
* State: ``float32``; ``bfloat16`` (nearest-even); ``int8-blockwise`` (Dettmers et al., "8-bit
  Optimizers via Block-wise Quantization"): blocks of :data:`BLOCK` values, one fp32 absmax per
  block, codes into a dynamic map (signed, or unsigned for state a rule declares non-negative,
  such as Adam's second moment). Buffers under :data:`INT8_MIN_ELEMENTS` elements keep fp32
  state, as bitsandbytes does for small tensors.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import numpy.typing as npt

__all__ = [
    "BLOCK",
    "INT8_MIN_ELEMENTS",
    "PARAM_DTYPES",
    "STATE_DTYPES",
    "dynamic_map",
    "thresholds",
]

F32 = npt.NDArray[np.float32]
U32 = npt.NDArray[np.uint32]

PARAM_DTYPES = ("float32", "float16", "bfloat16")
STATE_DTYPES = ("float32", "bfloat16", "int8-blockwise")
#: Values per quantization block (one fp32 absmax each).
BLOCK = 256
#: Buffers with fewer elements keep fp32 state under ``int8-blockwise`` (bitsandbytes' default).
INT8_MIN_ELEMENTS = 4096

BFLOAT16: np.dtype[Any] = np.dtype(ml_dtypes.bfloat16)
NUMPY_DTYPES: dict[str, np.dtype[Any]] = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": BFLOAT16,
}

# Specialization-constant values the harness reads (glsl: VK_ADAM_PARAM_FORMAT etc.).
PARAM_FORMAT = {"float32": 0, "float16": 1, "bfloat16": 2}
MODE_PLAIN, MODE_MASTER, MODE_STOCHASTIC = 0, 1, 2
STATE_F32, STATE_BF16, STATE_INT8_SIGNED, STATE_INT8_UNSIGNED = 0, 1, 2, 3


def dtype_name(dtype: Any) -> str | None:
    """``"float32"``, ``"float16"`` or ``"bfloat16"`` for a param dtype vk-adam stores, else None."""
    dt = np.dtype(dtype)
    for name, known in NUMPY_DTYPES.items():
        if dt == known:
            return name
    return None


def bytes_per_element(name: str) -> int:
    return 4 if name == "float32" else 2


# -- the dynamic map -------------------------------------------------------------------------


def dynamic_map(signed: bool) -> F32:
    """The 256 values of the 8-bit dynamic (tree) quantization map, ascending, in [-1, 1].

    Dettmers' construction, as bitsandbytes' ``create_dynamic_map(signed, 7, 8)``: decade ``i``
    (0..6) holds ``2**i`` (signed, per sign) or ``2**(i+1)`` (unsigned) values at the centres of
    equal steps over ``[0.1, 1] * 10**(i-6)``, plus 0 and 1. Codes are indices into this table.
    """
    values: list[float] = [0.0, 1.0]
    for i in range(7):
        n = 2**i if signed else 2 ** (i + 1)
        edges = np.linspace(0.1, 1.0, n + 1)
        means = (edges[:-1] + edges[1:]) / 2.0 * 10.0 ** (i - 6)
        values += means.tolist()
        if signed:
            values += (-means).tolist()
    assert len(values) == 256
    return np.asarray(sorted(values), np.float64).astype(np.float32)


def thresholds(table: F32) -> F32:
    """Decision thresholds of a map: ``t[k]`` between codes ``k`` and ``k+1`` (255 of them,
    padded with +inf to 256), the midpoints. The nearest value's code is ``#{k: x >= t[k]}``;
    the quantizer rounds each threshold up to 1/256 of its bucket (``_codes_of_normalized``)."""
    t = ((table[:-1].astype(np.float64) + table[1:].astype(np.float64)) / 2.0).astype(np.float32)
    return np.append(t, np.float32(np.inf))


_MAPS = {True: dynamic_map(True), False: dynamic_map(False)}
_THRESHOLDS = {k: thresholds(v) for k, v in _MAPS.items()}


#: The quantizer's buckets: |x| from 2**-23 to 2 in steps of 1/128 of a binade (a float32's
#: top 15 bits), each holding at most one decision threshold of either map.
TABLE_BUCKETS = 24 * 128
TABLE_FIRST_BUCKET = 104 << 7  # float32 bits >> 16 of 2**-23: below it every value is zero
#: A bucket entry's threshold when its bucket holds none: above every value's low 16 bits.
NO_THRESHOLD = 0x10000
#: float32 bits of the first and last value the buckets hold: the codes of the values outside
#: them are those of these two (tiny values, and values past 2 or NaN, take the first and last
#: bucket's code; a negative value, -0.0 included, is below every bucket: the unsigned map's
#: code 0).
BITS_FIRST = TABLE_FIRST_BUCKET << 16
BITS_LAST = ((TABLE_FIRST_BUCKET + TABLE_BUCKETS) << 16) - 1
#: Words of the quantization-table buffer: the 256 values of each map (signed, then unsigned),
#: then per map (signed, then unsigned) one entry per float32's top 16 bits.
MAP_VALUES = 256
ENTRIES = 1 << 16
SIGNED_ENTRIES = 2 * MAP_VALUES
UNSIGNED_ENTRIES = SIGNED_ENTRIES + ENTRIES
TABLE_WORDS = UNSIGNED_ENTRIES + ENTRIES


def bucket_codes(signed: bool) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Per bucket of |x| of a map: the code at its lower edge, and its threshold: the smallest
    low 16 bits of a float32 in the bucket that takes the next code (the threshold's bits 15..8
    rounded up, times 256), or ``NO_THRESHOLD``."""
    t = _THRESHOLDS[signed][:255]
    edges = ((np.arange(TABLE_BUCKETS + 1, dtype=np.uint32) + TABLE_FIRST_BUCKET) << np.uint32(16)).view(
        np.float32
    )
    first = np.searchsorted(t.astype(np.float64), edges[:-1].astype(np.float64), side="right")
    assert np.all(
        np.searchsorted(t.astype(np.float64), edges[1:].astype(np.float64), side="left") - first <= 1
    )
    code = first.astype(np.int64)
    inside = (first < 255) & (t[np.minimum(first, 254)] < edges[1:])
    low16 = t[np.minimum(first, 254)].view(np.uint32).astype(np.int64) & 0xFFFF
    ceil_pos = (low16 + 255) >> 8
    # a threshold at the bucket's start moves the whole bucket up; one in its last 1/256 moves
    # to the next bucket's start (the next bucket's code counts it already)
    code = np.where(inside & (ceil_pos == 0), code + 1, code)
    threshold = np.where(inside & (ceil_pos >= 1) & (ceil_pos <= 255), ceil_pos << 8, NO_THRESHOLD)
    return code, threshold


def magnitude_codes(top: npt.NDArray[Any], signed: bool) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """The code at the lower edge and the threshold of the floats >= +0 whose top 16 bits are
    ``top`` (< 0x8000): their bucket's, or, outside the buckets, the constant code of
    ``BITS_FIRST`` (below) or ``BITS_LAST`` (above) with no threshold."""
    code, threshold = bucket_codes(signed)
    top = np.asarray(top, np.int64)
    index = np.clip(top - TABLE_FIRST_BUCKET, 0, TABLE_BUCKETS - 1)
    below, above = top < TABLE_FIRST_BUCKET, top >= TABLE_FIRST_BUCKET + TABLE_BUCKETS
    c = np.where(below, code[0] + (threshold[0] <= 0), code[index])
    c = np.where(above, code[-1] + (threshold[-1] <= 0xFFFF), c)
    return c, np.where(below | above, NO_THRESHOLD, threshold[index])


def _entries(signed: bool) -> npt.NDArray[np.uint32]:
    """One word per float32's top 16 bits ``b`` (the ordered bits' in the signed map), so that
    the shader's lookup of a value's code is one read, one add and one shift: ``(entry + bits)
    >> 16``. The entry is ``code << 16`` plus ``0x10000 - threshold`` (a carry into the code
    exactly when the value's low 16 bits reach the threshold; none when there is none), minus
    ``b << 16`` that ``bits`` adds back, modulo 2**32.

    Values >= +0 take their magnitude's code (``magnitude_codes``). Negative values take code 0
    in the unsigned map. In the signed map a negative value takes its magnitude's mirror image,
    ``254 - min(c, 254)`` (the map is symmetric but for +1, code 255: the most negative value,
    code 0, stands in); its ordered bits are its bits with the 31 below the sign flipped, so
    that within an entry's span the code grows with the bits, and the magnitude's threshold
    ``t`` becomes ``0x10000 - t`` on them. -0.0 takes +0.0's code. A NaN with the sign bit set
    takes +NaN's code (255), but for those of payload below 2**16 (signalling NaNs, which no
    float multiply returns), which share their span with -inf and take its code, 0."""
    top = np.arange(ENTRIES, dtype=np.int64)
    positive = top < 0x8000
    mag_top = np.where(positive, top, 0x7FFF - (top & 0x7FFF))
    c, t = magnitude_codes(mag_top, signed)
    if not signed:
        neg_c, _ = magnitude_codes(np.zeros(1, np.int64), signed)  # negative bits clamp below
        code = np.where(positive, c, neg_c[0])
        threshold = np.where(positive, t, NO_THRESHOLD)
    else:
        # a negative value: 254 - min(c + [low16(|x|) >= t], 254), low16(|x|) = 0xFFFF - low16(y)
        hi = 254 - np.minimum(c, 254)  # low16(y) past 0xFFFF - t: below the magnitude's threshold
        lo = 254 - np.minimum(c + 1, 254)  # low16(y) below 0x10000 - t
        steps = (t != NO_THRESHOLD) & (hi != lo)
        neg_code = np.where(steps, lo, hi)
        neg_threshold = np.where(steps, 0x10000 - t, NO_THRESHOLD)
        # NaNs with the sign bit set (|x| past 0x7F80FFFF): +NaN's code
        nan = (~positive) & (mag_top > 0x7F80)
        nan_code, _ = magnitude_codes(np.full(1, 0x7FC0, np.int64), signed)
        code = np.where(positive, c, np.where(nan, nan_code[0], neg_code))
        threshold = np.where(positive, t, np.where(nan, NO_THRESHOLD, neg_threshold))
    entries: npt.NDArray[np.uint32] = (
        ((code << 16) + (0x10000 - threshold) - (top << 16)) & 0xFFFFFFFF
    ).astype(np.uint32)
    return entries


_ENTRIES = {True: _entries(True), False: _entries(False)}


def quant_tables() -> npt.NDArray[np.uint32]:
    """The words of the harness's quantization-table buffer (``vk_adam_rule.glsl`` reads it in
    place): the 256 values of the signed map, the unsigned map's, then the signed map's 65,536
    entries and the unsigned map's."""
    words = np.zeros(TABLE_WORDS, np.uint32)
    words[:MAP_VALUES] = _MAPS[True].view(np.uint32)
    words[MAP_VALUES:SIGNED_ENTRIES] = _MAPS[False].view(np.uint32)
    words[SIGNED_ENTRIES:UNSIGNED_ENTRIES] = _ENTRIES[True]
    words[UNSIGNED_ENTRIES:] = _ENTRIES[False]
    return words


def ordered_bits(x: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    """The float32 bits of ``x`` with, for a negative sign, the 31 bits below it flipped: as
    unsigned integers they grow with the value over each sign."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.int64)
    out: npt.NDArray[np.int64] = bits ^ ((bits >> 31) * 0x7FFFFFFF)
    return out


def _codes_of_normalized(x: npt.NDArray[Any], signed: bool) -> npt.NDArray[np.uint8]:
    """The harness's quantizer on normalized values (float32): the entry of the value's top 16
    bits (ordered bits in the signed map), the code one add and one shift from it (the nearest
    map value, the threshold rounded to 1/256 of a bucket: 2**-15 relative). Negative values
    mirror their magnitude's code in the signed map (its +1 has no mirror: the most negative
    code, 0, stands in); in the unsigned map they take code 0."""
    x32 = np.asarray(x, np.float32)
    bits = ordered_bits(x32) if signed else x32.view(np.uint32).astype(np.int64)
    entry = _ENTRIES[signed][bits >> 16].astype(np.int64)
    code = ((entry + bits) & 0xFFFFFFFF) >> 16
    out: npt.NDArray[np.uint8] = code.astype(np.uint8)
    return out


def zero_code(signed: bool) -> int:
    return int(np.flatnonzero(_MAPS[signed] == 0.0)[0])


def quantize_blockwise(values: npt.NDArray[Any], signed: bool) -> tuple[npt.NDArray[np.uint8], F32]:
    """Codes and per-block absmax of ``values`` (a flat array; its length a multiple of BLOCK
    or padded here with zeros): the float64 emulation of the harness's quantizer."""
    x = np.asarray(values, np.float64).reshape(-1)
    blocks = -(-x.size // BLOCK)
    flat = np.zeros(blocks * BLOCK)
    flat[: x.size] = x
    padded = flat.reshape(blocks, BLOCK)
    absmax = np.abs(padded).max(axis=1).astype(np.float32)
    scale = np.where(absmax > 0, absmax.astype(np.float64), 1.0)[:, None]
    codes = _codes_of_normalized(padded / scale, signed)
    return codes.reshape(-1)[: x.size], absmax


def codes_for(values: npt.NDArray[Any], absmax: F32, signed: bool) -> npt.NDArray[np.uint8]:
    """The codes of ``values`` (flat) given their blocks' absmax (no new maxima)."""
    x = np.asarray(values, np.float64).reshape(-1)
    scale = np.repeat(np.asarray(absmax, np.float64), BLOCK)[: x.size]
    return _codes_of_normalized(x / np.where(scale > 0, scale, 1.0), signed)


def dequantize_blockwise(codes: npt.NDArray[np.uint8], absmax: F32, signed: bool) -> npt.NDArray[np.float64]:
    """Values of ``codes`` (flat) with their blocks' absmax, in float64."""
    c = np.asarray(codes).reshape(-1)
    scale = np.repeat(np.asarray(absmax, np.float64), BLOCK)[: c.size]
    return _MAPS[signed][c].astype(np.float64) * scale


# -- rounding to 16 bits, nearest-even and stochastic -------------------------------------------


def _mix32(value: Any) -> U32:
    """A 32-bit integer hash (lowbias32); the shader's ``vk_adam_mix32``."""
    x: U32 = np.array(value, np.uint32, ndmin=1)
    with np.errstate(over="ignore"):
        x ^= x >> np.uint32(16)
        x *= np.uint32(0x7FEB352D)
        x ^= x >> np.uint32(15)
        x *= np.uint32(0x846CA68B)
        x ^= x >> np.uint32(16)
    return x


def _mix32_scalar(x: int) -> int:
    """``_mix32`` of one value in Python integers (cheaper than a NumPy call; this runs every step)."""
    x &= 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    return x ^ (x >> 16)


def base_key(seed: int, buffer_index: int) -> int:
    """The key of one buffer's random stream before the step is mixed in: what a captured step
    (capturable=True) pushes, the device mixing in the step from its clock as :func:`step_key`."""
    return _mix32_scalar(_mix32_scalar(seed) ^ (buffer_index & 0xFFFFFFFF))


def step_key(seed: int, buffer_index: int, step: int) -> int:
    """The per-step key of one buffer's random stream (a push constant)."""
    return _mix32_scalar(base_key(seed, buffer_index) + (step & 0xFFFFFFFF))


#: The stream's stride per element: element i of a buffer hashes ``key + i * ELEMENT_STRIDE``
#: (mod 2**32), as the shader's ``vk_adam_pack4_stochastic`` does.
ELEMENT_STRIDE = 0x9E3779B9


def offset_key(key: int, offset: int) -> int:
    """The key whose stream is ``key``'s from element ``offset`` (even) on: element i of it is
    element ``offset + i`` of ``key``'s, so a buffer holding a slice of a larger one (a ZeRO-1
    shard, a chunk of a dispatch) rounds exactly as the larger buffer would. Two elements share
    one hash (:func:`random_bits`), so the offset must be even; vk-adam's are multiples of 64."""
    if offset % 2:
        raise ValueError(f"a stream offset must be even (two elements share one hash), not {offset}")
    return (key + offset * ELEMENT_STRIDE) & 0xFFFFFFFF


def random_bits(key: int, count: int) -> U32:
    """The random bits that elements ``0..count-1`` of a buffer round with at one step
    (``step_key``), as the shader draws them: the low 16 bits of element i are half of the hash
    of ``key + (i & ~1) * ELEMENT_STRIDE`` (the low half for even i, the high half for odd i),
    all that bf16 and fp16 normal values use; the high 16 are the low half of element i's own
    hash, used only by fp16 values below 2**-17."""
    index = np.arange(count, dtype=np.uint32)
    with np.errstate(over="ignore"):
        pair = _mix32((index & np.uint32(~1 & 0xFFFFFFFF)) * np.uint32(ELEMENT_STRIDE) + np.uint32(key))
        own = _mix32(index * np.uint32(ELEMENT_STRIDE) + np.uint32(key))
    low: U32 = np.where(index & np.uint32(1), pair >> np.uint32(16), pair & np.uint32(0xFFFF))
    return low | (own << np.uint32(16))


def round_to(values: npt.NDArray[Any], name: str, bits: U32 | None = None) -> npt.NDArray[Any]:
    """``values`` (float32-rounded first, as the shader computes in float32) in format ``name``:
    nearest-even when ``bits`` is None, else stochastic rounding with these random bits."""
    f = np.asarray(values, np.float32)
    if name == "float32":
        return f.copy()
    if bits is None:
        with np.errstate(over="ignore"):  # overflow to infinity is the rounding's result
            return f.astype(NUMPY_DTYPES[name])
    u = f.view(np.uint32).astype(np.uint64)
    r = np.asarray(bits, np.uint64)
    if name == "bfloat16":
        finite = (u & 0x7F800000) != 0x7F800000
        out = np.where(finite, ((u + (r & 0xFFFF)) >> 16) & 0xFFFF, u >> 16)
        return out.astype(np.uint16).view(BFLOAT16)
    return _f16_stochastic(u, r).view(np.float16)


def _f16_stochastic(u: npt.NDArray[np.uint64], r: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint16]:
    """Stochastic rounding of float32 bit patterns to float16 (the shader's
    ``vk_adam_f16_stochastic``): add random bits below the float16 ulp, then truncate."""
    u64, r64 = u.astype(np.int64), r.astype(np.int64)
    sign = (u64 >> 16) & 0x8000
    a = u64 & 0x7FFFFFFF
    exp = (a >> 23) - 127
    mant = (a & 0x7FFFFF) | 0x800000
    # bits of the 24-bit significand below the float16 ulp: 13 for normals, more below 2^-14
    drop = np.clip(13 + np.maximum(0, -14 - exp), 13, 31)
    kept = (mant + (r64 & ((1 << drop) - 1))) >> drop  # significand (or subnormal count)
    # normals: ((exp + 15) << 10) + significand without its hidden bit; a carry moves the exponent
    h = np.where(exp >= -14, ((exp + 14) << 10) + kept, kept)
    h = np.minimum(h, 0x7C00)  # overflow: infinity
    h = np.where(a >= 0x7F800000, np.where(a > 0x7F800000, 0x7E00, 0x7C00), h)  # inf, NaN
    h = np.where(a < 0x00800000, 0, h)  # zero and float32 subnormals (GPUs may flush them)
    return (sign | h).astype(np.uint16)


# -- packing: 16-bit values two per 32-bit word, 8-bit codes four per word -----------------------


def words_for(n: int, name: str) -> int:
    """32-bit words that hold ``n`` values of ``name`` (padded to whole vec4 groups)."""
    n4 = -(-n // 4) * 4
    return n4 if name == "float32" else n4 // 2
