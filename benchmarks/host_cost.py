"""Where a synchronous step's wall time goes: GPU time, vk-adam's host side, and the wait.

    python benchmarks/host_cost.py --elements 1024 268435456 --repeats 200

For each size: one AdamW optimizer over an application buffer (gradients already on the
device, as in ``vk-adam bench``), synchronous ``step()`` with ``profile=True``; prints one JSON
line per size with medians (us) of the step's wall time, its GPU time (Vulkan timestamps: the update dispatch,
and ``gpu_all_ops_us`` from the first op's start to the last op's end, barriers included) and
vk-adam's host time outside submit-and-wait (``Optimizer.last_host_seconds``), split into the
part before the runtime's record-submit-wait (argument checks, push constants, ops) and after
it. Run it under different ``KOMPUTE_FENCE_SPIN_US`` values to see how the wait shows in the
host time. Also the runtime's floor under the same step: its own ops (built once) run without
vk-adam's Python -- the dispatch alone, with the barrier before it, with both barriers -- and
``step()`` itself, taking turns (``run_*_us``, ``step_us``). And whether plain Python runs slower
after the step's wait (``probe_*_us``): the same few microseconds of interpreter work timed right
after a synchronous step, right after a sleep as long as the step, and back to back.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def measure(elements: int, repeats: int) -> dict[str, object]:
    import vk_adam
    from vk_adam._runtime import Runtime

    rt = Runtime()
    param = rt.buffer(np.random.default_rng(0).standard_normal(elements, dtype=np.float32))
    rt.run([rt.upload_op([param])])
    opt = vk_adam.AdamW([param], manager=rt.manager, zero_grad=False, profile=True, lr=1e-4)
    try:
        grad = opt.grad_buffer(0, 0)
        grad.data()[:] = 1e-3
        rt.run([rt.upload_op([grad])])
        for _ in range(5):
            opt.step()
        wall, gpu, host, before, after = [], [], [], [], []
        runtime = opt.internals().runtime  # the optimizer's own: its run is wrapped below
        run = runtime.run
        marks: list[float] = []

        spans: list[float] = []  # first to last timestamp: every op of the step on the GPU

        def timed_run(*args: object, **kwargs: object) -> object:
            marks.append(time.perf_counter())
            try:
                ticks = run(*args, **kwargs)  # type: ignore[arg-type]
                if ticks:
                    spans.append((ticks[-1] - ticks[0]) * runtime.facts.timestamp_period * 1e-9)
                return ticks
            finally:
                marks.append(time.perf_counter())

        runtime.run = timed_run  # type: ignore[method-assign,assignment]
        for _ in range(repeats):
            marks.clear()
            t0 = time.perf_counter()
            opt.step()
            t1 = time.perf_counter()
            wall.append(t1 - t0)
            gpu.append(opt.last_gpu_seconds or 0.0)
            host.append(opt.last_host_seconds or 0.0)
            before.append(marks[0] - t0)  # checks, push constants, ops
            after.append(t1 - marks[1])  # the handle, step counts

        def us(values: list[float]) -> float:
            return round(statistics.median(values) * 1e6, 2)

        return (
            {
                "elements": elements,
                "spin_us": os.environ.get("KOMPUTE_FENCE_SPIN_US", "default"),
                "wall_us": us(wall),
                "gpu_us": us(gpu),
                "gpu_all_ops_us": us(spans),
                "host_us": us(host),
                "host_p90_us": round(sorted(host)[int(0.9 * len(host))] * 1e6, 2),
                "before_run_us": us(before),
                "after_run_us": us(after),
                "repeats": repeats,
            }
            | runtime_floor(opt, repeats)
            | python_probe(opt, repeats, statistics.median(wall))
        )
    finally:
        opt.close()
        rt.free_buffer(param)
        rt.close()


#: The kp feature (patch 0016) that lets a step's update dispatch leave out kp's own barrier:
#: without it, a step runs as the earlier releases did.
NEW_OPS = ("dispatch barrier opt-out",)


def runtime_floor(opt: Any, repeats: int) -> dict[str, float]:
    """Wall time (median us) of the runtime running a step's own ops, built once, without
    vk-adam's Python around them: the update dispatch alone, after the barrier before it, and
    with both barriers (the whole step's ops) -- against ``step()`` itself, timestamps off, and
    ``step()`` as the earlier releases ran it (``step_legacy_ops_us``: the update dispatch with
    kp's own barrier at its start, after the step's barrier). The five take turns, so a slow
    spell touches each alike. (The repeated dispatches update the param: timing only.)"""
    opt.profile = False
    internals = opt.internals()
    ops, first, last = internals.step_ops()
    runtime = internals.runtime
    run = runtime.run
    features = runtime.features
    legacy = dataclasses.replace(features, patches=tuple(p for p in features.patches if p not in NEW_OPS))

    def legacy_step() -> None:
        runtime.features = legacy
        try:
            opt.step()
        finally:
            runtime.features = features

    cases: dict[str, Callable[[], object]] = {
        "run_dispatch_us": lambda: run(ops[first:last]),
        "run_barrier_dispatch_us": lambda: run(ops[:last]),
        "run_step_ops_us": lambda: run(ops),
        "step_us": opt.step,
        "step_legacy_ops_us": legacy_step,
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: round(statistics.median(t[5:]) * 1e6, 2) for name, t in times.items()}


class _Probe:
    def __init__(self) -> None:
        self.a, self.b = 1, 2.0


def _interpreter_work() -> int:
    """A few microseconds of plain Python: calls, a dict, a list, attribute reads -- what a
    step's host side is made of, with no Vulkan call in it."""
    table = {f"k{i}": i for i in range(24)}
    values = [table[k] * 2 for k in sorted(table)]
    probe = _Probe()
    return sum(v for v in values if v % 3) + probe.a + int(probe.b)


def python_probe(opt: Any, repeats: int, step_seconds: float) -> dict[str, float]:
    """Median us of ``_interpreter_work``: right after a synchronous step returns
    (``probe_after_step_us``), right after ``time.sleep`` as long as the step
    (``probe_after_sleep_us``), and back to back (``probe_hot_us``). If the first two exceed the
    third, the host itself runs slower after a wait, whatever the step's code."""
    times: dict[str, list[float]] = {
        "probe_after_step_us": [],
        "probe_after_sleep_us": [],
        "probe_hot_us": [],
    }

    def probe(name: str) -> None:
        t0 = time.perf_counter()
        _interpreter_work()
        times[name].append(time.perf_counter() - t0)

    for _ in range(repeats):
        opt.step()
        probe("probe_after_step_us")
        time.sleep(step_seconds)
        probe("probe_after_sleep_us")
        _interpreter_work()
        probe("probe_hot_us")
    return {name: round(statistics.median(t[5:]) * 1e6, 2) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--elements", type=int, nargs="+", default=[1024, 1 << 24, 1 << 28])
    parser.add_argument("--repeats", type=int, default=100)
    args = parser.parse_args()
    for n in args.elements:
        print(json.dumps(measure(n, args.repeats)), flush=True)


if __name__ == "__main__":
    main()
