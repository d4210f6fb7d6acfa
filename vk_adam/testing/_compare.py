"""What ``check_rule`` compares and how it says what it saw: the conformance error, NaN and Inf
counted and located (``nonfinite_detail``), float32 buffers within a tolerance (``check_close``,
whose message names float32 cancellation when the errors are that small), and 16-bit patterns
in value order."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from .. import _formats as fmt


class RuleConformanceError(AssertionError):
    """The rule's shader and its reference disagree (or its declaration is invalid).

    A failed check says how to replay it, in its message and as attributes: ``seed`` (of the
    check's random inputs), ``variant`` (the shader variant), ``format`` ((param dtype,
    stochastic rounding, state dtype)), ``step`` and ``replay``, the one ``check_rule`` call
    that runs that check alone (``rule`` in it is the rule you checked). They are None for an
    error in the rule's declaration."""

    def __init__(self, message: str, *, step: int | None = None) -> None:
        super().__init__(message)
        self.step = step
        self.seed: int | None = None
        self.variant: str | None = None
        self.format: tuple[str, bool, str] | None = None
        self.replay: str | None = None


#: Added to a non-finite failure under a storage format other than float32 everything.
COMPRESSED_NONFINITE_HINT = (
    "A rule that is finite in float32 but not under a compressed format usually takes a square "
    "root or a log of a difference of quantized values: clamp it (max(x, 0.0)), declare the "
    "buffer StateBuffer(name, nonnegative=True) if it never goes below zero, or keep it float32 "
    'with StateBuffer(name, keep_fp32=True){state}. See docs/plugins.md, "When a rule fails only '
    'under a compressed format".'
)
#: Added to a non-finite failure with float32 params and state.
FLOAT32_NONFINITE_HINT = (
    "Both sides started this step from the same finite float32 values, so the rule's math is not "
    "finite on these inputs (a square root or a log of a negative number, a division by zero?)."
)


def nonfinite_detail(got: Any, want: Any, reference: str, stored_as: str = "float32") -> str | None:
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


#: Errors at most this large (relative to the buffer's scale) look like float32 rounding.
_ROUNDING_SIZED = 1e-4
#: Added to a small disagreement: the usual cause (docs/plugins.md, "Push 1 - beta from the host").
CANCELLATION_HINT = (
    "Errors this small (at most {limit:g} of the buffer's scale) are often float32 rounding rather "
    "than a wrong formula; a likely cause is float32 cancellation in `1.0 - HYPER(k)` computed in the shader "
    "(1 - 0.999f is off by 1.3e-5 relative): push `1 - beta` from the host as its own HYPER value "
    "(push_constants in float64), as docs/plugins.md shows."
)


def check_close(
    got: Any, want: Any, before: Any, rtol: float, limit: int, floor: Any = 0.0
) -> tuple[str | None, float]:
    """(None, worst agreeing error) when at most ``limit`` elements of ``got`` differ from ``want``
    by more than ``rtol`` of the buffer's scale (its largest value before or after the step: a
    result that cancels to near zero keeps the rounding of its operands) plus ``floor`` (per
    element, absolute: how far float32 rounding of the step's inputs moves the reference, see
    ``_float32.reference_with_floor``); else (what differs, with the cancellation hint when every error
    is small, 0.0)."""
    want64 = np.asarray(want, np.float64)
    scale = max(float(np.max(np.abs(want64))), float(np.max(np.abs(before))), 1e-30)
    diff = np.abs(np.asarray(got, np.float64) - want64)
    err = diff / scale
    bad = int(np.count_nonzero(diff > rtol * scale + floor))
    if bad > limit:
        worst = float(np.max(err))
        detail = f"{bad} of {err.size} elements beyond rtol={rtol}, worst {worst:.3e}"
        if worst <= _ROUNDING_SIZED:
            detail += ". " + CANCELLATION_HINT.format(limit=_ROUNDING_SIZED)
        return detail, 0.0
    # the worst error within rtol: elements admitted by the floor or the limit are rounding's
    return None, float(np.max(np.where(err > rtol, 0.0, err)))


def ordered(bits: np.ndarray) -> np.ndarray:
    """16-bit float bit patterns as integers in the order of their values."""
    b = bits.astype(np.int64)
    return np.where(b & 0x8000, -(b & 0x7FFF), b)
