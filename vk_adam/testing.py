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

from ._optim.optimizer import Optimizer
from ._rules.checks import check_rule_object
from ._rules.rule import UpdateRule, variant_settings

__all__ = ["ConformanceReport", "RuleConformanceError", "check_rule"]


class RuleConformanceError(AssertionError):
    """The rule's shader and its reference disagree (or its declaration is invalid)."""


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
) -> ConformanceReport:
    """Run ``rule``'s shader against its reference on random inputs; raise on disagreement.

    ``hyper``: hyperparameter overrides to test (each merged over the rule's defaults). By
    default (``None``): the defaults plus settings that reach every shader variant and every
    value of each specialization constant (e.g. SGD with and without momentum, Nesterov,
    maximize); a variant no such setting reaches is a :class:`RuleConformanceError` that asks
    for explicit ``hyper``.
    Elements agree when ``|gpu - ref| <= rtol * max|ref|``. Rules with discontinuities (sign,
    clipping) may flip an element whose input rounds across the edge in float32; up to
    ``allowed_mismatch_fraction`` of the elements (at least one) may differ for that reason.
    Also checks that the shader honours the skip flag (binding 2), the registration rules,
    and that ``reference`` does not modify ``grad`` (it gets a read-only array).
    """
    check_rule_object(rule)
    tested = list(_default_hyper(rule) if hyper is None else hyper)
    rng = np.random.default_rng(seed)
    worst = 0.0
    cases = 0
    variants: list[str] = []
    for overrides in tested:
        options = {**rule.defaults, **overrides}
        variant = rule.select_variant(options)
        if variant not in variants:
            variants.append(variant)
        for n in sizes:
            cases += 1
            p = rng.standard_normal(n).astype(np.float32)
            with Optimizer([{"params": [p], **overrides}], rule) as opt:
                for step in range(1, steps + 1):
                    before = opt.state_dict()
                    state = {
                        k: (
                            before["state"][0][k]
                            if before["state"]
                            else np.full(n, s.initial_value, np.float32)
                        )
                        .astype(np.float64)
                        .reshape(-1)
                        for k, s in ((s.name, s) for s in rule.variant_for(options).state)
                    }
                    ref = p.astype(np.float64)
                    start_param = ref.reshape(-1).copy()
                    start_state = {k: v.copy() for k, v in state.items()}
                    g = (rng.standard_normal(n) * 10.0 ** rng.uniform(-2, 1)).astype(np.float32)
                    opt.step([g])
                    # Read-only: callers (benchmarks, the demo) reuse one gradient array.
                    g64 = g.astype(np.float64)
                    g64.flags.writeable = False
                    try:
                        rule.reference(ref, g64, state, options, step)
                    except ValueError as exc:
                        if "read-only" not in str(exc):
                            raise
                        raise RuleConformanceError(
                            f"rule {rule.name!r}: its reference modified grad in place ({exc}); "
                            "grad is read-only, copy it first (g = grad.copy())"
                        ) from exc
                    after = opt.state_dict()["state"][0]
                    # (name, GPU result, reference result, value before the step): errors are
                    # measured against the buffer's scale before and after the step, since a
                    # result that cancels to near zero keeps the rounding of its operands.
                    pairs = [("param", p.reshape(-1), ref, start_param)]
                    pairs += [(k, after[k].reshape(-1), v, start_state[k]) for k, v in state.items()]
                    for what, got, want, before_value in pairs:
                        scale = max(float(np.max(np.abs(want))), float(np.max(np.abs(before_value))), 1e-30)
                        err = np.abs(got.astype(np.float64) - want) / scale
                        bad = int(np.count_nonzero(err > rtol))
                        limit = max(1, int(allowed_mismatch_fraction * n))
                        if bad > (limit if n > 1 else 0) or not np.all(np.isfinite(got)):
                            raise RuleConformanceError(
                                f"rule {rule.name!r}: {what} differs from the reference at step "
                                f"{step} (n={n}, hyper={dict(overrides)}): {bad} of {n} elements "
                                f"beyond rtol={rtol}, worst {float(np.max(err)):.3e}"
                            )
                        worst = max(worst, float(np.max(np.where(err > rtol, 0.0, err))))
            # The skip flag (binding 2) must leave everything untouched.
            q = rng.standard_normal(n).astype(np.float32)
            with Optimizer([{"params": [q], **overrides}], rule, skip_nonfinite=True) as opt:
                saved = q.copy()
                g = rng.standard_normal(n).astype(np.float32)
                g[-1] = np.nan
                if not opt.step([g]).skipped or not np.array_equal(q, saved):
                    raise RuleConformanceError(
                        f"rule {rule.name!r}: its shader does not honour the skip flag (binding 2); "
                        "include vk_adam_rule.glsl and keep its main()"
                    )
    return ConformanceReport(rule.name, cases, worst, tuple(variants), tuple(dict(h) for h in tested))
