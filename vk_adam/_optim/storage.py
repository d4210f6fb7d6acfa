"""How a buffer set stores its params, gradients and state on the device: the formats chosen
for a group, the buffers' lengths and initial contents, and the conversions between the
device words and host values (state dicts, checkpoints). Pure NumPy; the formats themselves
are defined in ``vk_adam._formats`` and applied on the GPU by the shader harness.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import _formats as fmt
from .._rules import StateBuffer
from .host.copy_threads import copy_into
from .layout import ParamSlot

Array = npt.NDArray[Any]
F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Window:
    """A group's flat buffer as a slice of a larger one: elements ``offset .. offset + n`` of a
    logical buffer set ``index`` of ``total`` elements (one rank's shard under ZeRO-1).

    The slice's formats are chosen for ``total`` elements (8-bit state starts at
    ``INT8_MIN_ELEMENTS`` of the whole buffer, not of the slice) and its stochastic-rounding
    stream is the whole buffer's from ``offset`` on, so the slice takes exactly the update the
    whole buffer would. ``offset`` must be a multiple of the quantization block."""

    index: int
    offset: int
    total: int


@dataclass(frozen=True)
class Storage:
    """The optimizer's storage options (checked by ``groups.check_storage``); ``windows``: one
    :class:`Window` per param group, or none (each group is a buffer of its own)."""

    state_dtype: str = "float32"
    stochastic_rounding: bool = False
    seed: int = 0
    windows: tuple[Window, ...] = ()
    exportable: bool = False  # param, grad and state buffers exportable as opaque fds


def rng_key(seed: int, index: int, window: Window | None, step: int) -> int:
    """The step's key of buffer set ``index``'s stochastic-rounding stream (a push constant);
    a window's is its whole buffer's stream from the window's first element on."""
    if window is None:
        return fmt.step_key(seed, index, step)
    return fmt.offset_key(fmt.step_key(seed, window.index, step), window.offset)


def rng_base_key(seed: int, index: int, window: Window | None) -> int:
    """The base key of buffer set ``index``'s stream that a captured step pushes: the device
    mixes in its step (``step_key``'s last round) and its chunk's offset (a specialization
    constant, :func:`rng_offset`), giving :func:`rng_key`'s key of that step bit for bit."""
    return fmt.base_key(seed, index if window is None else window.index)


def rng_offset(window: Window | None, start: int) -> int:
    """The stream offset of a chunk from element ``start`` of its buffer set, as ``offset_key`` adds it."""
    return fmt.offset_key(0, start + (window.offset if window is not None else 0))


def uint_spec(*values: int) -> tuple[float, ...]:
    """uint specialization constants as the float32 words kp passes."""
    return tuple(float(x) for x in np.array(values, np.uint32).view(np.float32))


@dataclass(frozen=True)
class GroupFormat:
    """The storage of one buffer set: param (and gradient) dtype, how 16-bit params take an
    update, and each state buffer's format (``_formats.STATE_*``, in the rule's order)."""

    param: str = "float32"
    mode: int = fmt.MODE_PLAIN
    state: tuple[int, ...] = ()

    @property
    def is_default(self) -> bool:
        return self.param == "float32" and all(s == fmt.STATE_F32 for s in self.state)

    @property
    def quantized(self) -> bool:
        return any(s >= fmt.STATE_INT8_SIGNED for s in self.state)

    @property
    def has_master(self) -> bool:
        return self.mode == fmt.MODE_MASTER

    def spec(self, int8_vec4s: int = 1) -> tuple[float, ...]:
        """Specialization constants 16..22 (uint bit patterns carried in float32 words);
        ``int8_vec4s``: vec4s per invocation per tile of the 8-bit path (1 or 2)."""
        words = [fmt.PARAM_FORMAT[self.param], self.mode, *self.state]
        return uint_spec(*words, *[fmt.STATE_F32] * (6 - len(words)), int8_vec4s)


def group_format(
    state: Sequence[StateBuffer], param_dtype: str, state_dtype: str, stochastic: bool, n: int
) -> GroupFormat:
    """The formats of a buffer set of ``n`` elements: ``state_dtype`` for every state buffer the
    rule lets be compressed (8-bit only from ``INT8_MIN_ELEMENTS`` elements)."""
    formats = []
    for s in state:
        if s.keep_fp32 or state_dtype == "float32":
            formats.append(fmt.STATE_F32)
        elif state_dtype == "bfloat16":
            formats.append(fmt.STATE_BF16)
        elif n < fmt.INT8_MIN_ELEMENTS:
            formats.append(fmt.STATE_F32)
        else:
            formats.append(fmt.STATE_INT8_UNSIGNED if s.nonnegative else fmt.STATE_INT8_SIGNED)
    if param_dtype == "float32":
        mode = fmt.MODE_PLAIN
    else:
        mode = fmt.MODE_STOCHASTIC if stochastic else fmt.MODE_MASTER
    return GroupFormat(param_dtype, mode, tuple(formats))


def is_signed(code: int) -> bool:
    return code == fmt.STATE_INT8_SIGNED


STATE_DTYPE_OF = {
    fmt.STATE_F32: "float32",
    fmt.STATE_BF16: "bfloat16",
    fmt.STATE_INT8_SIGNED: "int8-blockwise",
    fmt.STATE_INT8_UNSIGNED: "int8-blockwise",
}


# -- buffer contents -----------------------------------------------------------------------------


