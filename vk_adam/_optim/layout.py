"""Where each param lives inside a flat buffer: pure NumPy, no Vulkan device.

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

import numpy as np
import numpy.typing as npt

from .._errors import DeviceCapabilityError

F32 = npt.NDArray[np.float32]

#: Each param of a flat buffer starts at a multiple of this many elements.
ALIGN_ELEMENTS = 64


def align(n: int, to: int = ALIGN_ELEMENTS) -> int:
    """``n`` rounded up to a multiple of ``to`` (default ``ALIGN_ELEMENTS``)."""
    return -(-n // to) * to


@dataclass
class ParamSlot:
    """Where one user-visible param lives: buffer set, offset, shape."""

    buffer_set: int
    offset: int
    size: int
    shape: tuple[int, ...]
    host: Any  # the user's NumPy array: float32, float16 or bfloat16 (None for kp tensors)


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
    params: Sequence[Any], capacity: int, alignment: int | None = None, limit: str = ""
) -> tuple[list[ParamSlot], list[int]]:
    """Slots for ``params`` packed, in order, into as few flat buffers of at most ``capacity``
    elements each as that order allows, and each buffer's length. A device allocates at most
    ``maxMemoryAllocationSize`` bytes at once, so a group larger than one allocation becomes
    several buffer sets (one dispatch each); a param never spans two.

    Raises ``DeviceCapabilityError`` when one param alone exceeds ``capacity`` (``limit``: the
    device limit that sets it, for the message)."""
    step = alignment or ALIGN_ELEMENTS
    slots: list[ParamSlot] = []
    totals: list[int] = [0]
    for index, p in enumerate(params):
        size = align(p.size, step)
        if size > capacity:
            raise DeviceCapabilityError(
                f"param {index} holds {p.size} elements, more than one of the device's allocations "
                f"holds ({capacity} at most{limit}): split it into several arrays (e.g. its rows), "
                "each a param of its own"
            )
        if totals[-1] + size > capacity:
            totals.append(0)
        slots.append(ParamSlot(len(totals) - 1, totals[-1], p.size, tuple(p.shape), p))
        totals[-1] += size
    return slots, totals


def gather(slots: Sequence[ParamSlot], values: Sequence[Any], flat: F32) -> None:
    """Copy each slot's value (an array of the slot's size) into ``flat`` at its offset."""
    for slot, value in zip(slots, values, strict=True):
        flat[slot.offset : slot.offset + slot.size] = np.asarray(value).reshape(-1)


def scatter(slots: Sequence[ParamSlot], flat: F32) -> None:
    """Copy ``flat`` back into each slot's host array."""
    for slot in slots:
        assert slot.host is not None
        slot.host.reshape(-1)[:] = flat[slot.offset : slot.offset + slot.size]
