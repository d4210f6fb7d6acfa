"""Conformance checks for plugin authors: does a rule's shader do what its reference says?

    from vk_adam.testing import check_rule
    check_rule(MY_RULE)                     # raises RuleConformanceError with the details

By default every shader variant (and every value of each specialization constant) that the
rule can reach is tested (see ``vk_adam._rules.rule.variant_settings``). Each check starts the GPU
and the float64 reference from the same float32 params and state, takes one step, compares,
and continues from the GPU's result, so errors do not compound and a wrong shader is caught
on its first step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._optim.emulation import FormatReference
from .._rules.checks import check_rule_object
from .._rules.rule import UpdateRule, variant_settings
from .._runtime import Runtime
from ._compare import RuleConformanceError
from ._compare import nonfinite_detail as _nonfinite_detail
from ._float32 import check_float32, check_skip_flag
from ._format_check import FORMAT_CHECK_SIZE, FormatCheck

__all__ = [
    "FORMAT_CASES",
    "FORMAT_CHECK_SIZE",
    "ConformanceReport",
    "FormatReference",
    "RuleConformanceError",
    "_nonfinite_detail",
    "check_rule",
]

#: The storage formats :func:`check_rule` runs each rule under, beyond float32 everything:
#: (param dtype, stochastic rounding, state dtype). Every pairing of param dtype and state dtype,
#: and both ways a 16-bit param takes an update (fp32 master copy, stochastic rounding).
FORMAT_CASES: tuple[tuple[str, bool, str], ...] = (
    ("float32", False, "bfloat16"),
    ("float32", False, "int8-blockwise"),
    ("float16", False, "float32"),
    ("float16", True, "bfloat16"),
    ("float16", False, "int8-blockwise"),
    ("bfloat16", True, "float32"),
    ("bfloat16", False, "bfloat16"),
    ("bfloat16", True, "int8-blockwise"),
)


@dataclass(frozen=True)
class ConformanceReport:
    """What :func:`check_rule` ran: ``cases`` (hyperparameter settings x sizes), the shader
    variants and hyperparameter overrides covered, and the worst agreeing error."""

    rule: str
    cases: int
    worst_error: float  # max |gpu - reference| relative to the tensor's scale, over all checks
    variants: tuple[str, ...] = ()  # the shader variants the checks ran, in order
    hyper: tuple[Mapping[str, Any], ...] = ()  # the overrides tested, each over the defaults


def _default_hyper(rule: UpdateRule) -> list[Mapping[str, Any]]:
    """Overrides that reach every variant of ``rule``; RuleConformanceError when one is unreachable."""
    settings = variant_settings(rule)
    missed = sorted(set(rule.variants) - {s.variant for s in settings})
    if missed:
        raise RuleConformanceError(
            f"rule {rule.name!r}: no hyperparameters check_rule tried select variant(s) {missed} "
            "(it flips boolean options and moves numeric ones to or from zero, singly and in "
            "pairs); pass hyper=[{...}, ...] with settings that select every variant"
        )
    return [dict(s.overrides) for s in settings]


def check_rule(
    rule: UpdateRule,
    *,
    sizes: Iterable[int] = (1, 7, 256, 1029),
    steps: int = 5,
    hyper: Iterable[Mapping[str, Any]] | None = None,
    rtol: float = 2e-6,
    allowed_mismatch_fraction: float = 1e-3,
    seed: int | None = None,
    formats: Iterable[tuple[str, bool, str]] = FORMAT_CASES,
    device: int | str | None = None,
) -> ConformanceReport:
    """Run ``rule``'s shader against its reference on random inputs; raise on disagreement.

    ``hyper``: hyperparameter overrides to test (each merged over the rule's defaults). By
    default (``None``): the defaults plus settings that reach every shader variant and every
    value of each specialization constant (e.g. SGD with and without momentum, Nesterov,
    maximize); a variant no such setting reaches is a :class:`RuleConformanceError` that asks
    for explicit ``hyper``.
    ``device``: the Vulkan device (as ``Optimizer``'s); one is opened for all the checks.
    Elements agree when ``|gpu - ref| <= rtol * max|ref|``. Rules with discontinuities (sign,
    clipping) may flip an element whose input rounds across the edge in float32; up to
    ``allowed_mismatch_fraction`` of the elements (at least one) may differ for that reason.
    Also checks that the shader honours the skip flag (binding 2), the registration rules,
    and that ``reference`` does not modify ``grad`` (it gets a read-only array).

    Then, for each storage format of ``formats`` (default :data:`FORMAT_CASES`: every pairing
    of param and state dtype, 16-bit params with a master copy and with stochastic rounding), the same
    one-step checks against :class:`FormatReference`, the reference with the harness's exact
    quantization and rounding. A stored 16-bit value or 8-bit code equals the reference's,
    except where the reference's float64 value lies within ``rtol`` (of the buffer's scale) of
    a rounding boundary, and there it may be what the other side of that band stores (float64
    math often lands exactly on a tie: 0.001 * g**2 for a 16-bit g). fp32 buffers (master
    copy, fp32 state) agree within ``rtol``. Up to ``allowed_mismatch_fraction`` of the
    elements may break this, as above.

    A NaN or Inf anywhere, on the GPU or in the reference, fails at once, whatever the
    tolerances: the message gives the counts of NaN and Inf on both sides, the buffer, the
    format and the step, and (under a compressed format) the usual remedies: a clamp,
    ``StateBuffer(nonnegative=True)`` or ``StateBuffer(keep_fp32=True)``.
    """
    check_rule_object(rule)
    # One device for every optimizer the checks make (opening a Vulkan device per optimizer
    # is slow, and some drivers limit how many a process may open).
    runtime = Runtime(device=device)
    manager = runtime.manager
    try:
        tested = list(_default_hyper(rule) if hyper is None else hyper)
        rng = np.random.default_rng(seed)
        worst, cases, variants = 0.0, 0, []
        for overrides in tested:
            variant = rule.select_variant({**rule.defaults, **overrides})
            variants += [variant] if variant not in variants else []
            for n in sizes:
                cases += 1
                found = check_float32(
                    rule, manager, overrides, n, steps, rtol, allowed_mismatch_fraction, rng
                )
                worst = max(worst, found)
                check_skip_flag(rule, manager, overrides, n, rng)
        for overrides in tested:
            for case in formats:
                cases += 1
                format_check = FormatCheck(rule, overrides, case, rtol, allowed_mismatch_fraction)
                worst = max(worst, format_check.run(manager, steps, rng))
    finally:
        runtime.close()
    return ConformanceReport(rule.name, cases, worst, tuple(variants), tuple(dict(h) for h in tested))
