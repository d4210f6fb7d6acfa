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

import ml_dtypes
import numpy as np

from . import _formats as fmt
from ._optim.emulation import FormatReference
from ._optim.optimizer import Optimizer
from ._optim.storage import group_format, is_signed
from ._rules.checks import check_rule_object
from ._rules.rule import UpdateRule, variant_settings
from ._runtime import Runtime

__all__ = ["FORMAT_CASES", "ConformanceReport", "FormatReference", "RuleConformanceError", "check_rule"]

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
#: Elements per format check: over INT8_MIN_ELEMENTS (so 8-bit state is used), with a partial
#: last block.
FORMAT_CHECK_SIZE = 4 * fmt.BLOCK * 4 + 103


class RuleConformanceError(AssertionError):
    """The rule's shader and its reference disagree (or its declaration is invalid)."""


#: Added to a non-finite failure under a storage format other than float32 everything.
_COMPRESSED_NONFINITE_HINT = (
    "A rule that is finite in float32 but not under a compressed format usually takes a square "
    "root or a log of a difference of quantized values: clamp it (max(x, 0.0)), declare the "
    "buffer StateBuffer(name, nonnegative=True) if it never goes below zero, or keep it float32 "
    'with StateBuffer(name, keep_fp32=True){state}. See docs/plugins.md, "When a rule fails only '
    'under a compressed format".'
)
#: Added to a non-finite failure with float32 params and state.
_FLOAT32_NONFINITE_HINT = (
    "Both sides started this step from the same finite float32 values, so the rule's math is not "
    "finite on these inputs (a square root or a log of a negative number, a division by zero?)."
)


def _nonfinite_detail(got: Any, want: Any, reference: str, stored_as: str = "float32") -> str | None:
    """None when ``got`` (the GPU's values) and ``want`` (the reference's) are finite everywhere;
    else the counts of NaN and Inf on each side, the first element where either is not finite,
    and how many GPU Inf are reference values beyond ``stored_as`` (a float16 ends at 65504).
    Checked before any comparison: NaN compares false with every tolerance, so a count of the
    elements beyond one would miss every NaN (and report "0 elements beyond")."""
    g = np.asarray(got, np.float64).reshape(-1)
    w = np.asarray(want, np.float64).reshape(-1)
    bad = ~np.isfinite(g) | ~np.isfinite(w)
    if not np.any(bad):
        return None
    first = int(np.flatnonzero(bad)[0])

    def counts(x: np.ndarray) -> str:
        return f"{int(np.count_nonzero(np.isnan(x)))} NaN and {int(np.count_nonzero(np.isinf(x)))} Inf"

    text = (
        f"the GPU has {counts(g)}, the {reference} {counts(w)}; first at element {first} "
        f"(GPU {g[first]:.6g}, {reference} {w[first]:.6g})"
    )
    # ml_dtypes' finfo knows bfloat16 (NumPy's does not, NumPy 2.5 raises).
    largest = float(ml_dtypes.finfo(fmt.NUMPY_DTYPES[stored_as]).max)  # type: ignore[no-untyped-call]
    overflow = int(np.count_nonzero(np.isinf(g) & np.isfinite(w) & (np.abs(w) > largest)))
    if overflow:
        text += f"; {overflow} of the GPU's Inf are {reference} values beyond the largest {stored_as} "
        text += f"({largest:g}), so they overflow its storage"
    return text


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
                with Optimizer([{"params": [p], **overrides}], rule, manager=manager) as opt:
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
                        # Non-finite values first, in any buffer: NaN compares false with every
                        # tolerance, so the comparison below would not count them.
                        for what, got, want, _ in pairs:
                            detail = _nonfinite_detail(got, want, "reference")
                            if detail is not None:
                                buffer = "param" if what == "param" else f"state {what!r}"
                                raise RuleConformanceError(
                                    f"rule {rule.name!r}: {buffer} is not finite at step {step} (param "
                                    f"float32, state float32, n={n}, hyper={dict(overrides)}): {detail}. "
                                    + _FLOAT32_NONFINITE_HINT
                                )
                        for what, got, want, before_value in pairs:
                            scale = max(
                                float(np.max(np.abs(want))), float(np.max(np.abs(before_value))), 1e-30
                            )
                            err = np.abs(got.astype(np.float64) - want) / scale
                            bad = int(np.count_nonzero(err > rtol))
                            limit = max(1, int(allowed_mismatch_fraction * n))
                            if bad > (limit if n > 1 else 0):
                                raise RuleConformanceError(
                                    f"rule {rule.name!r}: {what} differs from the reference at step "
                                    f"{step} (n={n}, hyper={dict(overrides)}): {bad} of {n} elements "
                                    f"beyond rtol={rtol}, worst {float(np.max(err)):.3e}"
                                )
                            worst = max(worst, float(np.max(np.where(err > rtol, 0.0, err))))
                # The skip flag (binding 2) must leave everything untouched.
                q = rng.standard_normal(n).astype(np.float32)
                with Optimizer(
                    [{"params": [q], **overrides}], rule, skip_nonfinite=True, manager=manager
                ) as opt:
                    saved = q.copy()
                    g = rng.standard_normal(n).astype(np.float32)
                    g[-1] = np.nan
                    if not opt.step([g]).skipped or not np.array_equal(q, saved):
                        raise RuleConformanceError(
                            f"rule {rule.name!r}: its shader does not honour the skip flag (binding 2); "
                            "include vk_adam_rule.glsl and keep its main()"
                        )
        for overrides in tested:
            for case in formats:
                cases += 1
                worst = max(
                    worst,
                    _check_format(
                        manager, rule, overrides, case, steps, rtol, allowed_mismatch_fraction, rng
                    ),
                )
    finally:
        runtime.close()
    return ConformanceReport(rule.name, cases, worst, tuple(variants), tuple(dict(h) for h in tested))


