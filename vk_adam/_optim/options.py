"""The keyword options every optimizer front takes besides a rule's hyperparameters, defined once.

``OptimizerOptions`` types them for ``**options: Unpack[OptimizerOptions]`` (as typeshed and
httpx type a shared keyword set), ``DEFAULTS`` holds their defaults, ``split_options`` takes them
out of a front's keywords where the rest are hyperparameters (``Optimizer``,
``ZeroRedundancyOptimizer``), and ``spell_out_options`` gives a front's signature the options
one by one, so ``help()`` and editors list them with their defaults as before. (The lifetime
both optimizers share, ``close()``, ``closed`` and the ``with`` block, is ``vk_adam._lifetime``.)
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypedDict, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])


class OptimizerOptions(TypedDict, total=False):
    """The keyword options of :class:`vk_adam.Optimizer` and its presets (see its docstring)."""

    device: int | str | None
    """Vulkan device index or name substring; ignored when ``manager`` is given."""
    manager: Any
    """An existing ``kp.Manager`` (or a ``vk_adam.DeviceHandle``); required for kp tensor params."""
    zero_grad: bool
    """Zero the device gradient buffer in the same pass as the step."""
    skip_nonfinite: bool
    """Skip the whole step on the GPU when any gradient holds NaN or Inf."""
    profile: bool
    """Time synchronous steps (``last_gpu_seconds``, ``last_host_seconds``)."""
    clip_grad_norm: float | None
    """Clip the gradients by their global L2 norm to at most this value, on the device."""
    state_dtype: str
    """``"float32"``, ``"bfloat16"`` or ``"int8-blockwise"`` (docs/formats.md)."""
    stochastic_rounding: bool
    """Stochastic rounding of 16-bit params without an fp32 master copy."""
    seed: int
    """The seed of the rounding stream."""
    exportable: bool
    """Make the param, grad and state buffers shareable (``vk_adam.interop.export_memory``)."""
    device_params: bool
    """The device holds NumPy groups' params; each step copies them into the arrays."""
    capturable: bool
    """Keep the step count and lrs on the device: a recorded step may be evaluated any number of times."""


#: Every option's default, in the order the signatures list them.
DEFAULTS: OptimizerOptions = {
    "device": None,
    "manager": None,
    "zero_grad": True,
    "skip_nonfinite": False,
    "profile": False,
    "clip_grad_norm": None,
    "state_dtype": "float32",
    "stochastic_rounding": False,
    "seed": 0,
    "exportable": False,
    "device_params": False,
    "capturable": False,
}
#: The options of ``ZeroRedundancyOptimizer``: it owns its device, and its steps are timed by phase.
SHARD_OPTIONS = tuple(
    name for name in DEFAULTS if name not in ("manager", "profile", "exportable", "device_params")
)


def split_options(
    keywords: Mapping[str, Any], names: tuple[str, ...] = tuple(DEFAULTS)
) -> tuple[OptimizerOptions, dict[str, Any]]:
    """(the options among ``names``, each given or its default; the other keywords)."""
    options: dict[str, Any] = {name: keywords.get(name, DEFAULTS[name]) for name in names}  # type: ignore[literal-required]
    rest = {k: v for k, v in keywords.items() if k not in options}
    return typing.cast(OptimizerOptions, options), rest


def refuse_unknown(where: str, keywords: Mapping[str, Any]) -> OptimizerOptions:
    """The options of a front that takes nothing else by keyword, with their defaults; another
    keyword is the TypeError Python itself raises for a signature without it."""
    options, rest = split_options(keywords)
    for name in rest:
        raise TypeError(f"{where}() got an unexpected keyword argument {name!r}")
    return options


def spell_out_options(names: tuple[str, ...] = tuple(DEFAULTS)) -> Callable[[_F], _F]:
    """Give ``__init__``'s signature (``help()``, ``inspect.signature``) the options ``names``
    as keyword-only parameters with their defaults, in place of ``**options`` (kept when it
    takes hyperparameters besides: then it stays last)."""

    def decorate(init: _F) -> _F:
        signature = inspect.signature(init)
        # as written (strings: this module postpones annotations), as the other parameters show
        hints = {n: getattr(a, "__forward_arg__", a) for n, a in OptimizerOptions.__annotations__.items()}
        spelled = [
            inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=DEFAULTS[n], annotation=hints[n])  # type: ignore[literal-required]
            for n in names
        ]
        given = list(signature.parameters.values())
        public = [p for p in given if p.kind is not p.VAR_KEYWORD and not p.name.startswith("_")]
        private = [p for p in given if p.kind is not p.VAR_KEYWORD and p.name.startswith("_")]
        hyper = [p for p in given if p.kind is p.VAR_KEYWORD and p.name != "options"]
        init.__signature__ = signature.replace(parameters=[*public, *spelled, *private, *hyper])  # type: ignore[attr-defined]
        return init

    return decorate
