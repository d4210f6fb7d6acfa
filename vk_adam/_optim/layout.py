"""Where each param lives inside a flat buffer: pure NumPy, no Vulkan device.

A group of NumPy params is packed into one flat float32 buffer (and its gradient and state
buffers share the layout) so that one dispatch updates all of them. Each param starts at a
multiple of ``ALIGN_ELEMENTS``: 64 floats are 256 bytes, the largest
``minStorageBufferOffsetAlignment`` Vulkan allows, and a whole number of vec4s, so the shader's
vectorised body never straddles two params.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
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


#: Copies of at least this many bytes are split over threads (NumPy releases the GIL while it
#: copies): one thread moves ~7-13 GB/s of fresh pageable memory on the GPU host measured, 8-16
#: threads 30-36 GB/s, so a fresh 64 MiB gradient reaches staging memory in ~2 ms, not ~7.
PARALLEL_COPY_BYTES = 4 * 1024 * 1024
_pool: tuple[int, ThreadPoolExecutor] | None = None  # (its threads, the pool), made at first use


def copy_threads() -> int:
    """Threads a large host copy is split over: ``$VK_ADAM_COPY_THREADS``, else the cores this
    process may run on, at most 16."""
    raw = os.environ.get(COPY_THREADS_ENV, "").strip()
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise ValueError(f"${COPY_THREADS_ENV} must be a positive integer (got {raw!r})")
        return int(raw)
    return max(
        1, min(16, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    )


#: ``VK_ADAM_COPY_THREADS``: threads for large host copies (see :func:`copy_threads`).
COPY_THREADS_ENV = "VK_ADAM_COPY_THREADS"


def copy_into(dst: npt.NDArray[Any], src: npt.NDArray[Any]) -> None:
    """``dst[...] = src`` for flat arrays of one size (any dtypes, as assignment converts), over
    several threads when it is large."""
    global _pool
    threads = copy_threads() if dst.nbytes >= PARALLEL_COPY_BYTES else 1
    if threads == 1:
        np.copyto(dst, src, casting="unsafe")
        return
    if _pool is None or _pool[0] < threads:
        _pool = (threads, ThreadPoolExecutor(threads, thread_name_prefix="vk-adam-copy"))
    step = -(-dst.size // threads)
    step += -step % 1024  # pieces of whole 4 KiB pages (of float32)
    pieces = range(0, dst.size, step)
    list(
        _pool[1].map(lambda at: np.copyto(dst[at : at + step], src[at : at + step], casting="unsafe"), pieces)
    )


def gather(slots: Sequence[ParamSlot], values: Sequence[Any], flat: F32) -> None:
    """Copy each slot's value (an array of the slot's size) into ``flat`` at its offset."""
    for slot, value in zip(slots, values, strict=True):
        copy_into(flat[slot.offset : slot.offset + slot.size], np.asarray(value).reshape(-1))


def scatter(slots: Sequence[ParamSlot], flat: F32) -> None:
    """Copy ``flat`` back into each slot's host array."""
    for slot in slots:
        assert slot.host is not None
        copy_into(slot.host.reshape(-1), flat[slot.offset : slot.offset + slot.size])
