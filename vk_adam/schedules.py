"""Learning-rate schedules for vk-adam optimizers, with torch.optim.lr_scheduler's protocol.

A scheduler sets each param group's ``lr`` to ``initial_lr * factor(step)``: when it is built
(step 0, as in torch), then at every :meth:`LRScheduler.step`. Changing an lr between steps
costs nothing (it is a push constant), and ``record_step`` reads it when it records, so steps
recorded with ``scheduler.step()`` between them each carry their own lr::

    opt = vk_adam.AdamW(params, lr=3e-4)
    sched = vk_adam.schedules.CosineDecay(opt, warmup_steps=100, total_steps=1000)
    for batch in batches:
        opt.step(grads(batch))
        sched.step()

:class:`Constant`, :class:`LinearDecay`, :class:`CosineDecay` and :class:`CosineWithHardRestarts`
compute the formula of a ``transformers`` schedule function (each class names its own) in the
same floating-point order, so their lrs are bit-identical; they hold past ``total_steps`` too,
as there. :class:`LinearWarmup` is torch's ``LinearLR`` up to the initial lr, and
:class:`LambdaLR` torch's ``LambdaLR``.

:meth:`LRScheduler.state_dict` is plain JSON-able data (a LambdaLR's function is not saved, as in
torch); :func:`vk_adam.lora.save_checkpoint` stores it with ``scheduler=``. Bad arguments and
state dicts raise TypeError / ValueError naming the argument, and change nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, ClassVar

from ._optim.groups import is_index, is_real, show

#: Steps are whole numbers up to here (exact as floats, like the optimizer's step counts).
MAX_STEP = 2**53

# fmt: off
__all__ = ["Constant", "CosineDecay", "CosineWithHardRestarts", "LRScheduler", "LambdaLR",
           "LinearDecay", "LinearWarmup"]
# fmt: on


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
        self._apply_state(self._checked_state(state_dict))

    def _checked_state(self, state_dict: Any) -> dict[str, Any]:
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

    def _apply_state(self, checked: Mapping[str, Any]) -> None:
        """Apply what :meth:`_checked_state` returned; cannot fail."""
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


class _WarmupThen(LRScheduler):
    """transformers' shape: ``step / max(1, warmup_steps)`` below ``warmup_steps``, then :meth:`_after`."""

    def factor(self, step: int) -> float:
        if step < self.warmup_steps:
            return float(step) / float(max(1, self.warmup_steps))
        return self._after(step)

    def _after(self, step: int) -> float:
        raise NotImplementedError

    def _progress(self, step: int) -> float:
        return float(step - self.warmup_steps) / float(max(1, self.total_steps - self.warmup_steps))


class Constant(_WarmupThen):
    """The initial lr, after an optional linear warmup from 0 over ``warmup_steps`` steps
    (transformers' get_constant_schedule_with_warmup; get_constant_schedule when 0)."""

    kind = "constant"
    _SETTINGS = (("warmup_steps", _steps),)

    def __init__(self, optimizer: Any, *, warmup_steps: int = 0, last_epoch: int = -1) -> None:
        super().__init__(optimizer, last_epoch, warmup_steps=warmup_steps)

    def _after(self, step: int) -> float:
        return 1.0


class LinearWarmup(LRScheduler):
    """From ``start_factor`` times the initial lr up to the initial lr, linearly over
    ``warmup_steps`` steps, then constant: torch's ``LinearLR(start_factor, end_factor=1.0,
    total_iters=warmup_steps)`` (whose ``start_factor`` must be > 0; here 0 is allowed, and
    then it equals :class:`Constant` with that warmup)."""

    kind = "linear_warmup"
    _SETTINGS = (("warmup_steps", _steps), ("start_factor", _unit))
    start_factor: float

    def __init__(
        self, optimizer: Any, *, warmup_steps: int, start_factor: float = 0.0, last_epoch: int = -1
    ) -> None:
        super().__init__(optimizer, last_epoch, warmup_steps=warmup_steps, start_factor=start_factor)

    def factor(self, step: int) -> float:
        s = self.start_factor
        return 1.0 if step >= self.warmup_steps else s + (1.0 - s) * step / self.warmup_steps