def _zero_values(n: int, name: str) -> Array:
    """Zeros for ``n`` values of a ``name`` buffer, padded to whole vec4 groups (values, not
    words: :func:`_words` views them as the buffer's words)."""
    return np.zeros(fmt.words_for(n, "float32"), np.float32 if name == "float32" else fmt.NUMPY_DTYPES[name])


def _words(values: Array, name: str) -> Array:
    """A buffer's values as its words: float32 words, or uint32 words of two 16-bit values."""
    return values if name == "float32" else values.view(np.uint32)


def value_words(values: Array, name: str) -> npt.NDArray[Any]:
    """Values (flat) as the words of a ``name`` buffer, padded to whole vec4 groups: float32
    words, or uint32 words holding two 16-bit values each."""
    out = _zero_values(values.size, name)
    out[: values.size] = values if name == "float32" else np.asarray(values).astype(out.dtype)
    return _words(out, name)


def param_words(slots: Sequence[ParamSlot], total: int, name: str) -> Array:
    """The words of a ``name`` param buffer of ``total`` elements holding each slot's host
    array at its offset: ``value_words`` of the float32 values, copied straight from arrays
    already in the buffer's dtype (a 16-bit value survives float32 unchanged), so a buffer set
    of billions of 16-bit params takes its own size in host memory while it is made."""
    values = _zero_values(total, name)
    for slot in slots:
        host = np.asarray(slot.host).reshape(-1)
        if host.dtype != values.dtype:
            host = host.astype(np.float32)  # as value_words: float32 first, then the buffer's dtype
        copy_into(values[slot.offset : slot.offset + slot.size], host)
    return _words(values, name)


def typed_view(words: Array, name: str) -> Array:
    """A buffer's words (kp ``data()``) viewed as ``name`` values."""
    return words if name == "float32" else words.view(fmt.NUMPY_DTYPES[name])


def blocks(n: int) -> int:
    return max(1, -(-n // fmt.BLOCK))


def state_buffers(code: int, values: Array) -> tuple[Array, F32 | None]:
    """The device words of one state buffer holding ``values`` (flat, float), and its absmax
    per block for 8-bit state (else None)."""
    if code == fmt.STATE_F32:
        return value_words(np.asarray(values, np.float32), "float32"), None
    if code == fmt.STATE_BF16:
        return value_words(np.asarray(values, np.float32), "bfloat16"), None
    codes, absmax = quantize(values, is_signed(code))
    return codes.view(np.uint32), absmax


def quantize(values: Array, signed: bool) -> tuple[npt.NDArray[np.uint8], F32]:
    """Codes (padded to whole blocks) and absmax per block of ``values``."""
    n = np.asarray(values).size
    padded = np.zeros(blocks(n) * fmt.BLOCK, np.float64)
    padded[:n] = np.asarray(values, np.float64).reshape(-1)
    codes, absmax = fmt.quantize_blockwise(padded, signed)
    return codes, absmax


def initial_state(code: int, s: StateBuffer, n: int) -> tuple[Array, F32 | None]:
    """``state_buffers(code, np.full(n, s.initial_value, np.float32))``, without the ``n``
    values: every 8-bit block but the last (padded with zeros) is the same, so two blocks are
    quantized and repeated. A state buffer of billions of elements then takes its own size in
    host memory while it is made, not the float64 passes of :func:`quantize`."""
    value = np.float32(s.initial_value)
    if code in (fmt.STATE_F32, fmt.STATE_BF16):
        out = _zero_values(n, STATE_DTYPE_OF[code])
        out[:n] = value
        return _words(out, STATE_DTYPE_OF[code]), None
    count = blocks(n)
    tail = np.zeros(fmt.BLOCK, np.float32)
    tail[: n - (count - 1) * fmt.BLOCK] = value
    full_codes, full_absmax = quantize(np.full(fmt.BLOCK, value, np.float32), is_signed(code))
    tail_codes, tail_absmax = quantize(tail, is_signed(code))
    codes = np.empty((count, fmt.BLOCK), np.uint8)
    codes[:] = full_codes
    codes[-1] = tail_codes
    absmax = np.full(count, full_absmax[0], np.float32)
    absmax[-1] = tail_absmax[0]
    return codes.reshape(-1).view(np.uint32), absmax


def decode_state(code: int, words: Array, absmax: F32 | None, offset: int, size: int) -> F32:
    """Float32 values of elements ``offset .. offset+size`` of a state buffer."""
    if code == fmt.STATE_F32:
        return np.array(words[offset : offset + size], np.float32)
    if code == fmt.STATE_BF16:
        return words.view(fmt.BFLOAT16)[offset : offset + size].astype(np.float32)
    assert absmax is not None
    codes = words.view(np.uint8)[offset : offset + size]
    first = offset // fmt.BLOCK
    scale = absmax[first : first + blocks(size)]
    return fmt.dequantize_blockwise(codes, scale, is_signed(code)).astype(np.float32)


def native_state(
    code: int, words: Array, absmax: F32 | None, offset: int, size: int
) -> tuple[Array, F32 | None]:
    """A state buffer's elements as stored: float32, bfloat16, or uint8 codes with their
    blocks' absmax (bit-exact copies)."""
    if code == fmt.STATE_F32:
        return np.array(words[offset : offset + size], np.float32), None
    if code == fmt.STATE_BF16:
        return words.view(fmt.BFLOAT16)[offset : offset + size].copy(), None
    assert absmax is not None
    first = offset // fmt.BLOCK
    return words.view(np.uint8)[offset : offset + size].copy(), absmax[first : first + blocks(size)].copy()
