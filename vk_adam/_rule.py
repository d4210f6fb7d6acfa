"""The update-rule interface: what a rule (built-in or plugin) hands to the optimizer.

A rule is one small object (cf. optax's ``GradientTransformation``): its name, its shader
variants (SPIR-V + the state buffers that variant needs), its hyperparameters with defaults and
validation, how it packs per-step push constants, and a float64 NumPy reference of the same math.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["Hyper", "ReferenceFn", "ShaderVariant", "StateBuffer", "UpdateRule"]

#: Hyperparameters of one parameter group, after defaults are merged (``lr``, ``betas``...).
Hyper = Mapping[str, Any]
#: ``reference(param, grad, state, hyper, step)``: float64 arrays updated in place; ``step`` is
#: the 1-based step being taken; ``state`` maps state-buffer names to arrays.
ReferenceFn = Callable[
    [npt.NDArray[np.float64], npt.NDArray[np.float64], dict[str, npt.NDArray[np.float64]], Hyper, int],
    None,
]

#: Push constants are 4 + 4 * hyper_count bytes; Vulkan guarantees only 128 bytes on every device.
MAX_PUSH_CONSTANT_BYTES = 128


@dataclass(frozen=True)
class StateBuffer:
    """One per-element fp32 state buffer of a rule (e.g. Adam's ``exp_avg``)."""

    name: str
    initial_value: float = 0.0


@dataclass(frozen=True)
class ShaderVariant:
    """One compiled shader of a rule and the state it binds (at bindings 3, 4, ...).

    ``spirv`` is a path to a ``.spv`` file (or a built-in shader name). ``hyper_count`` is the
    number of float push constants after the element count (``VK_ADAM_HYPER_COUNT``).
    """

    spirv: str | Path
    state: tuple[StateBuffer, ...]
    hyper_count: int


def _no_validation(hyper: Hyper) -> None:
    return None


def _no_spec_constants(hyper: Hyper) -> Sequence[float]:
    return ()


@dataclass(frozen=True)
class UpdateRule:
    """An update rule that the optimizer can run.

    * ``defaults``: every hyperparameter and its default (``lr`` must be among them).
    * ``variants`` / ``select_variant(hyper)``: which shader (and so which state) a group uses;
      options that never change during training pick a variant or a specialization constant.
    * ``spec_constants(hyper)``: floats for specialization constants 1, 2, ... (0 is zero-grad).
    * ``push_constants(hyper, step)``: the ``hyper_count`` per-step floats, computed in float64.
    * ``reference``: the same math in float64 NumPy, used by tests and ``vk_adam.testing``.
    * ``validate(hyper)``: raise ValueError with a message the user can act on.
    """

    name: str
    defaults: Mapping[str, Any]
    variants: Mapping[str, ShaderVariant]
    select_variant: Callable[[Hyper], str]
    push_constants: Callable[[Hyper, int], Sequence[float]]
    reference: ReferenceFn
    validate: Callable[[Hyper], None] = _no_validation
    spec_constants: Callable[[Hyper], Sequence[float]] = _no_spec_constants
    description: str = ""
    distribution: str = field(default="", compare=False)  # filled in by the registry

    def variant_for(self, hyper: Hyper) -> ShaderVariant:
        """The shader variant that a group with these hyperparameters runs."""
        return self.variants[self.select_variant(hyper)]

    def state_names(self, hyper: Hyper) -> tuple[str, ...]:
        """Names of the state buffers a group with these hyperparameters keeps."""
        return tuple(s.name for s in self.variant_for(hyper).state)
