"""Property tests: sizes, hyperparameters and step counts drawn by hypothesis."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import vk_adam
from vk_adam._rules.builtin import ADAM, ADAMW, SGD

from .conftest import scale_error

RULES = {"adam": (vk_adam.Adam, ADAM), "adamw": (vk_adam.AdamW, ADAMW)}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(RULES)),
    n=st.integers(1, 3000),
    steps=st.integers(1, 12),
    lr=st.floats(1e-5, 0.3),
    beta1=st.floats(0.0, 0.99),
    beta2=st.floats(0.5, 0.9999),
    eps=st.floats(1e-10, 1e-3),
    weight_decay=st.floats(0.0, 0.3),
    amsgrad=st.booleans(),
    maximize=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
# A param that shrinks from 0.25 to 0.014 over the steps: float32's rounding error is relative to
# the magnitudes the trajectory went through, not to the (small) final value.
@example(
    name="adam",
    n=1,
    steps=7,
    lr=0.1875,
    beta1=0.75,
    beta2=0.5,
    eps=0.0003451773393505179,
    weight_decay=0.0,
    amsgrad=False,
    maximize=False,
    seed=0,
)
def test_adam_family_matches_reference(
    name, n, steps, lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, seed
):
    cls, rule = RULES[name]
    rng = np.random.default_rng(seed)
    p = rng.standard_normal(n).astype(np.float32)
    ref = p.astype(np.float64)
    kwargs = dict(
        lr=lr, betas=(beta1, beta2), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize
    )
    hyper = {**rule.defaults, **kwargs}
    state = {k: np.zeros(n) for k in rule.state_names(hyper)}
    scale = float(np.max(np.abs(ref)))  # the largest |param| along the way
    with cls([p], **kwargs) as opt:
        for t in range(1, steps + 1):
            g = (rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 2)).astype(np.float32)
            opt.step([g])
            rule.reference(ref, g.astype(np.float64), state, hyper, t)
            scale = max(scale, float(np.max(np.abs(ref))))
    assert float(np.max(np.abs(p.astype(np.float64) - ref))) / max(scale, 1e-30) <= 2e-6


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 2000),
    steps=st.integers(1, 8),
    momentum=st.sampled_from([0.0, 0.5, 0.9]),
    dampening=st.sampled_from([0.0, 0.2]),
    nesterov=st.booleans(),
    weight_decay=st.floats(0.0, 0.1),
    seed=st.integers(0, 2**32 - 1),
)
def test_sgd_matches_reference(n, steps, momentum, dampening, nesterov, weight_decay, seed):
    if nesterov and (momentum == 0 or dampening != 0):
        return  # invalid combination, covered by test_errors
    rng = np.random.default_rng(seed)
    p = rng.standard_normal(n).astype(np.float32)
    ref = p.astype(np.float64)
    kwargs = dict(
        lr=0.01, momentum=momentum, dampening=dampening, nesterov=nesterov, weight_decay=weight_decay
    )
    hyper = {**SGD.defaults, **kwargs}
    state = {k: np.zeros(n) for k in SGD.state_names(hyper)}
    with vk_adam.SGD([p], **kwargs) as opt:
        for t in range(1, steps + 1):
            g = rng.standard_normal(n).astype(np.float32)
            opt.step([g])
            SGD.reference(ref, g.astype(np.float64), state, hyper, t)
    assert scale_error(p, ref) <= 2e-6