def _ordered(bits: np.ndarray) -> np.ndarray:
    """16-bit float bit patterns as integers in the order of their values."""
    b = bits.astype(np.int64)
    return np.where(b & 0x8000, -(b & 0x7FFF), b)


def _check_format(
    manager: Any,
    rule: UpdateRule,
    overrides: Mapping[str, Any],
    case: tuple[str, bool, str],
    steps: int,
    rtol: float,
    allowed: float,
    rng: np.random.Generator,
) -> float:
    """One rule setting under one storage format, step by step against FormatReference."""
    param_dtype, stochastic, state_dtype = case
    options = {**rule.defaults, **overrides}
    variant = rule.variant_for(options)
    n = FORMAT_CHECK_SIZE
    dtype = fmt.NUMPY_DTYPES[param_dtype]
    p = rng.standard_normal(n).astype(np.float32).astype(dtype)
    padded = -(-n // fmt.BLOCK) * fmt.BLOCK
    form = group_format(variant.state, param_dtype, state_dtype, stochastic, padded)
    label = f"(param {param_dtype}, stochastic_rounding={stochastic}, state {state_dtype}"
    label += f", hyper={dict(overrides)})"
    compressed = param_dtype != "float32" or state_dtype != "float32"
    names = ", ".join(repr(s.name) for s in variant.state)
    hint = (
        _COMPRESSED_NONFINITE_HINT.format(state=f" (this variant's state: {names})" if names else "")
        if compressed
        else _FLOAT32_NONFINITE_HINT
    )
    limit = max(1, int(allowed * n))
    worst = 0.0
    seed = int(rng.integers(2**32))
    group = {"params": [p], **overrides}
    kwargs: dict[str, Any] = {"state_dtype": state_dtype, "stochastic_rounding": stochastic, "seed": seed}
    with Optimizer([group], rule, manager=manager, **kwargs) as opt:
        ref = FormatReference(rule, options, form, seed=seed)
        for step in range(1, steps + 1):
            before = opt.state_dict()["state"]
            ref.load(p, before[0] if before else None)
            g = (rng.standard_normal(n) * 10.0 ** rng.uniform(-2, 1)).astype(np.float32).astype(dtype)
            opt.step([g])
            ref.step(g, step)
            after = opt.state_dict()["state"][0]

            def fail(what: str, detail: str, step: int = step) -> RuleConformanceError:
                return RuleConformanceError(
                    f"rule {rule.name!r}: {what} differs from the format reference at step {step} "
                    f"{label}: {detail}"
                )

            stored: list[tuple[str, Any, Any, int]] = [("param", p.reshape(-1), ref.param, -1)]
            if ref.master is not None:
                stored.append(("master_param", after["master_param"].reshape(-1), ref.master, fmt.STATE_F32))
            for s, code in zip(variant.state, form.state, strict=True):
                stored.append((s.name, after[s.name].reshape(-1), ref.state[s.name], code))
            # Non-finite values first, in any buffer: the GPU's values as stored (8-bit codes
            # dequantized with the GPU's block maxima) against the reference's float64 values
            # before they were stored. NaN compares false with every tolerance and bound below.
            for what, got, _, code in stored:
                if code >= fmt.STATE_INT8_SIGNED:
                    values = fmt.dequantize_blockwise(got, after[what + ".absmax"], is_signed(code))
                else:
                    values = got.astype(np.float64)
                unrounded = ref.unrounded["param" if what == "master_param" else what]
                stored_as = (
                    param_dtype if what == "param" else "bfloat16" if code == fmt.STATE_BF16 else "float32"
                )
                detail = _nonfinite_detail(values, unrounded, "format reference", stored_as)
                if detail is not None:
                    buffer = what if what in ("param", "master_param") else f"state {what!r}"
                    raise RuleConformanceError(
                        f"rule {rule.name!r}: {buffer} is not finite at step {step} {label}: {detail}. {hint}"
                    )
            for what, got, want, code in stored:
                if code >= fmt.STATE_INT8_SIGNED:
                    codes, absmax = want
                    amax_err = np.abs(after[what + ".absmax"].astype(np.float64) - absmax)
                    if np.any(amax_err > 1e-5 * np.maximum(absmax, 1e-30)):
                        raise fail(what, f"block absmax off by up to {float(np.max(amax_err)):.3e}")
                    got_key, want_key = got.astype(np.int64), codes.astype(np.int64)
                elif got.dtype.itemsize == 2:  # 16-bit values, compared in value order
                    got_key, want_key = (
                        _ordered(got.view(np.uint16)),
                        _ordered(np.asarray(want).view(np.uint16)),
                    )
                else:
                    want64 = np.asarray(want, np.float64)
                    scale = max(float(np.max(np.abs(want64))), 1e-30)
                    err = np.abs(got.astype(np.float64) - want64) / scale
                    beyond = int(np.count_nonzero(err > rtol))
                    if beyond > limit:
                        raise fail(
                            what,
                            f"{beyond} of {n} elements beyond rtol={rtol}, worst {float(np.max(err)):.3e}",
                        )
                    worst = max(worst, float(np.max(np.where(err > rtol, 0.0, err))))
                    continue
                # A stored value may differ from the reference's only where the float64 value
                # lies within rtol (of the buffer's scale) of a rounding or quantization
                # boundary, and then only to what the other side of that band stores.
                unrounded = ref.unrounded["param" if what == "param" else what]
                band = rtol * max(float(np.max(np.abs(unrounded))), 1e-30)
                low, high = ref.bounds("param" if what == "param" else what, band)
                if code >= fmt.STATE_INT8_SIGNED:
                    lo, hi = low.astype(np.int64), high.astype(np.int64)
                else:
                    lo, hi = (
                        _ordered(np.asarray(low).view(np.uint16)),
                        _ordered(np.asarray(high).view(np.uint16)),
                    )
                explained = (got_key == want_key) | (
                    (got_key >= np.minimum(lo, hi)) & (got_key <= np.maximum(lo, hi))
                )
                if np.count_nonzero(~explained) > limit:
                    raise fail(
                        what,
                        f"{np.count_nonzero(~explained)} of {n} stored values differ beyond rounding "
                        f"within rtol={rtol} (e.g. element {int(np.flatnonzero(~explained)[0])})",
                    )
    return worst
