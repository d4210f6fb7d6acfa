"""The step clock of captured steps (``capturable=True``): the step count and each param group's
lr on the device, so that a recorded step may be evaluated any number of times.

A step recorded with push constants applies once: its step number, bias corrections and lr are
the host's, frozen when it is recorded. A captured step instead reads them when it runs, from
words of the status buffer every update shader binds (``vk_adam_rule.glsl``, binding 2), and the
step's own update dispatches count it: every workgroup adds 1 to its dispatch's count when it is
done (a skipped step adds nothing), and each dispatch runs a power-of-two number of workgroups
P, so the count divided by P is the steps taken, whichever workgroups of the running step have
finished (``vk_adam_clock_read`` in the harness says why). No pass, barrier or returning atomic
is added to a step. Its push constants carry only what stays constant (the rule's
``capturable_constants``). This module lays the words out and moves them between the host and
the device; the optimizer decides when.

The status buffer's words: ``clipping.STATUS_WORDS`` of its own (skip flag, gradient scale, last
norm), padding to :data:`HEADER_WORDS`, then :data:`GROUP_WORDS` per param group (lr; an
on-device schedule's kind, warmup, total, origin and two settings), then two words per update
dispatch of a step (its counts R and H).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .._runtime import Runtime
from .clipping import initial_status
from .storage import uint_spec

__all__ = [
    "CAPTURABLE_SPEC_ID",
    "MAX_CLOCK_WORKGROUPS",
    "SCHEDULE_KINDS",
    "Clock",
    "DeviceSchedule",
    "clock_workgroups",
    "device_schedule",
]

#: The specialization constant ``VK_ADAM_CAPTURABLE`` (harness version 7); 28..30 follow it.
CAPTURABLE_SPEC_ID = 27
#: Words before the first group's (the status words, padding).
HEADER_WORDS = 8
#: Words per update dispatch: its counts R and H (``vk_adam_clock_read``).
COUNT_WORDS = 2
#: The most workgroups a captured update dispatch runs (a power of two: the count's unit). Its
#: grid-stride loop covers the rest. Fewer workgroups than a push-constant dispatch runs cost
#: large steps time; more shorten the count before it wraps (2^32 / this, extended by the
#: wrap count): benchmarks/results/h100-2026-12-06-clock-grid/ times 256 to 16,384.
MAX_CLOCK_WORKGROUPS = 4096
#: Words per param group: lr, then the schedule's kind, warmup, total, origin, two settings.
GROUP_WORDS = 8
#: vk_adam.schedules' kinds that run on the device, and their codes in the shader.
SCHEDULE_KINDS = {"constant": 1, "linear_warmup": 2, "linear_decay": 3, "cosine": 4}


@dataclass(frozen=True)
class DeviceSchedule:
    """One group's schedule as the shader computes it (``vk_adam_scheduled_lr``): lr of step t
    = ``base_lr * factor(t - origin)``, the formula of ``kind`` with its settings."""

    base_lr: float
    kind: int
    warmup: int = 0
    total: int = 0
    origin: int = 0
    first: float = 0.0  # linear_warmup: start factor; cosine: cycles
    second: float = 0.0  # cosine: the final ratio

    def words(self) -> npt.NDArray[np.uint32]:
        out = np.zeros(GROUP_WORDS, np.uint32)
        floats = out.view(np.float32)
        floats[0] = self.base_lr
        out[1], out[2], out[3] = self.kind, self.warmup, self.total
        out.view(np.int32)[4] = self.origin
        floats[5], floats[6] = self.first, self.second
        return out


def device_schedule(scheduler: Any, group: int, steps_taken: int) -> DeviceSchedule:
    """``scheduler`` (a :mod:`vk_adam.schedules` schedule) as group ``group``'s device schedule,
    continuing where it stands: its next lr (``factor(last_epoch)``) is step ``steps_taken + 1``'s."""
    kind = getattr(scheduler, "kind", None)
    if kind not in SCHEDULE_KINDS:
        known = ", ".join(sorted(SCHEDULE_KINDS))
        raise ValueError(
            f"a {type(scheduler).__name__} schedule cannot run on the device (kinds that can: "
            f"{known}); step it on the host between evaluations instead (scheduler.step() sets "
            "the lr the next evaluation reads)"
        )
    warmup, total = int(getattr(scheduler, "warmup_steps", 0)), int(getattr(scheduler, "total_steps", 0))
    if max(warmup, total, steps_taken) >= 2**24:
        raise ValueError(
            "a device schedule counts steps in float32: warmup_steps, total_steps and the steps "
            "taken must stay below 2**24"
        )
    first = float(getattr(scheduler, "start_factor", getattr(scheduler, "num_cycles", 0.0)))
    return DeviceSchedule(
        base_lr=float(scheduler.base_lrs[group]),
        kind=SCHEDULE_KINDS[kind],
        warmup=warmup,
        total=total,
        origin=steps_taken + 1 - int(scheduler.last_epoch),
        first=first,
        second=float(getattr(scheduler, "min_lr_ratio", 0.0)),
    )


