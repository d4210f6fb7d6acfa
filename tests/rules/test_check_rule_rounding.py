"""``check_rule``'s tolerance knows float32 cancellation. An element whose result cancels (SGD's
momentum buffer ``g + wd * p`` with ``g`` near ``-wd * p``) keeps the rounding of its operands,
far more than ``rtol`` of its own size: it agrees. A difference in the formula at that same
element, about 170 roundings of its operands, still fails."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from vk_adam._rules.builtin import SGD, sgd_reference
from vk_adam.testing import RuleConformanceError, check_rule
from vk_adam.testing._float32 import reference_with_floor

NESTEROV = {"momentum": 0.9, "nesterov": True, "weight_decay": 0.01}
#: A seed whose one-element check draws p = -2.32, g = 0.0235 = -1.014 * wd * p: the momentum
#: buffer's float32 result is 3.8e-6 of its own size off the float64 one (rtol is 2e-6).
CANCELLING_SEED = 1695756575


def test_the_floor_is_the_operands_rounding_where_a_result_cancels():
    options = {**SGD.defaults, **NESTEROV}
    p = np.array([1.0, 1.0, -2.0])
    g = np.array([-0.01 * (1 + 1e-4), 0.5, 3.0], np.float32)  # the first cancels against wd * p
    state = {"momentum_buffer": np.zeros(3)}
    floor = reference_with_floor(SGD, p, g, state, options, step=1)
    buf = state["momentum_buffer"]
    assert abs(buf[0]) < 2e-4 * 0.01  # it did cancel
    # the cancelling element: a few roundings of its operands (|g| and |wd * p|, 0.01 each)
    assert 2.0**-24 * 0.02 <= floor["momentum_buffer"][0] <= 8 * 2.0**-24 * 0.02
    # the others: a few roundings of their own size, well inside rtol
    assert np.all(floor["momentum_buffer"][1:] < 2e-6 * np.abs(buf[1:]))
    assert np.all(floor["param"] < 2e-6 * np.abs(p))


def test_a_cancelling_element_agrees():
    report = check_rule(SGD, hyper=[NESTEROV], sizes=(1,), steps=1, formats=[], seed=CANCELLING_SEED)
    assert report.cases == 1 and report.worst_error <= 2e-6


def test_a_wrong_formula_at_a_cancelling_element_still_fails():
    def off_by_1e5(param: Any, grad: Any, state: dict[str, Any], hyper: Any, step: int) -> None:
        sgd_reference(param, grad, state, {**hyper, "weight_decay": hyper["weight_decay"] * (1 + 1e-5)}, step)

    wrong = dataclasses.replace(SGD, reference=off_by_1e5)
    with pytest.raises(RuleConformanceError, match="momentum_buffer differs from the reference at step 1"):
        check_rule(wrong, hyper=[NESTEROV], sizes=(1,), steps=1, formats=[], seed=CANCELLING_SEED)
