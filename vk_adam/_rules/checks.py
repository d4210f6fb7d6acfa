"""Checks of an update rule against its shaders: the declaration, the SPIR-V interface of every
variant (bindings, push-constant block, specialization constants), and what the rule packs.

The registry (:mod:`.registry`) runs these on every rule it loads, and the optimizer runs
:func:`check_rule_object` on a rule object handed to it directly, so no unchecked shader ever
reaches the device. This module knows nothing of plugins or pluggy.
"""

from __future__ import annotations

import weakref
from typing import Any

from .._errors import PortabilityWarning, RuleRegistrationError, ShaderMissingError, warn_at_caller
from .rule import (
    MAX_PUSH_CONSTANT_BYTES,
    MAX_RULE_SPEC_CONSTANTS,
    ShaderVariant,
    StateBuffer,
    UpdateRule,
    variant_settings,
)
from .spirv import (
    HARNESS_SPEC_IDS,
    HARNESS_VERSION,
    SUBGROUP_SIZE_SPEC_ID,
    ShaderInterface,
    is_current_harness,
    load_spirv,
    reflect,
    subgroup_spirv,
)

# Bindings every rule shader has (vk_adam_rule.glsl): param, grad, status.
_FIXED_BINDINGS = 3
# vk_adam_rule.glsl declares at most this many state buffers (bindings 3..6).
_MAX_STATE_BUFFERS = 4


class InvalidRuleError(RuleRegistrationError, ValueError):
    """A rule's declaration disagrees with its shaders (or is malformed).

    Both a :class:`RuleRegistrationError` (what registration has always raised) and a
    ``ValueError``, because a rule object passed to ``Optimizer(params, rule)`` is an argument.
    """


def _check_declaration(rule: UpdateRule) -> None:
    """The parts of a rule that need no shader: name, defaults, variants, callables."""
    if not isinstance(rule.name, str) or not rule.name.replace("_", "").replace("-", "").isalnum():
        raise InvalidRuleError(f"rule name {rule.name!r} must be a non-empty identifier")
    for attr in ("select_variant", "push_constants", "reference", "validate", "spec_constants"):
        if not callable(getattr(rule, attr)):
            raise InvalidRuleError(f"rule {rule.name!r}: {attr} must be callable")
    if rule.capturable_constants is not None and not callable(rule.capturable_constants):
        raise InvalidRuleError(f"rule {rule.name!r}: capturable_constants must be callable or None")
    if not hasattr(rule.defaults, "keys") or "lr" not in rule.defaults:
        raise InvalidRuleError(f"rule {rule.name!r} has no 'lr' default")
    if not hasattr(rule.variants, "items") or not rule.variants:
        raise InvalidRuleError(f"rule {rule.name!r} declares no shader variant")
    for key, variant in rule.variants.items():
        where = f"rule {rule.name!r}, variant {key!r}"
        if not isinstance(variant, ShaderVariant):
            raise InvalidRuleError(f"{where} is a {type(variant).__name__}, not a vk_adam.ShaderVariant")
        if not isinstance(variant.state, tuple) or not all(isinstance(s, StateBuffer) for s in variant.state):
            raise InvalidRuleError(f"{where}: state must be a tuple of vk_adam.StateBuffer")
        names = [s.name for s in variant.state]
        if len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
            raise InvalidRuleError(f"{where}: state buffer names {names} must be distinct, non-empty strings")
        if len(names) > _MAX_STATE_BUFFERS:
            raise InvalidRuleError(
                f"{where} declares {len(names)} state buffers; vk_adam_rule.glsl supports at most "
                f"{_MAX_STATE_BUFFERS}"
            )
        if isinstance(variant.hyper_count, bool) or not isinstance(variant.hyper_count, int):
            raise InvalidRuleError(f"{where}: hyper_count must be an int, not {variant.hyper_count!r}")
        if variant.hyper_count < 1:
            raise InvalidRuleError(
                f"{where}: hyper_count={variant.hyper_count}; it must be at least 1 "
                "(VK_ADAM_HYPER_COUNT >= 1)"
            )


def refuse_older_harness(where: str, interface: ShaderInterface) -> None:
    """Raise :class:`InvalidRuleError` unless the shader ``where`` names was built against this
    vk-adam's ``vk_adam_rule.glsl`` (:func:`~vk_adam._rules.spirv.is_current_harness`): an older
    harness binds other buffers and takes other constants, so it is refused whole."""
    if not is_current_harness(interface):
        raise InvalidRuleError(
            f"{where}: built against an older vk_adam_rule.glsl; rebuild the plugin against this "
            f"vk-adam (harness version {HARNESS_VERSION})"
        )


def _describe_push_block(push_bytes: int) -> str:
    if push_bytes == 0:
        return "has no push-constant block"
    floats = (push_bytes - 8) / 4
    floats_text = str(int(floats)) if floats == int(floats) else f"{floats:g}"
    return f"push-constant block is {push_bytes} bytes (uint n + {floats_text} floats + uint rng_key)"


