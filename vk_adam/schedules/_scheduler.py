"""The base of every schedule: torch's ``LRScheduler`` protocol over ``factor(step)``, the
state dict, and the checks of a schedule's settings. The schedules themselves are in
``_formulas``; :mod:`vk_adam.schedules` is the public face of both."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, ClassVar

from .._values import MAX_STEP, is_index, is_real, show


def _whole(name: str, value: Any, minimum: int) -> int:
    if not is_index(value):
        raise TypeError(f"{name} must be a whole number >= {minimum} (got {show(value)})")
    if not minimum <= int(value) <= MAX_STEP:
        raise ValueError(f"{name} must be a whole number from {minimum} to 2**53 (got {int(value)})")
    return int(value)


def _real(name: str, value: Any, low: float, high: float, *, open_low: bool = False) -> float:
    if not is_real(value):
        raise TypeError(f"{name} must be a real number (got {show(value)})")
    v = float(value)
    if not (low < v if open_low else low <= v) or not v <= high:
        bounds = f"{'(' if open_low else '['}{low}, {high}]"
        raise ValueError(f"{name} must be in {bounds} (got {value!r})")
    return v


# The checks of the settings, each (name, value) -> value.
_steps = partial(_whole, minimum=0)
_count = partial(_whole, minimum=1)
_unit = partial(_real, low=0.0, high=1.0)
_positive = partial(_real, low=0.0, high=float(MAX_STEP), open_low=True)
_DECAY = (("warmup_steps", _steps), ("total_steps", _steps))


def _lr_list(name: str, value: Any, count: int) -> list[float]:
    """A list of ``count`` learning rates (finite real numbers >= 0), as floats."""
    if not isinstance(value, (list, tuple)) or len(value) != count:
        raise ValueError(f"{name} must be a list of {count} learning rate(s), one per param group")
    for i, v in enumerate(value):
        if not is_real(v):
            raise TypeError(f"{name}[{i}] must be a learning rate, a real number (got {show(v)})")
        if not 0.0 <= v < math.inf:
            raise ValueError(f"{name}[{i}] must be a finite learning rate >= 0 (got {v!r})")
    return [float(v) for v in value]


def _param_groups(optimizer: Any) -> list[dict[str, Any]]:
    groups = getattr(optimizer, "param_groups", None)
    if not isinstance(groups, list) or not groups or not all(isinstance(g, dict) for g in groups):
        raise TypeError(f"optimizer must be a vk-adam optimizer, with param_groups (got {show(optimizer)})")
    return groups


class LRScheduler:
    """The base of every schedule: torch's ``LRScheduler`` protocol over ``factor(step)``.

    ``optimizer``: a vk-adam optimizer (anything whose ``param_groups`` is a list of dicts with
    an ``lr``). ``last_epoch=-1`` starts the schedule: each group's ``initial_lr`` is set to its
    ``lr`` unless it has one already (as torch's ``setdefault``), and the lrs of step 0 are set.
    ``last_epoch=k`` resumes at step ``k + 1`` from the groups' ``initial_lr``, which must be
    there (as in torch); loading a :meth:`state_dict` is the other way to resume.
    """

    #: The name saved in the state dict; a state dict of another kind is refused.
    kind: ClassVar[str] = ""
    #: The settings saved in the state dict, each with its check (name, value) -> value.
    _SETTINGS: ClassVar[tuple[tuple[str, Callable[[str, Any], Any]], ...]] = ()
    warmup_steps: int
    total_steps: int

    def __init__(self, optimizer: Any, last_epoch: int = -1, **settings: Any) -> None:
        for name, value in self._checked_settings(settings).items():
            setattr(self, name, value)
        groups = _param_groups(optimizer)
        last_epoch = _whole("last_epoch", last_epoch, -1)
        missing = [i for i, g in enumerate(groups) if "initial_lr" not in g]
        if last_epoch >= 0 and missing:
            raise ValueError(
                f"last_epoch={last_epoch} resumes a schedule, but param group {missing[0]} has no "
                "'initial_lr' (set by the scheduler that ran before); start with last_epoch=-1, "
                "or load the scheduler's state_dict()"
            )
        bases = [g.get("initial_lr", g.get("lr")) for g in groups]
        self.optimizer = optimizer
        self.base_lrs: list[float] = _lr_list("the param groups' initial_lr (else lr)", bases, len(groups))
        lrs = self._lrs_at(last_epoch + 1)  # may raise: nothing is changed before this
        for group, base in zip(groups, self.base_lrs, strict=True):
            group.setdefault("initial_lr", base)
        self.last_epoch = last_epoch + 1
        self._set(lrs)

    # -- the schedule --------------------------------------------------------------------------

    def factor(self, step: int) -> float:
        """The multiplier of the initial lr at ``step`` (the same for every group)."""
        raise NotImplementedError

    def _factors(self, step: int) -> list[Any]:
        return [self.factor(step)] * len(self.base_lrs)

    def _lrs_at(self, step: int) -> list[float]:
        lrs = []
        for index, (base, f) in enumerate(zip(self.base_lrs, self._factors(step), strict=True)):
            lr = base * f if is_real(f) else math.nan
            if not (is_real(lr) and 0.0 <= lr < math.inf):
                raise ValueError(
                    f"{type(self).__name__} gives param group {index} the factor {show(f)} at step "
                    f"{step}, so lr = {base!r} * {show(f)}; an lr must be a finite number >= 0"
                )
            lrs.append(float(lr))
        return lrs

    def lrs_at(self, step: int) -> list[float]:
        """The lr of each param group at ``step``, without changing anything."""
        return self._lrs_at(_steps("step", step))

    # -- torch's protocol ----------------------------------------------------------------------

    def step(self) -> None:
        """Advance one step (``last_epoch += 1``) and set each group's lr for it."""
        lrs = self._lrs_at(self.last_epoch + 1)
        self.last_epoch += 1
        self._set(lrs)

    def _set(self, lrs: list[float]) -> None:
        for group, lr in zip(self.optimizer.param_groups, lrs, strict=True):
            group["lr"] = lr
        self._last_lr = list(lrs)

    def get_last_lr(self) -> list[float]:
        """The lr of each param group that the last step (or the construction) set."""
        return list(self._last_lr)

    def state_dict(self) -> dict[str, Any]:
        """Plain data (JSON-able): ``kind``, the settings, ``last_epoch``, ``base_lrs``, ``_last_lr``."""
        return {
            "kind": self.kind,
            **{name: getattr(self, name) for name, _ in self._SETTINGS},
            "last_epoch": self.last_epoch,
            "base_lrs": list(self.base_lrs),
            "_last_lr": list(self._last_lr),
        }

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict` of the same kind of schedule.

        As in torch, the saved settings (``warmup_steps``, ...) replace this scheduler's. Unlike
        torch, each group's ``lr`` and ``initial_lr`` are set too (to the saved ``_last_lr`` and
        ``base_lrs``), so the next step, or a ``record_step``, runs with the resumed lr whether or
        not the optimizer's state was loaded. Everything is checked first: a bad state dict
        raises TypeError or ValueError and changes nothing.
        """
        self.apply_checked_state(self.check_state_dict(state_dict))

    def check_state_dict(self, state_dict: Any) -> dict[str, Any]:
        """Check a :meth:`state_dict` against this scheduler (its kind, keys, settings, and one
        lr per param group of its optimizer) without changing anything, and return it checked,
        for :meth:`apply_checked_state`. :meth:`load_state_dict` is the two in one; apart, they
        let a caller that restores more than a schedule (a checkpoint) check everything first
        and apply only once all of it passed. A bad state dict raises TypeError or ValueError."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"a scheduler state_dict must be a dict (got {show(state_dict)})")
        if state_dict.get("kind") != self.kind:
            raise ValueError(
                f"the state_dict is of a {state_dict.get('kind')!r} schedule; this scheduler is {self.kind!r}"
            )
        names = [name for name, _ in self._SETTINGS]
        expected = {"kind", *names, "last_epoch", "base_lrs", "_last_lr"}
        if set(state_dict) != expected:
            raise ValueError(
                f"a {type(self).__name__} state_dict has the keys {sorted(expected)}; this one has "
                f"{sorted(map(str, state_dict))}"
            )
        count = len(self.optimizer.param_groups)
        return {
            "settings": self._checked_settings({k: state_dict[k] for k in names}),
            "last_epoch": _steps("last_epoch", state_dict["last_epoch"]),
            "base_lrs": _lr_list("base_lrs", state_dict["base_lrs"], count),
            "_last_lr": _lr_list("_last_lr", state_dict["_last_lr"], count),
        }

    def apply_checked_state(self, checked: Mapping[str, Any]) -> None:
        """Apply what this scheduler's :meth:`check_state_dict` returned; cannot fail."""
        for name, value in checked["settings"].items():
            setattr(self, name, value)
        self.base_lrs = list(checked["base_lrs"])
        self.last_epoch = checked["last_epoch"]
        for group, base in zip(self.optimizer.param_groups, self.base_lrs, strict=True):
            group["initial_lr"] = base
        self._set(list(checked["_last_lr"]))

    @classmethod
    def _checked_settings(cls, values: Mapping[str, Any]) -> dict[str, Any]:
        checked = {name: check(name, values[name]) for name, check in cls._SETTINGS}
        total, warmup = checked.get("total_steps"), checked.get("warmup_steps", 0)
        if total is not None and total < max(1, warmup):
            raise ValueError(f"total_steps ({total}) must be at least warmup_steps ({warmup}) and at least 1")
        return checked

    def __repr__(self) -> str:
        settings = "".join(f"{k}={getattr(self, k)!r}, " for k, _ in self._SETTINGS)
        return f"{type(self).__name__}({settings}last_epoch={self.last_epoch})"
