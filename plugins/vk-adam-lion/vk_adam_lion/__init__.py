"""Lion for vk-adam: a complete third-party update-rule plugin.

Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms" (arXiv:2302.06675).
Use it through the registry: ``vk_adam.create("lion", params, lr=1e-4)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import vk_adam

SPIRV = Path(__file__).resolve().parent / "spirv" / "lion.spv"


def _validate(hyper: Mapping[str, Any]) -> None:
    if not 0.0 <= hyper["lr"]:
        raise ValueError(f"Invalid learning rate: {hyper['lr']}")
    for index, beta in enumerate(hyper["betas"]):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {index}: {beta}")
    if not 0.0 <= hyper["weight_decay"]:
        raise ValueError(f"Invalid weight_decay value: {hyper['weight_decay']}")


def _push_constants(hyper: Mapping[str, Any], step: int) -> Sequence[float]:
    beta1, beta2 = (float(b) for b in hyper["betas"])
    return (hyper["lr"], beta1, 1.0 - beta1, beta2, 1.0 - beta2, hyper["weight_decay"])


def _capturable_constants(hyper: Mapping[str, Any]) -> Sequence[float]:
    # A captured step (capturable=True) reads the lr from the device's clock when it runs
    # (glsl/lion.comp): the rest stays constant from step to step, and slot 0 is left at zero.
    beta1, beta2 = (float(b) for b in hyper["betas"])
    return (0.0, beta1, 1.0 - beta1, beta2, 1.0 - beta2, hyper["weight_decay"])


def lion_reference(param, grad, state, hyper, step) -> None:  # type: ignore[no-untyped-def]
    """Lion in float64, in place (the same order as glsl/lion.comp)."""
    lr, wd = float(hyper["lr"]), float(hyper["weight_decay"])
    beta1, beta2 = (float(b) for b in hyper["betas"])
    m = state["exp_avg"]
    u = np.sign(beta1 * m + (1.0 - beta1) * grad)
    param -= lr * (u + wd * param)
    m *= beta2
    m += (1.0 - beta2) * grad


LION = vk_adam.UpdateRule(
    name="lion",
    defaults={"lr": 1e-4, "betas": (0.9, 0.99), "weight_decay": 0.0},
    variants={"lion": vk_adam.ShaderVariant(SPIRV, (vk_adam.StateBuffer("exp_avg"),), hyper_count=6)},
    select_variant=lambda hyper: "lion",
    push_constants=_push_constants,
    reference=lion_reference,
    validate=_validate,
    capturable_constants=_capturable_constants,  # declares captured steps (capturable=True)
    description="Lion (Chen et al. 2023): sign of an interpolated momentum",
)


@vk_adam.hookimpl
def vk_adam_rules() -> list[vk_adam.UpdateRule]:
    return [LION]
