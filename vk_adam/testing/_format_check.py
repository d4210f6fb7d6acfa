"""One rule setting under one storage format, step by step against :class:`FormatReference`
(the float64 reference with the harness's exact quantization and rounding)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import _formats as fmt
from .._optim import FormatReference, Optimizer, group_format, is_signed
from .._rules import UpdateRule
from ._compare import (
    COMPRESSED_NONFINITE_HINT,
    FLOAT32_NONFINITE_HINT,
    RuleConformanceError,
    check_close,
    nonfinite_detail,
    ordered,
)

#: Elements per format check: over INT8_MIN_ELEMENTS (so 8-bit state is used), with a partial
#: last block.
FORMAT_CHECK_SIZE = 4 * fmt.BLOCK * 4 + 103

#: (buffer name, the GPU's stored values, the reference's, the buffer's storage code; -1: param)
Stored = tuple[str, Any, Any, int]


class FormatCheck:
    """The checks of one (rule setting, format) pair; :meth:`run` takes the steps."""

    def __init__(
        self,
        rule: UpdateRule,
        overrides: Mapping[str, Any],
        case: tuple[str, bool, str],
        rtol: float,
        allowed: float,
    ) -> None:
        self.rule, self.overrides, self.rtol = rule, overrides, rtol
        self.param_dtype, self.stochastic, self.state_dtype = case
        self.options = {**rule.defaults, **overrides}
        self.variant = rule.variant_for(self.options)
        self.n = FORMAT_CHECK_SIZE
        padded = -(-self.n // fmt.BLOCK) * fmt.BLOCK
        self.form = group_format(
            self.variant.state, self.param_dtype, self.state_dtype, self.stochastic, padded
        )
        self.label = (
            f"(param {self.param_dtype}, stochastic_rounding={self.stochastic}, state {self.state_dtype}"
        )
        self.label += f", hyper={dict(overrides)})"
        self.limit = max(1, int(allowed * self.n))
        self.worst = 0.0

    def _hint(self) -> str:
        if self.param_dtype == "float32" and self.state_dtype == "float32":
            return FLOAT32_NONFINITE_HINT
        names = ", ".join(repr(s.name) for s in self.variant.state)
        return COMPRESSED_NONFINITE_HINT.format(state=f" (this variant's state: {names})" if names else "")

    def run(self, manager: Any, steps: int, rng: np.random.Generator) -> float:
        """Every step's checks; returns the worst agreeing error of the fp32 buffers."""
        dtype = fmt.NUMPY_DTYPES[self.param_dtype]
        p = rng.standard_normal(self.n).astype(np.float32).astype(dtype)
        seed = int(rng.integers(2**32))
        group = {"params": [p], **self.overrides}
        kwargs: dict[str, Any] = {
            "state_dtype": self.state_dtype,
            "stochastic_rounding": self.stochastic,
            "seed": seed,
        }
        with Optimizer([group], self.rule, manager=manager, **kwargs) as opt:
            ref = FormatReference(self.rule, self.options, self.form, seed=seed)
            for step in range(1, steps + 1):
                before = opt.state_dict()["state"]
                ref.load(p, before[0] if before else None)
                g = (
                    (rng.standard_normal(self.n) * 10.0 ** rng.uniform(-2, 1))
                    .astype(np.float32)
                    .astype(dtype)
                )
                opt.step([g])
                ref.step(g, step)
                after = opt.state_dict()["state"][0]
                stored = self._stored(p, ref, after)
                self._check_finite(stored, ref, after, step)
                for buffer in stored:
                    self._check_buffer(buffer, ref, after, step)
        return self.worst

    def _stored(self, p: Any, ref: FormatReference, after: Mapping[str, Any]) -> list[Stored]:
        stored: list[Stored] = [("param", p.reshape(-1), ref.param, -1)]
        if ref.master is not None:
            stored.append(("master_param", after["master_param"].reshape(-1), ref.master, fmt.STATE_F32))
        for s, code in zip(self.variant.state, self.form.state, strict=True):
            stored.append((s.name, after[s.name].reshape(-1), ref.state[s.name], code))
        return stored

    def _fail(self, what: str, detail: str, step: int) -> RuleConformanceError:
        return RuleConformanceError(
            f"rule {self.rule.name!r}: {what} differs from the format reference at step {step} "
            f"{self.label}: {detail}",
            step=step,
        )

    def _check_finite(
        self, stored: list[Stored], ref: FormatReference, after: Mapping[str, Any], step: int
    ) -> None:
        """Non-finite values first, in any buffer: the GPU's values as stored (8-bit codes
        dequantized with the GPU's block maxima) against the reference's float64 values before
        they were stored. NaN compares false with every tolerance and bound below."""
        for what, got, _, code in stored:
            if code >= fmt.STATE_INT8_SIGNED:
                values = fmt.dequantize_blockwise(got, after[what + ".absmax"], is_signed(code))
            else:
                values = got.astype(np.float64)
            unrounded = ref.unrounded["param" if what == "master_param" else what]
            stored_as = (
                self.param_dtype if what == "param" else "bfloat16" if code == fmt.STATE_BF16 else "float32"
            )
            detail = nonfinite_detail(values, unrounded, "format reference", stored_as)
            if detail is not None:
                buffer = what if what in ("param", "master_param") else f"state {what!r}"
                raise RuleConformanceError(
                    f"rule {self.rule.name!r}: {buffer} is not finite at step {step} {self.label}: "
                    f"{detail}. {self._hint()}",
                    step=step,
                )

    def _check_buffer(
        self, buffer: Stored, ref: FormatReference, after: Mapping[str, Any], step: int
    ) -> None:
        what, got, want, code = buffer
        if code >= fmt.STATE_INT8_SIGNED:
            codes, absmax = want
            amax_err = np.abs(after[what + ".absmax"].astype(np.float64) - absmax)
            if np.any(amax_err > 1e-5 * np.maximum(absmax, 1e-30)):
                raise self._fail(what, f"block absmax off by up to {float(np.max(amax_err)):.3e}", step)
            got_key, want_key = got.astype(np.int64), codes.astype(np.int64)
        elif got.dtype.itemsize == 2:  # 16-bit values, compared in value order
            got_key, want_key = ordered(got.view(np.uint16)), ordered(np.asarray(want).view(np.uint16))
        else:  # fp32 buffers agree within rtol
            detail, worst = check_close(got, want, np.zeros(1), self.rtol, self.limit)
            if detail is not None:
                raise self._fail(what, detail, step)
            self.worst = max(self.worst, worst)
            return
        self._check_rounded(what, code, got_key, want_key, ref, step)

    def _check_rounded(
        self, what: str, code: int, got_key: Any, want_key: Any, ref: FormatReference, step: int
    ) -> None:
        """A stored value may differ from the reference's only where the float64 value lies
        within rtol (of the buffer's scale) of a rounding or quantization boundary, and then only
        to what the other side of that band stores."""
        unrounded = ref.unrounded[what]
        band = self.rtol * max(float(np.max(np.abs(unrounded))), 1e-30)
        low, high = ref.bounds(what, band)
        if code >= fmt.STATE_INT8_SIGNED:
            lo, hi = low.astype(np.int64), high.astype(np.int64)
        else:
            lo, hi = ordered(np.asarray(low).view(np.uint16)), ordered(np.asarray(high).view(np.uint16))
        explained = (got_key == want_key) | (
            (got_key >= np.minimum(lo, hi)) & (got_key <= np.maximum(lo, hi))
        )
        unexplained = np.count_nonzero(~explained)
        if unexplained > self.limit:
            raise self._fail(
                what,
                f"{unexplained} of {self.n} stored values differ beyond rounding within rtol={self.rtol} "
                f"(e.g. element {int(np.flatnonzero(~explained)[0])})",
                step,
            )
