"""Can a NumPy step's copies overlap across queues? A stand-in step, timed per queue layout.

    python benchmarks/h200/pipelined_copies.py [--sizes 24,26] [--chunks 1,4,8] [--out DIR]

The step of a reused fp32 NumPy param with vk-adam's region copies: the param and the gradient
are copied from their imported arrays into device buffers (``up``), the device changes the param
(``update``: here a device copy of the gradient's chunk over the param's, a stand-in of a few
microseconds), and the param is copied back into its array (``down``). The buffers are cut into
``--chunks`` chunks; each (chunk, stage) is one submission. Layouts:

- ``one queue``: every stage on one queue, a barrier between the stages of a chunk;
- ``3 queues``: up, update and down each on its own queue of the compute family, chained per
  chunk by timeline semaphores, so chunk i's download runs while chunk i+1 is uploaded;
- ``2 queues``: up on one queue, update and down on another.

A layout needs that many queues in the compute family (lavapipe has one: only ``one queue``
runs). Every stage's result is checked: after a step the param array holds the gradient.
Writes ``pipelined_copies.json`` with ``--out``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from upload_queues import queue_families  # type: ignore[import-not-found]  # beside this script

from vk_adam._commands.bench.timing import median_ms, timeit
from vk_adam._runtime import copy_regions_op, host_read_barrier_op, import_host_range
from vk_adam._runtime._kp import kp_module

ALIGNMENT = 4096
LAYOUTS = {"one queue": (0, 0, 0), "2 queues": (0, 1, 1), "3 queues": (0, 1, 2)}


class Step:
    """The stand-in step of ``n`` fp32 elements in ``chunks`` chunks on ``queues`` (the queue
    index of up, update and down)."""

    def __init__(self, kp: Any, mgr: Any, n: int, chunks: int, queues: tuple[int, int, int]) -> None:
        self.kp, self.mgr, self.queues = kp, mgr, queues
        self.param = np.full(n, 1.0, np.float32)
        self.grad = np.arange(n, dtype=np.float32)
        self.imports = [
            import_host_range(mgr, int(a.__array_interface__["data"][0]), a.nbytes, ALIGNMENT)
            for a in (self.param, self.grad)
        ]
        (p_t, p_off), (g_t, g_off) = self.imports
        self.P = mgr.tensor_t(np.zeros(n, np.float32), tensor_type=kp.TensorTypes.storage)
        self.G = mgr.tensor_t(np.zeros(n, np.float32), tensor_type=kp.TensorTypes.storage)
        access, stage = kp.AccessFlagBits, kp.PipelineStageFlagBits
        rw = int(access.transfer_write) | int(access.transfer_read)

        def barrier() -> Any:  # transfer -> transfer on the device buffers, within one queue
            transfer = int(stage.transfer)
            return kp.OpMemoryBarrier([self.P, self.G], rw, rw, transfer, transfer, True)

        step = -(-n // chunks)
        self.sequences: list[list[Any]] = []
        for start in range(0, n, step):
            span = 4 * min(step, n - start)
            b = 4 * start
            ops = [
                [
                    copy_regions_op(p_t, self.P, [(p_off + b, b, span)]),
                    copy_regions_op(g_t, self.G, [(g_off + b, b, span)]),
                ],
                [copy_regions_op(self.G, self.P, [(b, b, span)])],
                [copy_regions_op(self.P, p_t, [(b, p_off + b, span)]), host_read_barrier_op([p_t])],
            ]
            row = []
            for s, stage_ops in enumerate(ops):
                seq = mgr.sequence(queues[s])
                if s > 0 and queues[s] == queues[s - 1]:
                    seq.record(barrier())  # same queue: submission order plus a barrier
                for op in stage_ops:
                    seq.record(op)
                row.append(seq)
            self.sequences.append(row)
        self.semaphores = [mgr.timeline_semaphore(0) for _ in range(3)]
        self.value = 0

    def run(self) -> None:
        """One step: every chunk's stages submitted, then every submission waited for."""
        base, self.value = self.value, self.value + len(self.sequences)
        for i, row in enumerate(self.sequences):
            for s, seq in enumerate(row):
                wait = []
                if s > 0 and self.queues[s] != self.queues[s - 1]:
                    wait = [(self.semaphores[s - 1], base + i + 1)]
                seq.eval_async_with(wait=wait, signal=[(self.semaphores[s], base + i + 1)])
        for row in self.sequences:
            for seq in row:
                seq.eval_await()

    def destroy(self) -> None:
        for row in self.sequences:
            for seq in row:
                seq.destroy()
        for t in (self.P, self.G, *(t for t, _ in self.imports)):
            t.destroy()
        for sem in self.semaphores:
            sem.destroy()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="24,26", help="log2 of the element counts")
    ap.add_argument("--chunks", default="1,4,8")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    kp = kp_module()
    probe = kp.Manager(0)
    family = int(probe.queue_family_index(0))
    probe.destroy()
    count = min(3, queue_families()[family][1])  # as many queues of the compute family as it has
    mgr = kp.Manager(0, [family] * count)
    result: dict[str, Any] = {"family": family, "queues": count, "ms": {}}
    print(f"compute family {family}, {count} queue(s)", flush=True)
    try:
        for k in (int(s) for s in args.sizes.split(",")):
            n = 1 << k
            for layout, queues in LAYOUTS.items():
                if max(queues) >= count:
                    continue
                for chunks in (int(c) for c in args.chunks.split(",")):
                    step = Step(kp, mgr, n, chunks, queues)
                    try:
                        ms = median_ms(timeit(step.run, args.repeats, warmup=2))
                        if not np.array_equal(step.param, step.grad):
                            raise AssertionError(f"{layout}, {chunks} chunks: the param did not come back")
                    finally:
                        step.destroy()
                    key = f"2^{k} {layout} {chunks} chunks"
                    result["ms"][key] = round(ms, 4)
                    print(f"{key}: {ms:.3f} ms", flush=True)
    finally:
        mgr.destroy()
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "pipelined_copies.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
