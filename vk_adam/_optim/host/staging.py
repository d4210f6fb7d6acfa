"""Large copies through staging memory in chunks, so the host's copies and the GPU's transfers
overlap (synchronous steps of NumPy groups: ``to_device`` uploads, ``to_host`` downloads).

Without it, a buffer set that goes through staging memory is copied whole three times in turn:
the host gathers the arrays into staging memory, the GPU uploads it, and after the update the
GPU downloads it and the host scatters it back. Each is a pass over the bytes at memory or PCIe
speed, one after the other. In chunks, the GPU uploads chunk k while the host's threads gather
chunk k + 1, and the host scatters chunk k while the GPU downloads chunk k + 1: each direction
costs about its slower half plus one chunk, not the sum of both.

Each chunk's transfer is a submission of its own (a byte-range ``vkCmdCopyBuffer`` between the
buffer and its staging memory). The uploads are submitted before the step, on the same queue:
the step's first barrier orders its shaders after every earlier transfer write to its buffers.
The downloads are submitted after the step's wait; each ends with a barrier that makes its
transfer's writes visible to the host, and the host waits for each before it reads that chunk.

``$VK_ADAM_STAGING_CHUNK_BYTES`` sets the chunk (default 8 MiB; a buffer is chunked when it
holds at least two, in at most :data:`MAX_CHUNKS`); 0 turns chunking off (one whole-buffer
upload and download inside the step's submission, as for small buffers and asynchronous steps).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from ..._runtime import Pending, Runtime, copy_regions_op, host_read_barrier_op
from ..layout import ParamSlot
from .copy_threads import copy_pool

#: ``VK_ADAM_STAGING_CHUNK_BYTES``: bytes per chunk (0: no chunks).
STAGING_CHUNK_ENV = "VK_ADAM_STAGING_CHUNK_BYTES"
DEFAULT_CHUNK_BYTES = 8 * 1024 * 1024
#: At most this many chunks per buffer: each is a submission of its own, whose host time adds up.
MAX_CHUNKS = 16
#: One copy thread's task: chunks are copied in tasks of this many bytes, taken in order by the
#: threads, so later chunks are copied while earlier ones travel. (Splitting each chunk over
#: every thread, one chunk after another, made chunked steps slower than whole buffers: the
#: threads wait for each other at every chunk; ``benchmarks/results/h100-2026-12-06-staging-chunks/``,
#: ``run1/`` against ``run2/``.)
TASK_BYTES = 2 * 1024 * 1024


def chunk_bytes() -> int:
    """``$VK_ADAM_STAGING_CHUNK_BYTES`` (0 or a positive integer), else :data:`DEFAULT_CHUNK_BYTES`."""
    raw = os.environ.get(STAGING_CHUNK_ENV, "").strip()
    if not raw:
        return DEFAULT_CHUNK_BYTES
    if not raw.isdigit():
        raise ValueError(
            f"${STAGING_CHUNK_ENV} must be a number of bytes, or 0 to copy staging memory whole (got {raw!r})"
        )
    return int(raw)


def chunk_ranges(slots: Sequence[ParamSlot], itemsize: int) -> list[tuple[int, int]] | None:
    """The element ranges ``[start, end)`` a set's staging copies take in turn, covering every
    slot (they lie in order from element 0), or None where the set is copied whole: chunking
    is off, or the slots hold fewer than two chunks."""
    chunk = chunk_bytes()
    if chunk == 0 or not slots:
        return None
    end = max(s.offset + s.size for s in slots)
    if end * itemsize < 2 * chunk:
        return None
    # whole 4 KiB pages per chunk (the threads' copies split at pages too), at most MAX_CHUNKS
    per = max(-(-end // MAX_CHUNKS), chunk // itemsize)
    per += -per % max(1, 4096 // itemsize)
    return [(a, min(a + per, end)) for a in range(0, end, per)]


def _overlaps(slots: Sequence[ParamSlot], start: int, end: int) -> list[tuple[int, int, int]]:
    """(slot index, first element, last + 1) of each slot's part within ``[start, end)``, in the
    slot's own elements."""
    found = []
    for i, slot in enumerate(slots):
        lo, hi = max(start, slot.offset), min(end, slot.offset + slot.size)
        if lo < hi:
            found.append((i, lo - slot.offset, hi - slot.offset))
    return found


