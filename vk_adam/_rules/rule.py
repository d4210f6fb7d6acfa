"""The update-rule interface: what a rule (built-in or plugin) hands to the optimizer.

A rule is one small object (cf. optax's ``GradientTransformation``): its name, its shader
variants (SPIR-V + the state buffers that variant needs), its hyperparameters with defaults and
validation, how it packs per-step push constants, and a float64 NumPy reference of the same math.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "Hyper",
    "ReferenceFn",
    "ShaderVariant",
    "StateBuffer",
    "UpdateRule",
    "VariantSetting",
    "variant_settings",
]

#: Hyperparameters of one parameter group, after defaults are merged (``lr``, ``betas``...).
Hyper = Mapping[str, Any]
#: ``reference(param, grad, state, hyper, step)``: ``param`` and ``state`` (state-buffer names to
#: arrays) are float64 arrays updated in place; ``grad`` is read-only (callers reuse it: copy it
#: before transforming it); ``step`` is the 1-based step being taken (the first call gets 1).
ReferenceFn = Callable[
    [npt.NDArray[np.float64], npt.NDArray[np.float64], dict[str, npt.NDArray[np.float64]], Hyper, int],
    None,
]

#: Push constants are 8 + 4 * hyper_count bytes (uint n, the rule's floats, uint rng_key);
#: Vulkan guarantees only 128 bytes on every device.
MAX_PUSH_CONSTANT_BYTES = 128
#: Specialization-constant ids a rule's own constants may use (0 and 16.. are the harness's).
MAX_RULE_SPEC_CONSTANTS = 15


@dataclass(frozen=True)
class StateBuffer:
    """One per-element state buffer of a rule (e.g. Adam's ``exp_avg``).

    The rule's shader always sees fp32 values; the optimizer's ``state_dtype`` decides how the
    harness stores them. ``nonnegative``: the values are never below zero (Adam's second
    moment), so 8-bit state uses the unsigned map, with twice the resolution. ``keep_fp32``:
    the buffer stays fp32 whatever ``state_dtype`` says (for state that 8 or 16 bits would
    break, e.g. an accumulator of tiny increments).
    """

    name: str
    initial_value: float = 0.0
    nonnegative: bool = False
    keep_fp32: bool = False


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
    * ``spec_constants(hyper)``: floats for specialization constants 1, 2, ... (0 is zero-grad);
      one per constant the variant's shader declares beyond 0, checked at registration.
    * ``push_constants(hyper, step)``: the ``hyper_count`` per-step floats, computed in float64;
      ``step`` is the 1-based step being taken.
    * ``reference``: the same math in float64 NumPy, used by tests and ``vk_adam.testing``
      (see :data:`ReferenceFn`: it must not modify ``grad``).
    * ``validate(hyper)``: raise ValueError with a message the user can act on.
    * ``capturable_constants(hyper)``: declares the rule capturable (``capturable=True``: one
      recorded step evaluated any number of times). The ``hyper_count`` floats of a captured
      step, which stay constant from step to step; its shader, built against
      ``vk_adam_rule.glsl`` version 7, reads the step and the lr from the device's clock
      (``vk_adam_step()``, ``vk_adam_lr()``) when ``VK_ADAM_CAPTURABLE`` is set. None (the
      default): not capturable, and ``capturable=True`` is refused.

    ``distribution`` and ``plugin`` (the entry-point name, what ``$VK_ADAM_BLOCK_PLUGINS``
    takes) are filled in by the registry; a rule built by hand leaves them empty.
    """

    name: str
    defaults: Mapping[str, Any]
    variants: Mapping[str, ShaderVariant]
    select_variant: Callable[[Hyper], str]
    push_constants: Callable[[Hyper, int], Sequence[float]]
    reference: ReferenceFn
    validate: Callable[[Hyper], None] = _no_validation
    spec_constants: Callable[[Hyper], Sequence[float]] = _no_spec_constants
    capturable_constants: Callable[[Hyper], Sequence[float]] | None = None
    description: str = ""
    distribution: str = field(default="", compare=False)  # filled in by the registry
    plugin: str = field(default="", compare=False)  # entry-point name, filled in by the registry

    def variant_for(self, hyper: Hyper) -> ShaderVariant:
        """The shader variant that a group with these hyperparameters runs."""
        return self.variants[self.select_variant(hyper)]

    @property
    def capturable(self) -> bool:
        """Whether the rule declares captured steps (``capturable_constants``)."""
        return self.capturable_constants is not None

    def state_names(self, hyper: Hyper) -> tuple[str, ...]:
        """Names of the state buffers a group with these hyperparameters keeps."""
        return tuple(s.name for s in self.variant_for(hyper).state)


@dataclass(frozen=True)
class VariantSetting:
    """Hyperparameters (``overrides`` merged over the rule's defaults) that select ``variant``
    with specialization constants ``spec`` (ids 1, 2, ...)."""

    overrides: Mapping[str, Any]
    variant: str
    spec: tuple[float, ...]


def _alternatives(key: str, value: Any) -> list[Any]:
    """Values to try in place of a default when looking for the settings that pick a variant.

    Options that select a shader are in practice switches (``amsgrad``, ``nesterov``) or
    coefficients whose zero turns a feature off (``momentum``), so flip booleans and move
    numbers to or from zero. ``lr`` is a per-step value in every rule, never a switch.
    """
    if key == "lr":
        return []
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [1] if value == 0 else [0]
    if isinstance(value, float):
        return [0.5] if value == 0.0 else [0.0]
    return []


def variant_settings(rule: UpdateRule) -> list[VariantSetting]:
    """A small set of valid hyperparameter settings that covers every reachable shader variant
    and every value of each specialization constant, defaults first.

    Candidates are the defaults, each single option changed (see :func:`_alternatives`), and
    each pair of changes; a candidate is kept when ``validate`` accepts it, ``select_variant``
    names a declared variant, ``spec_constants`` and ``push_constants`` run, and it reaches a
    variant or a specialization-constant value (per variant) not seen before. Pairs matter:
    Nesterov needs momentum. A variant that no candidate reaches is absent from the result;
    callers decide whether that is an error. Exceptions from a candidate mean "not a valid
    setting" (the rule refused those values), except for the defaults, which must work and are
    checked by the registry before this runs.
    """
    singles = [(k, alt) for k, v in rule.defaults.items() for alt in _alternatives(k, v)]
    candidates: list[dict[str, Any]] = [{}]
    candidates += [{k: v} for k, v in singles]
    candidates += [{k1: v1, k2: v2} for (k1, v1), (k2, v2) in combinations(singles, 2)]
    covered: set[tuple[Any, ...]] = set()
    settings: list[VariantSetting] = []
    for overrides in candidates:
        hyper = {**rule.defaults, **overrides}
        try:
            rule.validate(hyper)
            variant = rule.select_variant(hyper)
            spec = tuple(float(x) for x in rule.spec_constants(hyper))
            rule.push_constants(hyper, 1)
            if variant not in rule.variants:
                continue
        except Exception:  # the rule refuses this combination: not a setting a user can reach
            continue
        items = {("variant", variant)} | {("spec", variant, i, x) for i, x in enumerate(spec)}
        if items - covered:
            covered |= items
            settings.append(VariantSetting(overrides, variant, spec))
    return settings
