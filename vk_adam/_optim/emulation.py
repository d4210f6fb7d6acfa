"""The float64 reference of one buffer set *with its storage formats*: the rule's float64
reference math, between exactly the loads and stores the shader harness does (16-bit params
with an fp32 master copy or stochastic rounding from the same random stream, bf16 state
rounded to nearest even, 8-bit blockwise state quantized with the same map, thresholds and
block maxima). Pure NumPy; ``vk_adam.testing`` compares the GPU against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import _formats as fmt
from .._rules import UpdateRule
from .storage import GroupFormat, is_signed

F64 = npt.NDArray[np.float64]
Array = npt.NDArray[Any]


class FormatReference:
    """One buffer set's stored values, stepped by the rule's reference in float64.

    ``param``: the stored param (float32, float16 or bfloat16 values; fp32 params are kept in
    float64, as the plain reference does). ``master``: float64 master copy (or None). ``state``:
    per state buffer, float64 values (fp32 state), bfloat16 values, or (uint8 codes, fp32
    absmax per block). ``offset``: the param's first element in its flat buffer, and
    ``buffer_index`` the buffer set's index: both feed the stochastic-rounding stream.
    """

    def __init__(
        self,
        rule: UpdateRule,
        options: Mapping[str, Any],
        form: GroupFormat,
        *,
        seed: int = 0,
        buffer_index: int = 0,
        offset: int = 0,
    ) -> None:
        self.rule, self.options, self.form = rule, options, form
        self.variant = rule.variant_for(options)
        self.seed, self.buffer_index, self.offset = seed, buffer_index, offset
        self.param: Array = np.zeros(0)
        self.master: F64 | None = None
        self.state: dict[str, Any] = {}
        #: The float64 values of the last step before they were stored ("param" and each
        #: state buffer), and the random bits that rounded the param (stochastic rounding).
        self.unrounded: dict[str, F64] = {}
        self._bits: npt.NDArray[np.uint32] | None = None

    def load(self, param: Array, entry: Mapping[str, Any] | None) -> None:
        """Start from a param (as stored) and a state-dict entry of the optimizer (None: the
        initial state)."""
        flat = np.asarray(param).reshape(-1)
        self.param = flat.astype(np.float64) if self.form.param == "float32" else flat.copy()
        n = flat.size
        self.master = None
        if self.form.has_master:
            master = entry.get("master_param") if entry else None
            source = master if master is not None else flat
            self.master = np.asarray(source, np.float64).reshape(-1).copy()
        for s, code in zip(self.variant.state, self.form.state, strict=True):
            if entry is None:
                values = np.full(n, s.initial_value, np.float64)
                self.state[s.name] = self._store_state(code, values)
            elif code >= fmt.STATE_INT8_SIGNED:
                codes = np.asarray(entry[s.name]).reshape(-1).copy()
                self.state[s.name] = (codes, np.asarray(entry[s.name + ".absmax"], np.float32).copy())
            elif code == fmt.STATE_BF16:
                self.state[s.name] = np.asarray(entry[s.name]).reshape(-1).copy()
            else:
                self.state[s.name] = np.asarray(entry[s.name], np.float64).reshape(-1).copy()

    def values(self, name: str) -> F64:
        """A state buffer's values in float64 (dequantized)."""
        code = self.form.state[[s.name for s in self.variant.state].index(name)]
        stored = self.state[name]
        if code >= fmt.STATE_INT8_SIGNED:
            codes, absmax = stored
            return fmt.dequantize_blockwise(codes, absmax, is_signed(code))
        return np.asarray(stored, np.float64)

    def step(self, grad: Array, step: int) -> None:
        """Take step ``step`` (1-based) with ``grad`` (the values the GPU reads)."""
        g = np.asarray(grad).reshape(-1).astype(np.float64)
        g.flags.writeable = False
        p = self.master.copy() if self.master is not None else np.asarray(self.param, np.float64).copy()
        state = {s.name: self.values(s.name).copy() for s in self.variant.state}
        self.rule.reference(p, g, state, self.options, step)
        self.unrounded = {"param": p.copy(), **{k: v.copy() for k, v in state.items()}}
        for s, code in zip(self.variant.state, self.form.state, strict=True):
            self.state[s.name] = self._store_state(code, state[s.name])
        if self.form.mode == fmt.MODE_STOCHASTIC:
            key = fmt.step_key(self.seed, self.buffer_index, step)
            self._bits = fmt.random_bits(key, self.offset + p.size)[self.offset :]
        if self.form.has_master:
            self.master = p
        self.param = self._round_param(p)

    def _round_param(self, p: F64) -> Array:
        if self.form.param == "float32":
            return p
        return fmt.round_to(p, self.form.param, self._bits if self.form.mode == fmt.MODE_STOCHASTIC else None)

    def bounds(self, what: str, band: float) -> tuple[Array, Array]:
        """What the last step would have stored for ``what`` ("param" or a state buffer) had
        its float64 values been ``band`` lower, and ``band`` higher (8-bit state: with the
        same block maxima). A GPU value between the two is the same math, rounded across a
        boundary by float32 arithmetic."""
        x = self.unrounded[what]
        if what == "param":
            return self._round_param(x - band), self._round_param(x + band)
        code = self.form.state[[s.name for s in self.variant.state].index(what)]
        if code >= fmt.STATE_INT8_SIGNED:
            absmax = self.state[what][1]
            return (
                fmt.codes_for(x - band, absmax, is_signed(code)),
                fmt.codes_for(x + band, absmax, is_signed(code)),
            )
        return self._store_state(code, x - band), self._store_state(code, x + band)

    @staticmethod
    def _store_state(code: int, values: F64) -> Any:
        if code == fmt.STATE_F32:
            return values
        if code == fmt.STATE_BF16:
            return np.asarray(values, np.float32).astype(fmt.BFLOAT16)
        # the shader quantizes its fp32 values, with the absmax of those
        return fmt.quantize_blockwise(np.asarray(values, np.float32), is_signed(code))