def _check_shader(rule: UpdateRule, key: str, variant: ShaderVariant) -> ShaderInterface:
    """Reflect one variant's SPIR-V and compare its bindings and push constants to the declaration."""
    where = f"rule {rule.name!r}, variant {key!r} ({variant.spirv})"
    try:
        interface = reflect(load_spirv(variant.spirv))
    except ShaderMissingError as exc:
        # An installation problem, not a bad declaration: keep the type, which names the fix.
        raise ShaderMissingError(f"{where}: {exc}") from exc
    except Exception as exc:  # a module the small reflector cannot read
        raise InvalidRuleError(f"{where}: cannot read its SPIR-V: {exc}") from exc
    refuse_older_harness(where, interface)
    k = len(variant.state)
    # param, grad, status, the state, then the harness's own: an absmax buffer per state, the
    # master copy and the quantization tables.
    expected = set(range(_FIXED_BINDINGS + 2 * k + 2))
    if set(interface.bindings) != expected:
        raise InvalidRuleError(
            f"{where}: the shader binds {sorted(interface.bindings)} but the rule declares "
            f"{k} state buffer(s), i.e. bindings {sorted(expected)} "
            "(0 param, 1 grad, 2 status, one per state buffer, then one absmax buffer per state "
            "buffer, the master copy and the quantization tables); make the variant's state "
            "match the shader's VK_ADAM_STATE_COUNT"
        )
    push_bytes = 8 + 4 * variant.hyper_count
    if interface.push_constant_bytes != push_bytes:
        # Name both sides: the shader is the ground truth the declaration has to match.
        raise InvalidRuleError(
            f"{where}: the shader's {_describe_push_block(interface.push_constant_bytes)}, "
            f"but the variant declares hyper_count={variant.hyper_count}, i.e. {push_bytes} bytes "
            f"(uint n + {variant.hyper_count} floats + uint rng_key); make "
            "hyper_count match the shader's VK_ADAM_HYPER_COUNT"
        )
    if push_bytes > MAX_PUSH_CONSTANT_BYTES:
        warn_at_caller(
            f"{where}: {push_bytes} bytes of push constants exceed the {MAX_PUSH_CONSTANT_BYTES} "
            "bytes every Vulkan device guarantees: devices whose maxPushConstantsSize is smaller "
            "(lavapipe, many mobile GPUs) refuse the rule. Move fixed values to specialization "
            "constants to run everywhere",
            PortabilityWarning,
        )
    _check_subgroup_variant(where, variant, interface)
    return interface


def _check_subgroup_variant(where: str, variant: ShaderVariant, base: ShaderInterface) -> None:
    """The subgroup variant beside a rule's SPIR-V (if its package built one) must have the base
    variant's interface: vk-adam runs either with the same buffers and constants."""
    try:
        interface = reflect(load_spirv(subgroup_spirv(variant.spirv)))
    except ShaderMissingError:
        return  # its package ships no subgroup variant: the base variant runs everywhere
    except Exception as exc:
        raise InvalidRuleError(f"{where}: cannot read its subgroup variant's SPIR-V: {exc}") from exc
    same = (interface.bindings, interface.push_constant_bytes, interface.status_bytes) == (
        base.bindings,
        base.push_constant_bytes,
        base.status_bytes,
    )
    if not same or interface.spec_ids - {SUBGROUP_SIZE_SPEC_ID} != base.spec_ids:
        raise InvalidRuleError(
            f"{where}: its subgroup variant {subgroup_spirv(variant.spirv)} has another interface "
            "(bindings, push constants or specialization constants) than the base SPIR-V; rebuild "
            "both from the same source with vk_adam.shaderc"
        )


def _check_setting(
    rule: UpdateRule, key: str, interface: ShaderInterface, hyper: dict[str, Any], label: str
) -> None:
    """Compare what the rule packs for ``hyper`` (push and specialization constants) to the shader."""
    variant = rule.variants[key]
    where = f"rule {rule.name!r}, variant {key!r}"
    try:
        values = list(rule.push_constants(hyper, 1))
        spec = list(rule.spec_constants(hyper))
    except Exception as exc:
        raise InvalidRuleError(f"{where}: packing its constants for {label} raised: {exc!r}") from exc
    if len(values) != variant.hyper_count:
        raise InvalidRuleError(
            f"{where}: push_constants() returns {len(values)} values for {label}, but the variant "
            f"declares hyper_count={variant.hyper_count} (and its shader's "
            f"{_describe_push_block(interface.push_constant_bytes)}); "
            "they must agree"
        )
    if rule.capturable_constants is not None:
        _check_capturable(rule, key, hyper, label)
    if len(spec) > MAX_RULE_SPEC_CONSTANTS:
        raise InvalidRuleError(
            f"{where}: spec_constants() returns {len(spec)} values for {label}; a rule may use "
            f"ids 1..{MAX_RULE_SPEC_CONSTANTS} (0 and 16.. belong to the harness)"
        )
    # id 0 is VK_ADAM_ZERO_GRAD, and 16.. the harness's (storage formats, loop shape, param out,
    # step clock), supplied by the optimizer
    supplied = set(range(1 + len(spec))) | (set(interface.spec_ids) & HARNESS_SPEC_IDS)
    if set(interface.spec_ids) != supplied:
        # The harness's constants (16..) are supplied by the optimizer: name the rest.
        declared = sorted(set(interface.spec_ids) - HARNESS_SPEC_IDS)
        expected = sorted(supplied - HARNESS_SPEC_IDS)
        raise InvalidRuleError(
            f"{where}: the shader declares specialization constants {declared} but spec_constants() "
            f"returns {len(spec)} value(s) for {label}, i.e. constants {expected} "
            "(0 is VK_ADAM_ZERO_GRAD, the rule's own start at 1); a constant without a value "
            "would silently keep the shader's default"
        )


