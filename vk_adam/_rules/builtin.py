"""Adam, AdamW and SGD: vk-adam's own update rules, registered through the same hook as plugins.

Update order and error messages follow torch.optim (single-tensor path); see docs/semantics.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from .hookspecs import hookimpl
from .rule import Hyper, ShaderVariant, StateBuffer, UpdateRule

F64 = npt.NDArray[np.float64]

# --------------------------------------------------------------------------------------------
# Adam / AdamW (Kingma & Ba 2015, Alg. 1; Loshchilov & Hutter 2019 for decoupled decay)
# --------------------------------------------------------------------------------------------

_ADAM_STATE = (StateBuffer("exp_avg"), StateBuffer("exp_avg_sq", nonnegative=True))
_ADAM_VARIANTS = {
    "adam": ShaderVariant("adam", _ADAM_STATE, hyper_count=8),
    "adam_amsgrad": ShaderVariant(
        "adam_amsgrad", (*_ADAM_STATE, StateBuffer("max_exp_avg_sq", nonnegative=True)), hyper_count=8
    ),
}


def _validate_adam(hyper: Hyper) -> None:
    lr, eps, wd = hyper["lr"], hyper["eps"], hyper["weight_decay"]
    betas = hyper["betas"]
    # torch's checks, plus: infinite values are refused too (they only make NaNs).
    if not 0.0 <= lr < math.inf:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps < math.inf:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ValueError(f"Invalid betas: {betas!r} (expected a pair (beta1, beta2))")
    for index, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {index}: {beta}")
    if not 0.0 <= wd < math.inf:
        raise ValueError(f"Invalid weight_decay value: {wd}")


def _adam_variant(hyper: Hyper) -> str:
    return "adam_amsgrad" if hyper["amsgrad"] else "adam"


def _adam_spec_constants(hyper: Hyper) -> Sequence[float]:
    # constant_id 1 = MAXIMIZE, 2 = DECOUPLED_WEIGHT_DECAY (glsl/adam_body.glsl)
    return (float(bool(hyper["maximize"])), float(bool(hyper["decoupled_weight_decay"])))


def _adam_push_constants(hyper: Hyper, step: int) -> Sequence[float]:
    """Per-step values in float64, the order of glsl/adam_body.glsl's HYPER(k)."""
    lr = float(hyper["lr"])
    beta1, beta2 = (float(b) for b in hyper["betas"])
    wd = float(hyper["weight_decay"])
    step_size = lr / (1.0 - beta1**step)
    bias_correction2_sqrt = math.sqrt(1.0 - beta2**step)
    decoupled = bool(hyper["decoupled_weight_decay"])
    return (
        step_size,
        bias_correction2_sqrt,
        1.0 - beta1,
        beta2,
        1.0 - beta2,
        float(hyper["eps"]),
        0.0 if decoupled else wd,
        lr * wd if decoupled else 0.0,
    )


def _adam_capturable_constants(hyper: Hyper) -> Sequence[float]:
    """A captured step's constant values (glsl/adam_body.glsl): the shader computes the step
    size, the bias corrections and lr * weight_decay from the device's clock and lr."""
    beta1, beta2 = (float(b) for b in hyper["betas"])
    wd = float(hyper["weight_decay"])
    decoupled = bool(hyper["decoupled_weight_decay"])
    return (
        _log(beta1),
        _log(beta2),
        1.0 - beta1,
        beta2,
        1.0 - beta2,
        float(hyper["eps"]),
        0.0 if decoupled else wd,
        wd if decoupled else 0.0,
    )


def _log(beta: float) -> float:
    # ln(0) = -inf would make 0 * ln(0) a NaN on the device: beta = 0 gives 1 - 0^t = 1 (t >= 1),
    # as any very negative log does
    return math.log(beta) if beta > 0.0 else -1e30


def adam_reference(param: F64, grad: F64, state: dict[str, F64], hyper: Hyper, step: int) -> None:
    """Adam/AdamW in float64, in place: torch.optim.Adam's single-tensor order."""
    lr = float(hyper["lr"])
    beta1, beta2 = (float(b) for b in hyper["betas"])
    eps, wd = float(hyper["eps"]), float(hyper["weight_decay"])
    g = -grad if hyper["maximize"] else grad.copy()
    if hyper["decoupled_weight_decay"]:
        param *= 1.0 - lr * wd
    elif wd != 0.0:
        g += wd * param
    m, v = state["exp_avg"], state["exp_avg_sq"]
    m += (1.0 - beta1) * (g - m)
    v *= beta2
    v += (1.0 - beta2) * g * g
    step_size = lr / (1.0 - beta1**step)
    bias_correction2_sqrt = math.sqrt(1.0 - beta2**step)
    if hyper["amsgrad"]:
        vmax = state["max_exp_avg_sq"]
        np.maximum(vmax, v, out=vmax)
        v = vmax
    param -= step_size * (m / (np.sqrt(v) / bias_correction2_sqrt + eps))


