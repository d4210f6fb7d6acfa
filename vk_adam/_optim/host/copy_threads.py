"""Large host copies split over threads (:func:`copy_into`): how many (``$VK_ADAM_COPY_THREADS``,
else the cores this process may run on) and the one pool, made at first use. ``to_device`` and
``to_host`` copy a small array themselves and hand a large one here.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

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
    several threads when it is large (at least :data:`PARALLEL_COPY_BYTES`)."""
    threads = copy_threads() if dst.nbytes >= PARALLEL_COPY_BYTES else 1
    pool = copy_pool() if threads > 1 else None
    if pool is None:
        np.copyto(dst, src, casting="unsafe")
        return
    step = -(-dst.size // threads)
    step += -step % 1024  # pieces of whole 4 KiB pages (of float32)
    pieces = range(0, dst.size, step)
    list(pool.map(lambda at: np.copyto(dst[at : at + step], src[at : at + step], casting="unsafe"), pieces))
