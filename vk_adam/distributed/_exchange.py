"""The reduce-scatter of ZeRO-1's host engines (gloo, MPI) as point-to-point messages.

Both engines' own reduce-scatters (gloo's, Open MPI's ``Reduce_scatter_block``) were several
times slower than this between two ranks on one host. Each rank sends every
other rank its part and adds the parts it receives, in rank order, so the sum is the same on any
engine and any schedule.

The parts move in messages of ``message`` values. While the calling thread waits for the next
messages, a worker thread adds the chunks already received: the addition runs under the transfer
instead of after it. The buffers messages land in are kept
between calls: a fresh array each step would cost its page faults again.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]

#: Values per message (4 MiB): few messages per step, and enough of them to overlap the adds.
MESSAGE = 1 << 20
#: Values per pass of the last addition and the division (256 KiB: in L2 cache).
_PASS = 1 << 16
#: Messages in flight per peer: a chunk's buffer is taken again once its addition is done.
_SLOTS = 3


class ExchangeReduceScatter:
    """A reduce-scatter over point-to-point messages, with the buffers its messages land in
    and the thread that adds them, kept for the next call. ``message``: values per message
    (every rank uses the same; None: one message per part). :meth:`close` stops the thread."""

    def __init__(self, message: int | None = MESSAGE) -> None:
        if message is not None and message < 1:
            raise ValueError(f"message must be at least 1 value, or None: one per part (got {message})")
        self.message = message
        self._slots: F32 = np.empty(0, np.float32)
        self._pool: ThreadPoolExecutor | None = None

    def _landing(self, slots: int, peers: int, count: int) -> F32:
        """``slots`` chunk buffers for ``peers`` peers, each ``count`` values (grown once)."""
        size = slots * peers * count
        if self._slots.size < size:
            self._slots = np.empty(size, np.float32)
        return self._slots[:size].reshape(slots, peers, count)

    def __call__(
        self,
        send: F32,
        recv: F32,
        rank: int,
        size: int,
        *,
        post: Callable[[F32, int], Any] | None = None,
        take: Callable[[F32, int], None] | None = None,
        swap: Callable[[F32, int, F32, int], None] | None = None,
        mean: bool = False,
        own_ready: Callable[[], None] | None = None,
    ) -> None:
        """``recv`` = the sum over ranks of each rank's ``send`` part ``rank`` (``send`` is
        ``size`` parts of ``recv.size``), added in rank order: rank 0's part, plus rank 1's, and
        so on, in float32. ``mean``: then divided by ``size`` in float32, in the last
        addition's pass (bit for bit a division after the sum). The parts move in messages, by
        one of two schedules:

        * ``post`` and ``take``: every message to every peer posted first (``post(chunk,
          peer)``, non-blocking, returns a request with ``wait()``), then this rank's received
          (``take(into, peer)``, blocking). For engines that move data on threads of their
          own (gloo).
        * ``swap(chunk, to, into, source)``: send one message and receive one, blocking (MPI's
          ``Sendrecv``), chunk by chunk, with peer ``rank + k`` and ``rank - k`` at step ``k``.
          For engines that move data only inside their calls: Open MPI's shared memory
          without a single-copy mechanism ran ``Isend``, then ``Recv``, slower than
          ``Sendrecv``, and ``Sendrecv`` in 4 MiB messages slower than in one: MPI takes one message
          per part (``message=None``).

        ``own_ready``: called once before this rank's own part of ``send`` is first read (the
        parts for the other ranks are sent first: its own may still be arriving)."""
        paired = swap is not None and post is None and take is None
        if not paired and (swap is not None or post is None or take is None):
            raise TypeError("pass post= and take=, or swap=")
        n = recv.size
        step = max(1, n if self.message is None else self.message)
        parts = [send[r * n : r * n + n] for r in range(size)]
        if size == 1:  # no peer: its own part, and the mean of one
            if own_ready is not None:
                own_ready()
            recv[...] = parts[0]
            return
        chunks = [(at, min(step, n - at)) for at in range(0, n, step)]
        peers = [r for r in range(size) if r != rank]
        requests = []
        if post is not None:  # chunk by chunk, each peer's in order: a pair's messages keep it
            requests = [post(parts[p][at : at + k], p) for at, k in chunks for p in peers]
        # no more chunk buffers than chunks: one message per part needs one
        slots = self._landing(min(_SLOTS, len(chunks)), len(peers), min(step, n))
        if self._pool is None and len(chunks) > 1:
            self._pool = ThreadPoolExecutor(2, thread_name_prefix="vk-adam-reduce-scatter")
        adding: list[Future[None]] = []
        try:
            for c, (at, k) in enumerate(chunks):
                if c >= _SLOTS:
                    adding[c - _SLOTS].result()  # its slot is free again
                slot = slots[c % len(slots)]
                if swap is not None:
                    for shift in range(1, size):
                        to, source = (rank + shift) % size, (rank - shift) % size
                        swap(parts[to][at : at + k], to, slot[peers.index(source), :k], source)
                else:
                    assert take is not None
                    for j, peer in enumerate(peers):
                        take(slot[j, :k], peer)
                sources = [
                    parts[r][at : at + k] if r == rank else slot[peers.index(r), :k] for r in range(size)
                ]
                out, divisor = recv[at : at + k], size if mean else 0
                if c == 0 and own_ready is not None:
                    own_ready()
                if c == len(chunks) - 1:  # nothing left to receive: add it here, no hand-over
                    _add_in_order(sources, out, divisor)
                else:
                    assert self._pool is not None
                    adding.append(self._pool.submit(_add_in_order, sources, out, divisor))
        finally:
            for future in adding:
                future.result()  # no addition still writes recv once this returns or raises
        for request in requests:
            request.wait()

    def close(self) -> None:
        """Stop the adding thread and free the buffers."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        self._slots = np.empty(0, np.float32)


def _add_in_order(sources: list[F32], out: F32, divisor: int) -> None:
    """``out`` = the sum of ``sources`` in order, in float32, one pass per source after the
    first; with ``divisor``, divided by it in the last pass, ``_PASS`` values at a time while
    they are in cache."""
    total = sources[0]
    for part in sources[1:-1]:
        np.add(total, part, out=out)
        total = out
    last = sources[-1]
    if not divisor:
        np.add(total, last, out=out)
        return
    scale = np.float32(divisor)
    for at in range(0, out.size, _PASS):
        piece = out[at : at + _PASS]
        np.add(total[at : at + _PASS], last[at : at + _PASS], out=piece)
        np.divide(piece, scale, out=piece)
