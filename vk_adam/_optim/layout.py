"""Where each param lives inside a flat buffer: pure planning, no Vulkan device (the copies
into flat buffers are ``host.to_device``'s, those back out ``host.to_host``'s).

A group of NumPy params is packed into one flat float32 buffer (and its gradient and state
buffers share the layout) so that one dispatch updates all of them. Each param starts at a
multiple of ``ALIGN_ELEMENTS``: 64 floats are 256 bytes, the largest
``minStorageBufferOffsetAlignment`` Vulkan allows, and a whole number of vec4s, so the shader's
vectorised body never straddles two params.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: Each param of a flat buffer starts at a multiple of this many elements.
ALIGN_ELEMENTS = 64


def align(n: int, to: int = ALIGN_ELEMENTS) -> int:
    """``n`` rounded up to a multiple of ``to`` (default ``ALIGN_ELEMENTS``)."""
    return -(-n // to) * to


@dataclass
class ParamSlot:
    """Where one user-visible param lives: buffer set, offset, shape.

    A NumPy param larger than one buffer set (one device allocation) is cut into ``pieces``,
    one per buffer set, each a slot of its own whose ``host`` is a flat view of the param's
    array and ``start`` its first element in the param; the param's slot then names its first
    piece's set and offset. A whole param has no pieces: its only part is itself."""

    buffer_set: int
    offset: int
    size: int
    shape: tuple[int, ...]
    host: Any  # the user's NumPy array: float32, float16 or bfloat16 (None for kp tensors)
    pieces: tuple[ParamSlot, ...] = ()
    start: int = 0  # a piece's first element in its param

    def parts(self) -> tuple[ParamSlot, ...]:
        """The slots the param's elements live in, in order: its pieces, or itself."""
        return self.pieces or (self,)


def plan_flat(params: Sequence[Any], limit: int, alignment: int | None = None) -> tuple[list[ParamSlot], int]:
    """Slots for ``params`` packed into one flat buffer, and the buffer's length. Each param
    starts at a multiple of ``alignment`` (a multiple of ``ALIGN_ELEMENTS``; default that).

    Raises ValueError when the buffer would exceed ``limit`` elements."""
    step = alignment or ALIGN_ELEMENTS
    slots, offset = [], 0
    for p in params:
        slots.append(ParamSlot(0, offset, p.size, tuple(p.shape), p))
        offset += align(p.size, step)
    if offset > limit:
        raise ValueError(f"a param group holds {offset} elements; at most {limit}")
    return slots, offset


def plan_sets(
    params: Sequence[Any], capacity: int, alignment: int | None = None
) -> tuple[list[ParamSlot], list[int]]:
    """Slots for ``params`` (C-contiguous NumPy arrays) packed, in order, into as few flat
    buffers of at most ``capacity`` elements each as that order allows, and each buffer's
    length. A device allocates at most ``maxMemoryAllocationSize`` bytes at once, so a group
    larger than one allocation becomes several buffer sets (one dispatch each). A param that
    fits in one set never spans two; a larger one is cut into pieces of ``capacity`` elements
    (a multiple of ``alignment``, so 8-bit state's blocks are the param's own), each filling a
    set of its own, the last shared with the params after it."""
    step = alignment or ALIGN_ELEMENTS
    if capacity < step or capacity % step:
        raise ValueError(f"a buffer set's capacity ({capacity}) must be a positive multiple of {step}")
    slots: list[ParamSlot] = []
    totals: list[int] = [0]
    for p in params:
        size = align(p.size, step)
        if size <= capacity:
            if totals[-1] + size > capacity:
                totals.append(0)
            slots.append(ParamSlot(len(totals) - 1, totals[-1], p.size, tuple(p.shape), p))
            totals[-1] += size
            continue
        if totals[-1]:
            totals.append(0)
        flat, pieces = p.reshape(-1), []
        for start in range(0, p.size, capacity):
            count = min(capacity, p.size - start)
            if totals[-1]:
                totals.append(0)
            view = flat[start : start + count]
            pieces.append(ParamSlot(len(totals) - 1, 0, count, (count,), view, start=start))
            totals[-1] = align(count, step)
        first = pieces[0]
        slots.append(ParamSlot(first.buffer_set, 0, p.size, tuple(p.shape), p, tuple(pieces)))
    return slots, totals
