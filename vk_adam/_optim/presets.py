"""The user-facing optimizer classes: thin, typed front doors over :class:`Optimizer`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from .optimizer import Optimizer
from .options import OptimizerOptions, refuse_unknown, spell_out_options

if TYPE_CHECKING:  # typing.Unpack is Python 3.11's; annotations are not evaluated (3.10)
    from typing import Unpack


def _pair(betas: Any) -> Any:
    """``betas`` as a tuple when it is a list, tuple or array; anything else is left for the
    hyperparameter checks to refuse with a message that names ``betas``."""
    if isinstance(betas, (list, tuple)) or (isinstance(betas, np.ndarray) and betas.ndim == 1):
        return tuple(betas)
    return betas


class Adam(Optimizer):
    """Adam (Kingma & Ba 2015) with torch.optim.Adam's arguments, defaults and errors.

    ``weight_decay`` is L2 (added to the gradient) unless ``decoupled_weight_decay=True``.
    Keyword options (``device``, ``manager``, ``zero_grad``, ``skip_nonfinite``, ``profile``,
    ``clip_grad_norm``, ``state_dtype``, ``stochastic_rounding``, ``seed``, ``exportable``): see
    :class:`vk_adam.Optimizer`.
    """

    @spell_out_options()
    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        maximize: bool = False,
        *,
        decoupled_weight_decay: bool = False,
        **options: Unpack[OptimizerOptions],
    ) -> None:
        super().__init__(
            params,
            "adam",
            lr=lr,
            betas=_pair(betas),
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            maximize=maximize,
            decoupled_weight_decay=decoupled_weight_decay,
            **refuse_unknown(f"{type(self).__name__}.__init__", options),
        )


class AdamW(Optimizer):
    """AdamW (Loshchilov & Hutter 2019): Adam with decoupled weight decay, default 1e-2,
    as torch.optim.AdamW: ``p *= 1 - lr * weight_decay`` before the Adam update.
    Keyword options (``device``, ``manager``, ``zero_grad``, ``skip_nonfinite``, ``profile``,
    ``clip_grad_norm``, ``state_dtype``, ``stochastic_rounding``, ``seed``, ``exportable``): see
    :class:`vk_adam.Optimizer`.
    """

    @spell_out_options()
    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        maximize: bool = False,
        **options: Unpack[OptimizerOptions],
    ) -> None:
        super().__init__(
            params,
            "adamw",
            lr=lr,
            betas=_pair(betas),
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            maximize=maximize,
            **refuse_unknown(f"{type(self).__name__}.__init__", options),
        )


class SGD(Optimizer):
    """SGD with momentum, dampening, Nesterov, weight decay and maximize: torch.optim.SGD.
    Keyword options (``device``, ``manager``, ``zero_grad``, ``skip_nonfinite``, ``profile``,
    ``clip_grad_norm``, ``state_dtype``, ``stochastic_rounding``, ``seed``, ``exportable``): see
    :class:`vk_adam.Optimizer`.
    """

    @spell_out_options()
    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        **options: Unpack[OptimizerOptions],
    ) -> None:
        super().__init__(
            params,
            "sgd",
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
            maximize=maximize,
            **refuse_unknown(f"{type(self).__name__}.__init__", options),
        )


def create(rule: str, params: Iterable[Any], **kwargs: Any) -> Optimizer:
    """An optimizer for any registered rule by name: ``vk_adam.create("lion", params, lr=1e-4)``.

    ``kwargs`` are the rule's hyperparameters plus :class:`Optimizer`'s keyword options.
    """
    return Optimizer(params, rule, **kwargs)
