"""The checks with float32 params and state: each step against the rule's float64 reference,
from the same starting values, and the skip flag (binding 2)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .._optim import Optimizer
from .._rules import UpdateRule
from ._compare import FLOAT32_NONFINITE_HINT, RuleConformanceError, check_close, nonfinite_detail


def state_before(
    rule: UpdateRule, options: Mapping[str, Any], saved: Mapping[str, Any], n: int
) -> dict[str, Any]:
    """The state the step starts from, in float64: the GPU's, or each buffer's initial value."""
    return {
        s.name: (saved["state"][0][s.name] if saved["state"] else np.full(n, s.initial_value, np.float32))
        .astype(np.float64)
        .reshape(-1)
        for s in rule.variant_for(options).state
    }


def reference_step(
    rule: UpdateRule, ref: Any, g: Any, state: dict[str, Any], options: Mapping[str, Any], step: int
) -> None:
    """The reference's step on a read-only gradient (callers such as benchmarks and the demo
    reuse one gradient array): a reference that writes it is a RuleConformanceError."""
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


#: One float32 rounding of a value, relative (half a unit in the last place).
_ROUNDING = 2.0**-24
#: Roundings allowed per input of the step: the shader rounds each product of an input and a
#: float32 hyperparameter (itself rounded), then each sum. A few, not the thousands a wrong
#: formula or `1 - beta` computed in float32 (1.3e-5 relative) leaves.
_ROUNDINGS_PER_INPUT = 4.0


def reference_with_floor(
    rule: UpdateRule, ref: Any, g: Any, state: dict[str, Any], options: Mapping[str, Any], step: int
) -> dict[str, Any]:
    """The reference's step, in place as :func:`reference_step`; returns, per buffer ("param"
    and each state buffer), the absolute error float32 arithmetic may leave in each element.

    That is how far the reference's result moves when each input of the step (param, grad,
    each state buffer) in turn moves by one float32 rounding, summed and taken a few times. A
    result that cancels (a momentum buffer ``g + wd * p`` with ``g`` near ``-wd * p``) keeps the
    rounding of its operands, far more than its own size."""
    inputs = {"param": np.array(ref, np.float64), "grad": np.asarray(g, np.float64)}
    inputs.update({k: v.copy() for k, v in state.items()})

    def moved(name: str) -> dict[str, Any]:
        x = {k: v * (1.0 + _ROUNDING) if k == name else v.copy() for k, v in inputs.items()}
        param, grad = x.pop("param"), x.pop("grad")
        reference_step(rule, param, grad, x, options, step)
        return {"param": param, **x}

    reference_step(rule, ref, g, state, options, step)
    result = {"param": np.asarray(ref, np.float64), **state}
    floor = {k: np.zeros(np.shape(v)) for k, v in result.items()}
    for name in inputs:
        for k, v in moved(name).items():
            floor[k] += np.abs(v - result[k])
    # a reference that is not finite once moved gets no floor there: the check stays strict
    return {
        k: np.nan_to_num(_ROUNDINGS_PER_INPUT * v, nan=0.0, posinf=0.0).reshape(-1) for k, v in floor.items()
    }


def check_float32(
    rule: UpdateRule,
    manager: Any,
    overrides: Mapping[str, Any],
    n: int,
    steps: int,
    rtol: float,
    allowed: float,
    rng: np.random.Generator,
) -> float:
    """``steps`` steps of ``n`` elements, each from the GPU's result; returns the worst agreeing error."""
    options = {**rule.defaults, **overrides}
    where = f"(n={n}, hyper={dict(overrides)})"
    limit = max(1, int(allowed * n)) if n > 1 else 0
    worst = 0.0
    p = rng.standard_normal(n).astype(np.float32)
    with Optimizer([{"params": [p], **overrides}], rule, manager=manager) as opt:
        for step in range(1, steps + 1):
            state = state_before(rule, options, opt.state_dict(), n)
            ref = p.astype(np.float64)
            start_param = ref.reshape(-1).copy()
            start_state = {k: v.copy() for k, v in state.items()}
            g = (rng.standard_normal(n) * 10.0 ** rng.uniform(-2, 1)).astype(np.float32)
            opt.step([g])
            floor = reference_with_floor(rule, ref, g, state, options, step)
            after = opt.state_dict()["state"][0]
            # (name, GPU result, reference result, value before the step)
            pairs = [("param", p.reshape(-1), ref, start_param)]
            pairs += [(k, after[k].reshape(-1), v, start_state[k]) for k, v in state.items()]
            # Non-finite values first, in any buffer: NaN compares false with every tolerance.
            for what, got, want, _ in pairs:
                detail = nonfinite_detail(got, want, "reference")
                if detail is not None:
                    buffer = "param" if what == "param" else f"state {what!r}"
                    raise RuleConformanceError(
                        f"rule {rule.name!r}: {buffer} is not finite at step {step} (param float32, "
                        f"state float32, n={n}, hyper={dict(overrides)}): {detail}. "
                        + FLOAT32_NONFINITE_HINT,
                        step=step,
                    )
            for what, got, want, before in pairs:
                differs, agreeing = check_close(got, want, before, rtol, limit, floor[what])
                if differs is not None:
                    raise RuleConformanceError(
                        f"rule {rule.name!r}: {what} differs from the reference at step {step} "
                        f"{where}: {differs}",
                        step=step,
                    )
                worst = max(worst, agreeing)
    return worst


def check_skip_flag(
    rule: UpdateRule, manager: Any, overrides: Mapping[str, Any], n: int, rng: np.random.Generator
) -> None:
    """The skip flag (binding 2) must leave everything untouched."""
    q = rng.standard_normal(n).astype(np.float32)
    with Optimizer([{"params": [q], **overrides}], rule, skip_nonfinite=True, manager=manager) as opt:
        saved = q.copy()
        g = rng.standard_normal(n).astype(np.float32)
        g[-1] = np.nan
        if not opt.step([g]).skipped or not np.array_equal(q, saved):
            raise RuleConformanceError(
                f"rule {rule.name!r}: its shader does not honour the skip flag (binding 2); "
                "include vk_adam_rule.glsl and keep its main()"
            )
