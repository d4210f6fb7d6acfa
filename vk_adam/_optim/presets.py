"""The user-facing optimizer classes: thin, typed front doors over :class:`Optimizer`."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from .._rules import ADAM, ADAMW, UpdateRule
from .._rules import SGD as _SGD_RULE
from .optimizer import Optimizer
from .options import OptimizerOptions, refuse_unknown, spell_out_options

if TYPE_CHECKING:  # typing.Unpack is Python 3.11's; annotations are not evaluated (3.10)
    from typing import Unpack

# The signatures show each rule's own defaults (one definition: the rule's ``defaults``).
_S = _SGD_RULE.defaults


def _pair(betas: Any) -> Any:
    """``betas`` as a tuple when it is a list, tuple or array; anything else is left for the
    hyperparameter checks to refuse with a message that names ``betas``."""
    if isinstance(betas, (list, tuple)) or (isinstance(betas, np.ndarray) and betas.ndim == 1):
        return tuple(betas)
    return betas


def _adam_init(name: str, rule: UpdateRule, keyword_only: tuple[str, ...] = ()) -> Callable[..., None]:
    """The ``__init__`` of class ``name`` (Adam, AdamW), defined once: torch's arguments over
    ``rule``, with the rule's defaults; ``keyword_only``: the rule's hyperparameters taken by
    keyword only, after those (Adam's ``decoupled_weight_decay``; AdamW has none, and refuses it
    as an unknown keyword)."""
    d = rule.defaults

    def __init__(
        self: Optimizer,
        params: Iterable[Any],
        lr: float = d["lr"],
        betas: tuple[float, float] = d["betas"],
        eps: float = d["eps"],
        weight_decay: float = d["weight_decay"],
        amsgrad: bool = d["amsgrad"],
        maximize: bool = d["maximize"],
        **options: Any,
    ) -> None:
        extra = {key: options.pop(key, d[key]) for key in keyword_only}
        # the next __init__ after this class's, as super() in the class body would find it
        owner: type[Optimizer] = next(c for c in type(self).__mro__ if vars(c).get("__init__") is __init__)
        next_init: Callable[..., None] = super(owner, self).__init__
        next_init(
            params,
            rule.name,
            lr=lr,
            betas=_pair(betas),
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            maximize=maximize,
            **extra,
            **refuse_unknown(f"{type(self).__name__}.__init__", options),
        )

    # The signature help() and inspect.signature show: self unannotated, the keyword-only
    # hyperparameters, then every option (spell_out_options), as a def in the class would.
    self_, *given, rest = inspect.signature(__init__).parameters.values()
    keyword = [
        inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=d[k], annotation="bool")
        for k in keyword_only
    ]
    parameters = [self_.replace(annotation=inspect.Parameter.empty), *given, *keyword, rest]
    __init__.__signature__ = inspect.signature(__init__).replace(parameters=parameters)  # type: ignore[attr-defined]
    __init__.__qualname__ = f"{name}.__init__"
    return spell_out_options()(__init__)


class Adam(Optimizer):
    """Adam (Kingma & Ba 2015) with torch.optim.Adam's arguments, defaults and errors.

    ``weight_decay`` is L2 (added to the gradient) unless ``decoupled_weight_decay=True``.
    Keyword options (``device``, ``manager``, ``zero_grad``, ``skip_nonfinite``, ``profile``,
    ``clip_grad_norm``, ``state_dtype``, ``stochastic_rounding``, ``seed``, ``exportable``,
    ``device_params``, ``capturable``): see
    :class:`vk_adam.Optimizer`.
    """

    __init__ = _adam_init("Adam", ADAM, ("decoupled_weight_decay",))


class AdamW(Optimizer):
    """AdamW (Loshchilov & Hutter 2019): Adam with decoupled weight decay, default 1e-2,
    as torch.optim.AdamW: ``p *= 1 - lr * weight_decay`` before the Adam update.
    Keyword options (``device``, ``manager``, ``zero_grad``, ``skip_nonfinite``, ``profile``,
    ``clip_grad_norm``, ``state_dtype``, ``stochastic_rounding``, ``seed``, ``exportable``,
    ``device_params``, ``capturable``): see
    :class:`vk_adam.Optimizer`.
    """

    __init__ = _adam_init("AdamW", ADAMW)


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
