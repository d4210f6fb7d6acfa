"""The user-facing optimizer classes: thin, typed front doors over :class:`Optimizer`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from .._rules import ADAM, ADAMW
from .._rules import SGD as _SGD_RULE
from .optimizer import Optimizer
from .options import OptimizerOptions, refuse_unknown, spell_out_options

if TYPE_CHECKING:  # typing.Unpack is Python 3.11's; annotations are not evaluated (3.10)
    from typing import Unpack

# The signatures show each rule's own defaults (one definition: the rule's ``defaults``).
_A, _AW, _S = ADAM.defaults, ADAMW.defaults, _SGD_RULE.defaults


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
    ``clip_grad_norm``, ``state_dtype``, ``stochastic_rounding``, ``seed``, ``exportable``,
    ``device_params``, ``capturable``): see
    :class:`vk_adam.Optimizer`.
    """

    #: The registered rule this class steps with (:class:`AdamW` names its own).
    _rule_name = "adam"

    @spell_out_options()
    def __init__(
        self,
        params: Iterable[Any],
        lr: float = _A["lr"],
        betas: tuple[float, float] = _A["betas"],
        eps: float = _A["eps"],
        weight_decay: float = _A["weight_decay"],
        amsgrad: bool = _A["amsgrad"],
        maximize: bool = _A["maximize"],
        *,
        decoupled_weight_decay: bool = _A["decoupled_weight_decay"],
        **options: Unpack[OptimizerOptions],
    ) -> None:
        super().__init__(
            params,
            self._rule_name,
            lr=lr,
            betas=_pair(betas),
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            maximize=maximize,
            decoupled_weight_decay=decoupled_weight_decay,
            **refuse_unknown(f"{type(self).__name__}.__init__", options),
        )


class AdamW(Adam):
    """AdamW (Loshchilov & Hutter 2019): Adam with decoupled weight decay, default 1e-2,
    as torch.optim.AdamW (a subclass of :class:`Adam`, as torch's is): ``p *= 1 - lr *
    weight_decay`` before the Adam update.
    Keyword options (``device``, ``manager``, ``zero_grad``, ``skip_nonfinite``, ``profile``,
    ``clip_grad_norm``, ``state_dtype``, ``stochastic_rounding``, ``seed``, ``exportable``,
    ``device_params``, ``capturable``): see
    :class:`vk_adam.Optimizer`.
    """

    _rule_name = "adamw"

    # Only the signature is AdamW's own: its defaults (weight decay 1e-2) and no
    # ``decoupled_weight_decay`` (always on). The body is Adam's.
    @spell_out_options()
    def __init__(
        self,
        params: Iterable[Any],
        lr: float = _AW["lr"],
        betas: tuple[float, float] = _AW["betas"],
        eps: float = _AW["eps"],
        weight_decay: float = _AW["weight_decay"],
        amsgrad: bool = _AW["amsgrad"],
        maximize: bool = _AW["maximize"],
        **options: Unpack[OptimizerOptions],
    ) -> None:
        options = refuse_unknown(f"{type(self).__name__}.__init__", options)  # before Adam sees them
        super().__init__(
            params, lr, betas, eps, weight_decay, amsgrad, maximize, decoupled_weight_decay=True, **options
        )


class SGD(Optimizer):
    """SGD with momentum, dampening, Nesterov, weight decay and maximize: torch.optim.SGD.
    Keyword options (``device``, ``manager``, ``zero_grad``, ``skip_nonfinite``, ``profile``,
    ``clip_grad_norm``, ``state_dtype``, ``stochastic_rounding``, ``seed``, ``exportable``,
    ``device_params``, ``capturable``): see
    :class:`vk_adam.Optimizer`.
    """

    @spell_out_options()
    def __init__(
        self,
        params: Iterable[Any],
        lr: float = _S["lr"],
        momentum: float = _S["momentum"],
        dampening: float = _S["dampening"],
        weight_decay: float = _S["weight_decay"],
        nesterov: bool = _S["nesterov"],
        *,
        maximize: bool = _S["maximize"],
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