def _tasks(start: int, end: int, itemsize: int) -> list[tuple[int, int]]:
    """``[start, end)`` in pieces of :data:`TASK_BYTES` (whole 4 KiB pages): one thread's copy each."""
    per = max(1, TASK_BYTES // itemsize)
    return [(a, min(a + per, end)) for a in range(start, end, per)]


def _run(pool: ThreadPoolExecutor | None, jobs: list[Callable[[], None]]) -> list[Future[None]]:
    """Start ``jobs`` on the copy threads (in order; here, one after the other, without threads)."""
    if pool is None:
        for job in jobs:
            job()
        return []
    return [pool.submit(job) for job in jobs]


def _wait(futures: Sequence[Future[None]], *, raise_error: bool = True) -> None:
    """Wait for every one of ``futures``; then raise the first error among them (``raise_error``)."""
    errors = [f.exception() for f in futures]
    for error in errors:
        if error is not None and raise_error:
            raise error


def upload_in_chunks(
    rt: Runtime,
    tensor: Any,
    staging: np.ndarray,
    slots: Sequence[ParamSlot],
    values: Sequence[Any],
    ranges: list[tuple[int, int]],
) -> list[Pending]:
    """Gather ``values`` (one per slot) into ``staging`` (``tensor``'s staging memory, typed as
    stored) on the copy threads, in page-sized tasks taken in order; each chunk's upload is
    submitted as soon as its tasks are done, while the threads go on with later chunks. The
    caller waits for the returned submissions after the step."""
    sources = [np.asarray(v).reshape(-1) for v in values]  # one flat view (or copy) per array

    def gather_task(start: int, end: int) -> Callable[[], None]:
        def run() -> None:
            for i, lo, hi in _overlaps(slots, start, end):
                at = slots[i].offset
                np.copyto(staging[at + lo : at + hi], sources[i][lo:hi], casting="unsafe")

        return run

    pool = copy_pool()
    size = staging.itemsize
    per_chunk = [
        _run(pool, [gather_task(a, b) for a, b in _tasks(start, end, size)]) for start, end in ranges
    ]
    submitted: list[Pending] = []
    try:
        for (start, end), futures in zip(ranges, per_chunk, strict=True):
            _wait(futures)
            region = [(start * size, start * size, (end - start) * size)]
            submitted.append(rt.submit([copy_regions_op(tensor, tensor, region, source_staging=True)]))
    except BaseException:
        for futures in per_chunk:  # no thread still writes staging memory when this returns
            _wait(futures, raise_error=False)
        for pending in submitted:
            pending.wait()
        raise
    return submitted


def download_in_chunks(
    rt: Runtime,
    tensor: Any,
    staging: np.ndarray,
    slots: Sequence[ParamSlot],
    ranges: list[tuple[int, int]],
) -> None:
    """Download ``tensor`` into its staging memory chunk by chunk (every chunk submitted at
    once, after the step); as each chunk lands, its scatter into the slots' arrays starts on the
    copy threads, while the GPU goes on with the next."""

    def scatter_task(start: int, end: int) -> Callable[[], None]:
        def run() -> None:
            for i, lo, hi in _overlaps(slots, start, end):
                slot = slots[i]
                assert slot.host is not None
                np.copyto(slot.host.reshape(-1)[lo:hi], staging[slot.offset + lo : slot.offset + hi])

        return run

    size = staging.itemsize
    regions = [[(start * size, start * size, (end - start) * size)] for start, end in ranges]
    submitted = [
        rt.submit(
            [
                copy_regions_op(tensor, tensor, region, destination_staging=True),
                host_read_barrier_op([tensor], staging=True),
            ]
        )
        for region in regions
    ]
    pool = copy_pool()
    futures: list[Future[None]] = []
    try:
        for (start, end), pending in zip(ranges, submitted, strict=True):
            pending.wait()
            futures += _run(pool, [scatter_task(a, b) for a, b in _tasks(start, end, size)])
    finally:  # after an error too: no thread still copies, no sequence is in flight
        for pending in submitted:
            pending.wait()
        _wait(futures, raise_error=False)
    _wait(futures)
