"""Captured steps (``capturable=True``): what the host does around a step clock on the device.

The device keeps the count of steps taken and each group's lr (``clock``). This keeps the host's
side honest: a new lr set in ``param_groups`` goes to the device at once (the next evaluation
reads it); after a step was recorded, a change to a hyperparameter the recording froze raises
when it is set; the host's step counts are refreshed from the device whenever it reports them;
and a :mod:`vk_adam.schedules` schedule may be handed to the device, which then computes each
step's lr from its count.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .._errors import DeviceCapabilityError
from .._rules import UpdateRule
from .._runtime import region_copies_available
from .._values import show
from .clock import DeviceSchedule, device_schedule
from .device import DeviceGroups, Group
from .groups import check_hyper_types

__all__ = ["CapturedSteps", "ClockedOptions", "refuse_uncapturable"]


def refuse_uncapturable(rule: UpdateRule, groups: Sequence[Mapping[str, Any]]) -> None:
    """``capturable=True``, checked before anything is built: the rule declares it, the params
    are on the device, and this kp can write the clock's words."""
    if not rule.capturable:
        raise ValueError(
            f"capturable=True: rule {rule.name!r} does not declare captured steps (its UpdateRule "
            "has no capturable_constants, and its shader reads no step clock); leave capturable "
            "off and record a new step for each evaluation, or use a rule that declares it "
            "(adam, adamw, sgd, lion; docs/plugins.md)"
        )
    if any(isinstance(p, np.ndarray) for g in groups for p in g["params"]):
        raise TypeError(
            "capturable=True needs params on the device (kp tensors): NumPy params are copied "
            "between the host and the device by every step(), which a recorded step cannot do. "
            "Upload them into kp tensors (docs/usage.md), or leave capturable off"
        )
    if not region_copies_available():
        raise DeviceCapabilityError(
            "capturable=True writes the device's step clock in place, which needs the kp built "
            "with vk-adam's patches (region copies); install it (scripts/build-kp.sh, docs/install.md)"
        )


class ClockedOptions(dict):  # type: ignore[type-arg]
    """One param group of a capturable optimizer (``param_groups[i]``): a plain dict whose
    assignments go through ``on_set(key, value)`` first (it may refuse them), so a new lr
    reaches the device before the next evaluation. Copies of it are plain dicts."""

    def __init__(self, data: Mapping[str, Any], on_set: Callable[[str, Any], None]) -> None:
        super().__init__(data)
        self._on_set = on_set
        self.paused = False

    def __setitem__(self, key: str, value: Any) -> None:
        if not self.paused:
            self._on_set(key, value)
        super().__setitem__(key, value)

    def update(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def setdefault(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        if key not in self:
            self[key] = default
        return self[key]

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return copy.deepcopy(dict(self), memo)

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))