class LinearDecay(_WarmupThen):
    """Linear warmup from 0 over ``warmup_steps``, then linear decay to 0 at ``total_steps``
    (transformers' get_linear_schedule_with_warmup)."""

    kind = "linear_decay"
    _SETTINGS = _DECAY

    def __init__(
        self, optimizer: Any, *, total_steps: int, warmup_steps: int = 0, last_epoch: int = -1
    ) -> None:
        super().__init__(optimizer, last_epoch, warmup_steps=warmup_steps, total_steps=total_steps)

    def _after(self, step: int) -> float:
        return max(0.0, float(self.total_steps - step) / float(max(1, self.total_steps - self.warmup_steps)))


class CosineDecay(_WarmupThen):
    """Linear warmup from 0 over ``warmup_steps``, then a cosine of ``num_cycles`` waves over
    the remaining steps (0.5: from the initial lr down to ``min_lr_ratio`` times it at
    ``total_steps``): transformers' get_cosine_schedule_with_warmup, and with ``min_lr_ratio``
    get_cosine_with_min_lr_schedule_with_warmup's ``min_lr_rate``. With no warmup and
    ``num_cycles=0.5`` it is torch's ``CosineAnnealingLR(T_max=total_steps,
    eta_min=min_lr_ratio * lr)``. Past ``total_steps`` the cosine goes on (rising again), as in both."""

    kind = "cosine"
    _SETTINGS = (*_DECAY, ("num_cycles", _positive), ("min_lr_ratio", _unit))
    num_cycles: float
    min_lr_ratio: float

    def __init__(
        self,
        optimizer: Any,
        *,
        total_steps: int,
        warmup_steps: int = 0,
        num_cycles: float = 0.5,
        min_lr_ratio: float = 0.0,
        last_epoch: int = -1,
    ) -> None:
        settings = {"warmup_steps": warmup_steps, "total_steps": total_steps, "num_cycles": num_cycles}
        super().__init__(optimizer, last_epoch, **settings, min_lr_ratio=min_lr_ratio)

    def _after(self, step: int) -> float:
        f = 0.5 * (1.0 + math.cos(math.pi * float(self.num_cycles) * 2.0 * self._progress(step)))
        return max(0.0, f * (1 - self.min_lr_ratio) + self.min_lr_ratio)


class CosineWithHardRestarts(_WarmupThen):
    """Linear warmup from 0 over ``warmup_steps``, then ``num_cycles`` half-cosines from the
    initial lr down to 0, each restarting at the initial lr, ending at ``total_steps``
    (transformers' get_cosine_with_hard_restarts_schedule_with_warmup); 0 after."""

    kind = "cosine_with_hard_restarts"
    _SETTINGS = (*_DECAY, ("num_cycles", _count))
    num_cycles: int

    def __init__(
        self,
        optimizer: Any,
        *,
        total_steps: int,
        warmup_steps: int = 0,
        num_cycles: int = 1,
        last_epoch: int = -1,
    ) -> None:
        settings = {"warmup_steps": warmup_steps, "total_steps": total_steps, "num_cycles": num_cycles}
        super().__init__(optimizer, last_epoch, **settings)

    def _after(self, step: int) -> float:
        if (progress := self._progress(step)) >= 1.0:
            return 0.0
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * ((float(self.num_cycles) * progress) % 1.0))))


class LambdaLR(LRScheduler):
    """lr = initial_lr * ``lr_lambda(step)``, as torch's ``LambdaLR``: one function of the
    step for every group, or a list of one per param group. The functions are not saved in
    :meth:`state_dict` (as in torch); pass the same ones when resuming. A function that gives
    a non-number, or an lr that is negative or not finite, raises ValueError and changes nothing.
    """

    kind = "lambda"

    def __init__(
        self,
        optimizer: Any,
        lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]],
        last_epoch: int = -1,
    ) -> None:
        count = len(_param_groups(optimizer))
        lambdas: list[Any] = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * count
        if len(lambdas) != count:
            raise ValueError(
                f"lr_lambda: expected {count} function(s), one per param group (got {len(lambdas)})"
            )
        if not all(callable(f) for f in lambdas):
            raise TypeError(
                "lr_lambda must be a function of the step, or a list of one per param group "
                f"(got {show(lr_lambda)})"
            )
        self.lr_lambdas: list[Callable[[int], float]] = lambdas
        super().__init__(optimizer, last_epoch)

    def factor(self, step: int) -> float:  # the first group's (lrs_at gives every group's lr)
        return self.lr_lambdas[0](step)

    def _factors(self, step: int) -> list[Any]:
        return [f(step) for f in self.lr_lambdas]
