"""Params into and out of flat buffers: each slot's array gathered into a flat buffer at its
offset and scattered back (``layout`` plans where each param lives), a large copy split over the
copy threads (``copy_threads``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..layout import ParamSlot
from .copy_threads import PARALLEL_COPY_BYTES, copy_pool, copy_threads

F32 = npt.NDArray[np.float32]


def part_of(value: Any, part: ParamSlot, param: ParamSlot) -> Any:
    """``value`` (an array shaped like ``param``: its gradient, say) restricted to ``part``, one
    of the param's parts: the array itself for a whole param, else a flat slice (a view where
    ``value`` is contiguous)."""
    if not param.pieces:
        return value
    return np.asarray(value).reshape(-1)[part.start : part.start + part.size]


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