def _check_capturable(rule: UpdateRule, key: str, hyper: dict[str, Any], label: str) -> None:
    """A rule that declares captured steps: ``capturable_constants`` packs ``hyper_count``
    values (its shader reads the step clock, as every shader of this harness can)."""
    variant = rule.variants[key]
    where = f"rule {rule.name!r}, variant {key!r}"
    assert rule.capturable_constants is not None
    try:
        values = list(rule.capturable_constants(hyper))
    except Exception as exc:
        raise InvalidRuleError(f"{where}: capturable_constants() for {label} raised: {exc!r}") from exc
    if len(values) != variant.hyper_count:
        raise InvalidRuleError(
            f"{where}: capturable_constants() returns {len(values)} values for {label}, but the "
            f"variant declares hyper_count={variant.hyper_count}; they must agree"
        )


def check_rule(rule: UpdateRule) -> None:
    """Raise :class:`InvalidRuleError` unless every shader variant matches the rule's declaration.

    Checks the name, defaults (they validate and select a declared variant), every variant's
    SPIR-V (built against this harness, version :data:`~vk_adam._rules.spirv.HARNESS_VERSION`;
    bindings 0..4 + 2 per state buffer, push-constant block 8 + 4*hyper_count bytes, at most
    128), and, for the defaults and for every variant that some valid setting reaches
    (:func:`vk_adam._rules.rule.variant_settings`), that ``push_constants`` returns hyper_count
    values and ``spec_constants`` one value per specialization constant the shader declares.
    Uncached; :func:`check_rule_object` is the cached form the optimizer uses.
    """
    _check_declaration(rule)
    try:
        rule.validate(rule.defaults)
        chosen = rule.select_variant(rule.defaults)
    except Exception as exc:
        raise InvalidRuleError(f"rule {rule.name!r}: its defaults are invalid: {exc}") from exc
    if chosen not in rule.variants:
        raise InvalidRuleError(
            f"rule {rule.name!r}: select_variant returned {chosen!r}, not one of {sorted(rule.variants)}"
        )
    interfaces = {key: _check_shader(rule, key, variant) for key, variant in rule.variants.items()}
    _check_setting(rule, chosen, interfaces[chosen], dict(rule.defaults), "the defaults")
    for setting in variant_settings(rule):
        if not setting.overrides:
            continue  # the defaults, checked above
        hyper = {**rule.defaults, **setting.overrides}
        label = f"hyperparameters {dict(setting.overrides)}"
        _check_setting(rule, setting.variant, interfaces[setting.variant], hyper, label)


# Rules that passed check_rule, by identity: id(rule) -> weak reference (a rule is unhashable,
# its fields hold dicts). The weak reference both proves the id still names the same object and
# drops the entry when the rule is collected, so an id reused by a new object is never trusted.
# No lock: single dict operations are atomic under the GIL, and a weakref callback can run in
# any allocation, even one made while this thread held a lock (a deadlock with a plain Lock).
_checked: dict[int, weakref.ref[UpdateRule]] = {}


def remember_checked(rule: UpdateRule) -> None:
    """Record ``rule`` as having passed :func:`check_rule` (the registry calls this for the
    rules it registers, which it checked before copying them)."""
    key = id(rule)

    def forget(ref: weakref.ref[UpdateRule], key: int = key) -> None:
        if _checked.get(key) is ref:
            _checked.pop(key, None)

    _checked[key] = weakref.ref(rule, forget)


def check_rule_object(rule: object) -> None:
    """Check a rule object before it reaches the device: the checks registration runs.

    ``Optimizer(params, rule_object)`` calls this, so a rule built by hand (or changed with
    ``dataclasses.replace``) is held to the same contract as a registered one: a rule that
    binds state buffers it does not declare would otherwise read unbound memory on the GPU.
    Raises ``TypeError`` when ``rule`` is not an :class:`UpdateRule`,
    :class:`~vk_adam.ShaderMissingError` when a variant's ``.spv`` file is missing, and
    :class:`InvalidRuleError` (a ``ValueError``) naming the rule and the mismatch otherwise.
    Results are cached by object identity (a rule is immutable), so repeated calls with the
    same object, and calls with rules from the registry, cost a dictionary lookup.
    """
    if not isinstance(rule, UpdateRule):
        raise TypeError(
            f"rule must be a registered rule name or a vk_adam.UpdateRule, not {type(rule).__name__}"
        )
    ref = _checked.get(id(rule))
    if ref is not None and ref() is rule:
        return
    check_rule(rule)
    remember_checked(rule)
