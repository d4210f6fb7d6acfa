"""What every measurement of the bench returns (``Result``, a row of the step table) and how
it times a call: ``measure`` (Vulkan) and ``peer_steps`` (NumPy, torch) share it."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


def median_ms(samples: list[float]) -> float:
    """The median of ``samples`` (seconds), in milliseconds."""
    return statistics.median(samples) * 1e3


def timeit(fn: Callable[[], Any], repeats: int, warmup: int) -> list[float]:
    """Seconds of each of ``repeats`` calls of ``fn``, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


@dataclass
class Result:
    case: str
    backend: str
    gpu_ms: float | None = None
    sync_wall_ms: float | None = None
    pipelined_ms: float | None = None
    host_ms: float | None = None
    dispatches: int | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
