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

F32 = npt.NDArray[np.float32]

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


def part_of(value: Any, part: ParamSlot, param: ParamSlot) -> Any:
    """``value`` (an array shaped like ``param``: its gradient, say) restricted to ``part``, one
    of the param's parts: the array itself for a whole param, else a flat slice (a view where
    ``value`` is contiguous)."""
    if not param.pieces:
        return value
    return np.asarray(value).reshape(-1)[part.start : part.start + part.size]


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


#: Copies of at least this many bytes are split over threads (NumPy releases the GIL while it
#: copies): one thread cannot keep a host's memory bus busy on fresh pageable memory, several can
#: (copy rates by thread count: ``benchmarks/results/h200-2026-12-03-host/``, "The pieces").
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


def copy_pool() -> ThreadPoolExecutor | None:
    """The threads large host copies run on, made at first use (None: :func:`copy_threads` is 1)."""
    global _pool
    threads = copy_threads()
    if threads == 1:
        return None
    if _pool is None or _pool[0] < threads:
        _pool = (threads, ThreadPoolExecutor(threads, thread_name_prefix="vk-adam-copy"))
    return _pool[1]


def copy_into(dst: npt.NDArray[Any], src: npt.NDArray[Any]) -> None:
    """``dst[...] = src`` for flat arrays of one size (any dtypes, as assignment converts), over
    several threads when it is large."""
    threads = copy_threads() if dst.nbytes >= PARALLEL_COPY_BYTES else 1
    pool = copy_pool() if threads > 1 else None
    if pool is None:
        np.copyto(dst, src, casting="unsafe")
        return
    step = -(-dst.size // threads)
    step += -step % 1024  # pieces of whole 4 KiB pages (of float32)
    pieces = range(0, dst.size, step)
    list(pool.map(lambda at: np.copyto(dst[at : at + step], src[at : at + step], casting="unsafe"), pieces))


def gather(slots: Sequence[ParamSlot], values: Sequence[Any], flat: F32) -> None:
    """Copy each slot's value (an array of the slot's size; for a piece, of the piece's) into
    ``flat`` at its offset."""
    for slot, value in zip(slots, values, strict=True):
        copy_into(flat[slot.offset : slot.offset + slot.size], np.asarray(value).reshape(-1))


def scatter(slots: Sequence[ParamSlot], flat: F32) -> None:
    """Copy ``flat`` back into each slot's host array."""
    for slot in slots:
        assert slot.host is not None
        copy_into(slot.host.reshape(-1), flat[slot.offset : slot.offset + slot.size])
