"""Windows: how a buffer set larger than a device's ``maxStorageBufferRange`` is updated.

A storage-buffer binding may span at most ``maxStorageBufferRange`` bytes (128 MiB on lavapipe and
many mobile drivers, 4 GiB - 1 on NVIDIA). A buffer set whose largest buffer fits is bound whole,
as always. A larger one is cut into chunks of elements; each chunk's dispatch binds a *window*
(byte offset, byte range) of every per-element buffer — param, gradient, each state buffer, its
8-bit absmax, the master copy — at the same elements, through kp's binding windows (vk-adam's kp
patch). One allocation per buffer, several descriptor sets over it: nothing is copied, the
layout and the state dict are the same as for a small buffer set, and the update of every element
is the one it would be in a single dispatch (each element's math is independent; a chunk's random
stream starts at its first element's, ``storage.rng_key``).

Chunk starts are multiples of ``64 * minStorageBufferOffsetAlignment`` elements, so every window
starts aligned whatever its element size (4, 2 or 1 bytes, or 4 bytes per 256-element block).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .. import _formats as fmt
from .._errors import DeviceCapabilityError
from .storage import GroupFormat

#: Bytes per element as (numerator, denominator) of each kind of buffer a set binds.
FP32 = (4, 1)
HALF = (2, 1)
CODES = (1, 1)
ABSMAX = (4, fmt.BLOCK)
#: The widest element any window holds (float32): what sizes a chunk.
WIDEST = 4


@dataclass(frozen=True)
class Chunk:
    """Elements ``start .. start + count`` of a buffer set, updated by one dispatch."""

    start: int
    count: int


def chunks(n: int, max_range: int, alignment: int) -> list[Chunk]:
    """The chunks of an ``n``-element buffer set on a device whose bindings span at most
    ``max_range`` bytes and start at multiples of ``alignment`` bytes: one chunk (the whole set)
    when its widest buffer fits in one binding."""
    if fmt.words_for(n, "float32") * WIDEST <= max_range:
        return [Chunk(0, n)]
    granule = 64 * max(alignment, WIDEST)
    per = (max_range // WIDEST) // granule * granule
    if per <= 0:
        raise DeviceCapabilityError(
            f"the device's maxStorageBufferRange ({max_range} bytes) is below one aligned chunk of "
            f"{granule} elements (minStorageBufferOffsetAlignment {alignment}); vk-adam cannot bind "
            "its buffers on this device"
        )
    return [Chunk(start, min(per, n - start)) for start in range(0, n, per)]


def window(buffer_bytes: int, per_element: tuple[int, int], chunk: Chunk) -> tuple[int, int]:
    """The (byte offset, byte range) of ``chunk`` in a buffer of ``buffer_bytes`` holding
    ``per_element`` bytes per element: its elements, rounded up to whole 16-byte vec4s (the
    shaders load vec4s) but never past the buffer's end."""
    num, den = per_element
    offset = chunk.start * num // den
    span = -(-chunk.count * num // den)
    return offset, min(-(-span // 16) * 16, buffer_bytes - offset)


def state_bytes(form: GroupFormat) -> list[tuple[int, int]]:
    """Bytes per element of each state buffer of a set in format ``form``."""
    return [FP32 if s == fmt.STATE_F32 else HALF if s == fmt.STATE_BF16 else CODES for s in form.state]


def param_bytes(form: GroupFormat) -> tuple[int, int]:
    """Bytes per element of a set's param and gradient buffers."""
    return FP32 if form.param == "float32" else HALF


def whole(count: int) -> Sequence[tuple[int, int]]:
    """``count`` bindings bound whole (range 0)."""
    return [(0, 0)] * count


__all__ = ["Chunk", "chunks", "param_bytes", "state_bytes", "whole", "window"]