def clock_workgroups(needed: int) -> int:
    """The workgroups a captured update dispatch runs for ``needed`` (what one pass over its
    elements takes): the power of two at or above it, at most :data:`MAX_CLOCK_WORKGROUPS`."""
    return min(MAX_CLOCK_WORKGROUPS, 1 << max(0, needed - 1).bit_length())


class Clock:
    """The clock's words in the status buffer of one optimizer: ``groups`` param groups (their
    lrs) and ``dispatches`` update dispatches per step."""

    def __init__(self, rt: Runtime, lrs: Sequence[float], dispatches: int) -> None:
        self.rt = rt
        self.groups, self.dispatches = len(lrs), dispatches
        self.schedules: list[DeviceSchedule | None] = [None] * len(lrs)
        #: Each update dispatch's workgroups (its count's unit), set when its pipeline is made.
        self.workgroups: dict[int, int] = {}
        self._lrs = [float(lr) for lr in lrs]

    def initial_words(self) -> npt.NDArray[np.uint32]:
        """The status buffer's first contents: no skip, scale 1, no step taken, each group's lr."""
        words = np.zeros(self._count_word(self.dispatches), np.uint32)
        words[: len(initial_status())] = initial_status()
        for gi, lr in enumerate(self._lrs):
            words[self.group_word(gi) :][:GROUP_WORDS] = DeviceSchedule(lr, 0).words()
        return words

    def group_word(self, group: int) -> int:
        return HEADER_WORDS + GROUP_WORDS * group

    def _count_word(self, dispatch: int) -> int:
        return HEADER_WORDS + GROUP_WORDS * self.groups + COUNT_WORDS * dispatch

    def spec(self, group: int, dispatch: int, workgroups: int, rng_offset: int) -> tuple[float, ...]:
        """Specialization constants 27..30 of an update pipeline of ``workgroups`` workgroups (a
        power of two): capturable, its group's words, its dispatch's counts, its chunk's
        rounding-stream offset."""
        assert workgroups & (workgroups - 1) == 0, "the count's unit is a power of two"
        self.workgroups[dispatch] = workgroups
        return uint_spec(1, self.group_word(group), self._count_word(dispatch), rng_offset & 0xFFFFFFFF)

    def write_lr(self, status: Any, group: int, lr: float) -> None:
        """Group ``group``'s lr from the next evaluation on (any device schedule stops)."""
        if not (isinstance(lr, (int, float)) and math.isfinite(lr)):
            raise ValueError(f"lr must be a finite number (got {lr!r})")
        self.schedules[group] = None
        self.rt.upload_range(status, self.group_word(group), DeviceSchedule(float(lr), 0).words())

    def write_schedule(self, status: Any, group: int, schedule: DeviceSchedule) -> None:
        self.schedules[group] = schedule
        self.rt.upload_range(status, self.group_word(group), schedule.words())

    def read_steps(self, status: Any) -> int:
        """The device's count of steps taken (one download; the caller drained its steps)."""
        self.rt.run([self.rt.download_op([status])])
        return self.steps_in(self.rt.host_view(status))

    def steps_in(self, words: npt.NDArray[Any]) -> int:
        """The count of steps taken that the status buffer's ``words`` hold (dispatch 0's)."""
        unit = self.workgroups.get(0, 1)
        first = self._count_word(0)
        low, high = (int(w) // unit for w in words.view(np.uint32)[first : first + COUNT_WORDS])
        return high * (2**32 // unit) + low

    def write_steps(self, status: Any, steps: int) -> None:
        """Set every dispatch's counts to ``steps`` steps taken."""
        counts = np.zeros(COUNT_WORDS * self.dispatches, np.uint32)
        for dispatch in range(self.dispatches):
            unit = self.workgroups.get(dispatch, 1)
            per_wrap = 2**32 // unit
            counts[COUNT_WORDS * dispatch] = (steps % per_wrap) * unit
            counts[COUNT_WORDS * dispatch + 1] = (steps // per_wrap) * unit % 2**32
        self.rt.upload_range(status, self._count_word(0), counts)
