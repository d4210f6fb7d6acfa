"""The pipelined NumPy step: copies in, update and copies out of each chunk on their own queues,
so the bus carries chunk k + 1 in while chunk k comes back out.

A synchronous step of NumPy params whose pages the device imported (``host_memory``) copies
the params and gradients from their arrays into the group's buffers, updates them, and copies
the params back: in one submission, each direction of PCIe works while the other waits. Here
each buffer set is cut into chunks (its update dispatches already are: the set is windowed at
:func:`chunk_bytes`, ``windows.py``), and each chunk goes through three stages:

* **in**: its byte ranges of the params' and gradients' imports copied into the set's buffers,
  on a copy queue; signals the ``in`` timeline at the chunk's number;
* **update**: its update dispatch, on the first queue (where every other step's work runs),
  once the ``in`` timeline reaches that number; signals the ``update`` timeline;
* **out**: its params copied back into the arrays and made visible to the host, on the second
  copy queue, once the ``update`` timeline reaches it.

The queues are three of the compute family (``$VK_ADAM_COPY_QUEUES``, opened by the shared
device): with two, the out copies follow each update on the first queue; with one (tests), all
three stages run there in turn. A timeline semaphore's signal and wait carry the memory
dependency between queues; the buffers never leave the compute family, so no ownership moves.

What is not an import's copy stays on the first queue, in the step's order: a ``prelude``
(the step's opening barrier, whole uploads from staging memory, staging regions) before the
first update, and a ``postlude`` (the closing barrier, staging regions back) after the last.
The host waits for every submission before ``step()`` returns, as for any synchronous step.

A step is pipelined only where every buffer set of the optimizer is a NumPy one with imports,
cut into at least two chunks, no pass over the gradients comes first (gradient clipping,
``skip_nonfinite``), and no timestamps are asked for (``profile=True``); other steps are one
submission, as before. ``$VK_ADAM_PIPELINE_CHUNK_BYTES`` sets the chunk (default 16 MiB of
float32 elements; 0 turns the pipeline off).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._runtime import Pending, Runtime, copy_regions_op, host_read_barrier_op
from .windows import Chunk, chunks

#: ``VK_ADAM_PIPELINE_CHUNK_BYTES``: float32 bytes per chunk of a pipelined buffer set (0: off).
PIPELINE_CHUNK_ENV = "VK_ADAM_PIPELINE_CHUNK_BYTES"
DEFAULT_CHUNK_BYTES = 16 * 1024 * 1024
#: Queues a device needs for the pipeline (tests set 1: every stage on one queue).
MIN_QUEUES = 2


def chunk_bytes() -> int:
    """``$VK_ADAM_PIPELINE_CHUNK_BYTES`` (0 or a positive integer), else :data:`DEFAULT_CHUNK_BYTES`."""
    raw = os.environ.get(PIPELINE_CHUNK_ENV, "").strip()
    if not raw:
        return DEFAULT_CHUNK_BYTES
    if not raw.isdigit():
        raise ValueError(
            f"${PIPELINE_CHUNK_ENV} must be a number of bytes, or 0 to turn the pipelined step off "
            f"(got {raw!r})"
        )
    return int(raw)


def available(rt: Runtime) -> bool:
    """Whether ``rt`` can run the pipeline: timeline semaphores and enough queues, and a chunk."""
    return rt.has_timelines and rt.queues >= MIN_QUEUES and chunk_bytes() > 0


def host_set_chunks(rt: Runtime, n: int) -> list[Chunk] | None:
    """The chunks of an ``n``-element NumPy buffer set that the pipeline would cut (at least
    two), or None: it is not available, or the set is smaller than two chunks."""
    if not available(rt):
        return None
    limit = min(rt.max_binding_bytes, chunk_bytes())
    found = chunks(n, limit, rt.binding_alignment)
    return found if len(found) >= 2 else None


@dataclass
class Unit:
    """One chunk of one buffer set: its copies in, its update's chunk index, its copies out."""

    copies_in: list[Any]
    chunk: int
    copies_out: list[Any]


def _cut(
    copies: Sequence[tuple[Any, Any, tuple[int, int, int]]], lo: int, hi: int, *, device_side: int
) -> list[Any]:
    """The parts of ``copies`` (source, destination, (source offset, destination offset, bytes))
    whose bytes on the device buffer (``device_side``: 1 for a destination, 0 for a source) lie in
    ``[lo, hi)``: one region-copy op per (source, destination) pair."""
    regions: dict[tuple[int, int], tuple[Any, Any, list[tuple[int, int, int]]]] = {}
    for src, dst, (so, do, nbytes) in copies:
        start = (so, do)[device_side]
        a, b = max(lo, start), min(hi, start + nbytes)
        if a >= b:
            continue
        shift = a - start
        entry = regions.setdefault((id(src), id(dst)), (src, dst, []))
        entry[2].append((so + shift, do + shift, b - a))
    return [copy_regions_op(src, dst, rs) for src, dst, rs in regions.values()]


def units(plan: Any, bset: Any, itemsize: int) -> list[Unit]:
    """The pipeline's units of a buffer set with this step's ``plan`` (``host_memory``), made
    once per plan: each update chunk's byte range of the set's buffers (``itemsize`` bytes per
    element of the param and gradient buffers)."""
    if plan.units is None:
        made = []
        for k, chunk in enumerate(bset.chunks):
            lo, hi = chunk.start * itemsize, (chunk.start + chunk.count) * itemsize
            outs = _cut(plan.imports_out, lo, hi, device_side=0)
            if outs:
                outs.append(host_read_barrier_op([op_dst for _, op_dst, _ in plan.imports_out]))
            made.append(Unit(_cut(plan.imports_in, lo, hi, device_side=1), k, outs))
        plan.units = made
    return list(plan.units)


class HostPipeline:
    """One optimizer's pipelined steps: its timelines and the queue of each stage."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        queues = rt.queues
        #: the queue of the in, update and out stages
        self.queues = (1, 0, 2) if queues >= 3 else (1, 0, 0) if queues == 2 else (0, 0, 0)
        self._timelines: list[Any] = []
        self._value = 0

    def run(
        self,
        prelude: list[Any],
        chunks: list[tuple[Unit, Any, Any]],
        postlude: list[Any],
    ) -> None:
        """Submit one step and wait for it: ``prelude`` on the first queue, then each (unit, its
        update dispatch op, the barrier between its update and its copies out) through the
        three stages, then ``postlude`` on the first queue."""
        rt = self.rt
        if not self._timelines:
            self._timelines = [rt.timeline(), rt.timeline()]
        ins, updates = self._timelines
        q_in, q_update, q_out = self.queues
        pending: list[Pending] = []
        try:
            pending.append(rt.submit_on(0, prelude))
            for unit, dispatch, barrier in chunks:
                self._value += 1
                v = self._value
                # a chunk with nothing to copy in (or out) skips that stage and its semaphore
                wait = []
                if unit.copies_in:
                    pending.append(rt.submit_on(q_in, unit.copies_in, signal=[(ins, v)]))
                    wait = [(ins, v)]
                if q_out == q_update or not unit.copies_out:
                    ops = [dispatch, barrier, *unit.copies_out] if unit.copies_out else [dispatch]
                    pending.append(rt.submit_on(q_update, ops, wait=wait))
                    continue
                pending.append(rt.submit_on(q_update, [dispatch], wait=wait, signal=[(updates, v)]))
                pending.append(rt.submit_on(q_out, unit.copies_out, wait=[(updates, v)]))
            pending.append(rt.submit_on(0, postlude))
        finally:
            for p in pending:  # every submission is waited for, also after an error
                p.wait()