class CapturedSteps:
    """The host side of one capturable optimizer's clock: its groups ``dev.groups`` (whose
    options become :class:`ClockedOptions`), the rule, and ``drain`` (waits for its steps)."""

    def __init__(self, dev: DeviceGroups, rule: UpdateRule, drain: Callable[[], None]) -> None:
        assert dev.clock is not None
        self._dev, self.clock, self.rule, self._drain = dev, dev.clock, rule, drain
        self.groups: list[Group] = dev.groups
        #: A step was recorded: the hyperparameters its push constants hold cannot change.
        self.recorded = False
        #: The host's counts may be behind the device's (a recording may have been evaluated).
        self.stale = False
        self.scheduler: Any = None  # the schedule running on the device, if any
        for gi, group in enumerate(self.groups):
            group.options = ClockedOptions(group.options, self._setter(gi))

    # -- hyperparameters ---------------------------------------------------------------------

    def frozen(self) -> list[str]:
        """The hyperparameters a recording freezes: every one but the lr."""
        return [k for k in self.rule.defaults if k != "lr"]

    def _setter(self, gi: int) -> Callable[[str, Any], None]:
        def on_set(key: str, value: Any) -> None:
            self._option_set(gi, key, value)

        return on_set

    def _option_set(self, gi: int, key: str, value: Any) -> None:
        options = self.groups[gi].options
        if key == "lr":
            candidate = {**options, "lr": value}
            check_hyper_types(self.rule, candidate, f"param group {gi}")
            self.rule.validate(candidate)
            if self.clock.schedules[gi] is not None:
                if value == options.get("lr"):
                    return
                raise ValueError(
                    f"param group {gi}'s lr runs on the device (opt.schedule_on_device(...)); a "
                    "new lr set here would be ignored. Call opt.schedule_on_device(None) first, "
                    "which hands the lr back to the host"
                )
            self._drain()
            self.clock.write_lr(self._dev.status, gi, float(value))
            return
        if key in self.rule.defaults and self.recorded and _differs(options.get(key), value):
            raise ValueError(
                f"{key} of param group {gi} cannot change after a captured step was recorded: the "
                f"recording holds it as a push constant, and would go on using {options.get(key)!r}. "
                f"A recording freezes {', '.join(self.frozen())} (only lr may change between "
                "evaluations). Make a new optimizer with the new value and load this one's "
                "state_dict() into it with that value in its param_groups"
            )

    def check_loadable(self, state_dict: Mapping[str, Any]) -> None:
        """Before a state dict is loaded: once a step was recorded, its frozen hyperparameters
        must match (the recording goes on using them)."""
        if not self.recorded:
            return
        saved = state_dict.get("param_groups") if isinstance(state_dict, Mapping) else None
        if not isinstance(saved, Sequence):
            return  # the loader's own checks name the problem
        for gi, (group, values) in enumerate(zip(self.groups, saved, strict=False)):
            if not isinstance(values, Mapping):
                continue
            for key in self.frozen():
                if key in values and _differs(group.options.get(key), values[key]):
                    raise ValueError(
                        f"the state dict's param group {gi} has {key}={show(values[key])}, but "
                        f"this optimizer recorded captured steps with {key}="
                        f"{show(group.options.get(key))}, which they go on using; load it into a "
                        "new optimizer made with the state dict's values"
                    )

    def paused(self) -> _Paused:
        """A ``with`` block in which the groups' options change without going to the device."""
        return _Paused(self.groups)

    # -- the count -----------------------------------------------------------------------------

    def steps(self) -> int:
        """The device's count of steps taken (read when a recording may have run since)."""
        if self.stale:
            self._drain()
            self.set_steps(self.clock.read_steps(self._dev.status))
        return self.groups[0].step

    def read(self) -> int:
        """The device's count, read now (the caller drained its steps)."""
        self.set_steps(self.clock.read_steps(self._dev.status))
        return self.groups[0].step

    def set_steps(self, steps: int) -> None:
        for group in self.groups:
            group.step = steps
        # once a step is recorded, the application may evaluate it at any time: read again
        self.stale = self.recorded

    def after_load(self, steps: Iterable[int]) -> None:
        """A state dict was loaded: its count and lrs go to the device (a device schedule stops)."""
        counts = set(steps)
        count = counts.pop() if counts else 0
        self.scheduler = None
        for gi, group in enumerate(self.groups):
            self.clock.write_lr(self._dev.status, gi, float(group.options["lr"]))
        self.clock.write_steps(self._dev.status, count)
        self.set_steps(count)

    # -- a schedule on the device ------------------------------------------------------------

    def schedule_on_device(self, scheduler: Any) -> None:
        """Hand ``scheduler`` to the device (None: hand the lrs back to the host)."""
        self._drain()
        steps = self.read()
        if scheduler is None:
            self._stop_schedule(steps)
            return
        theirs = getattr(getattr(scheduler, "optimizer", None), "param_groups", None)
        if not isinstance(theirs, list) or [id(g) for g in theirs] != [id(g) for g in self._options()]:
            raise ValueError(
                "schedule_on_device takes a vk_adam.schedules schedule made on this optimizer "
                f"(got {show(scheduler)})"
            )
        device_schedule(scheduler, 0, steps)  # refuses a kind the device cannot run, changing nothing
        self._stop_schedule(steps)  # a schedule running before: the scheduler moves to its place
        schedules = [device_schedule(scheduler, gi, steps) for gi in range(len(self.groups))]
        for gi, schedule in enumerate(schedules):
            self.clock.write_schedule(self._dev.status, gi, schedule)
        self.scheduler = scheduler

    def _stop_schedule(self, steps: int) -> None:
        """Give the lrs back to the host: the scheduler moves to the next step's place in its
        schedule and sets that step's lrs (through ``param_groups``, so on the device too); its
        ``step()`` goes on from there."""
        scheduler, self.scheduler = self.scheduler, None
        if scheduler is None:
            return
        schedule: DeviceSchedule | None = self.clock.schedules[0]
        assert schedule is not None
        self.clock.schedules = [None] * len(self.groups)
        scheduler.last_epoch = steps - schedule.origin  # its step() takes the next step's place
        scheduler.step()

    def refresh_lrs(self) -> None:
        """With a device schedule: set each group's ``lr`` to the one the next step runs with."""
        if self.scheduler is None:
            return
        schedule = self.clock.schedules[0]
        assert schedule is not None
        lrs = self.scheduler.lrs_at(self.steps() + 1 - schedule.origin)
        with self.paused():
            for group, lr in zip(self.groups, lrs, strict=True):
                group.options["lr"] = lr

    def _options(self) -> list[dict[str, Any]]:
        return [g.options for g in self.groups]


class _Paused:
    def __init__(self, groups: Sequence[Group]) -> None:
        self._options = [g.options for g in groups if isinstance(g.options, ClockedOptions)]

    def __enter__(self) -> None:
        for options in self._options:
            options.paused = True

    def __exit__(self, *exc: object) -> None:
        for options in self._options:
            options.paused = False


def _differs(old: Any, new: Any) -> bool:
    if isinstance(old, (tuple, list)) and isinstance(new, (tuple, list)):
        return len(old) != len(new) or any(_differs(a, b) for a, b in zip(old, new, strict=True))
    try:
        return bool(old != new)
    except (TypeError, ValueError):
        return True
