"""The schedules: each a ``factor(step)`` of the initial lr, over :class:`LRScheduler`
(``_scheduler``). Public as :mod:`vk_adam.schedules`."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from .._values import show
from ._scheduler import _DECAY, LRScheduler, _count, _param_groups, _positive, _steps, _unit


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