_ADAM_DEFAULTS = {
    "lr": 1e-3,
    "betas": (0.9, 0.999),
    "eps": 1e-8,
    "weight_decay": 0.0,
    "amsgrad": False,
    "maximize": False,
    "decoupled_weight_decay": False,
}

ADAM = UpdateRule(
    name="adam",
    defaults=_ADAM_DEFAULTS,
    variants=_ADAM_VARIANTS,
    select_variant=_adam_variant,
    push_constants=_adam_push_constants,
    reference=adam_reference,
    validate=_validate_adam,
    spec_constants=_adam_spec_constants,
    capturable_constants=_adam_capturable_constants,
    description="Adam (Kingma & Ba 2015), L2 weight decay; torch.optim.Adam semantics",
)

ADAMW = replace(
    ADAM,
    name="adamw",
    defaults={**_ADAM_DEFAULTS, "weight_decay": 1e-2, "decoupled_weight_decay": True},
    description="AdamW (Loshchilov & Hutter 2019), decoupled weight decay; torch.optim.AdamW",
)

# --------------------------------------------------------------------------------------------
# SGD with momentum / Nesterov (torch.optim.SGD)
# --------------------------------------------------------------------------------------------

_SGD_VARIANTS = {
    "sgd": ShaderVariant("sgd", (), hyper_count=5),
    "sgd_momentum": ShaderVariant("sgd_momentum", (StateBuffer("momentum_buffer"),), hyper_count=5),
}


def _validate_sgd(hyper: Hyper) -> None:
    lr, momentum, wd = hyper["lr"], hyper["momentum"], hyper["weight_decay"]
    # torch's checks, plus: infinite values (and a non-finite dampening) are refused too.
    if not 0.0 <= lr < math.inf:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= momentum < math.inf:
        raise ValueError(f"Invalid momentum value: {momentum}")
    if not 0.0 <= wd < math.inf:
        raise ValueError(f"Invalid weight_decay value: {wd}")
    if not math.isfinite(hyper["dampening"]):
        raise ValueError(f"Invalid dampening value: {hyper['dampening']}")
    if hyper["nesterov"] and (momentum <= 0 or hyper["dampening"] != 0):
        raise ValueError("Nesterov momentum requires a momentum and zero dampening")


def _sgd_push_constants(hyper: Hyper, step: int) -> Sequence[float]:
    return (
        float(hyper["lr"]),
        float(hyper["weight_decay"]),
        float(hyper["momentum"]),
        1.0 - float(hyper["dampening"]),
        1.0 if step == 1 else 0.0,
    )


def _sgd_capturable_constants(hyper: Hyper) -> Sequence[float]:
    # the lr and the first step come from the device's clock (glsl/sgd_body.glsl)
    return (0.0, float(hyper["weight_decay"]), float(hyper["momentum"]), 1.0 - float(hyper["dampening"]), 0.0)


def sgd_reference(param: F64, grad: F64, state: dict[str, F64], hyper: Hyper, step: int) -> None:
    """SGD in float64, in place: torch.optim.SGD's single-tensor order."""
    g = -grad if hyper["maximize"] else grad.copy()
    wd, momentum = float(hyper["weight_decay"]), float(hyper["momentum"])
    if wd != 0.0:
        g += wd * param
    if momentum != 0.0:
        buf = state["momentum_buffer"]
        if step == 1:
            buf[...] = g
        else:
            buf *= momentum
            buf += (1.0 - float(hyper["dampening"])) * g
        g = g + momentum * buf if hyper["nesterov"] else buf.copy()
    param -= float(hyper["lr"]) * g


SGD = UpdateRule(
    name="sgd",
    defaults={
        "lr": 1e-3,
        "momentum": 0.0,
        "dampening": 0.0,
        "weight_decay": 0.0,
        "nesterov": False,
        "maximize": False,
    },
    variants=_SGD_VARIANTS,
    select_variant=lambda hyper: "sgd_momentum" if hyper["momentum"] != 0 else "sgd",
    push_constants=_sgd_push_constants,
    reference=sgd_reference,
    validate=_validate_sgd,
    # constant_id 1 = MAXIMIZE, 2 = NESTEROV (glsl/sgd_body.glsl)
    spec_constants=lambda hyper: (float(bool(hyper["maximize"])), float(bool(hyper["nesterov"]))),
    capturable_constants=_sgd_capturable_constants,
    description="SGD with momentum, dampening and Nesterov; torch.optim.SGD semantics",
)


@hookimpl
def vk_adam_rules() -> list[UpdateRule]:
    """vk-adam's built-in rules, provided through the same hook as any plugin's."""
    return [ADAM, ADAMW, SGD]
