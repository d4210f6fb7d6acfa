"""Adam/AdamW against the float64 NumPy reference, every step of 100.

Tolerance: max |p - p_ref| <= 2e-6 * max |p_ref| at every step (float32 rounding: each step
rounds p once, ~6e-8 relative; over 100 steps we measured at most ~7e-7).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import vk_adam
from vk_adam._rules.builtin import ADAM, ADAMW

from .conftest import random_grad, scale_error

REFERENCE_RTOL = 2e-6

OPTIONS = [
    dict(amsgrad=a, maximize=m, weight_decay=wd)
    for a, m, wd in itertools.product([False, True], [False, True], [0.0, 0.05])
]


@pytest.mark.parametrize("name", ["adam", "adamw"])
@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_every_step_matches_float64_reference(rng, name, options):
    rule = {"adam": ADAM, "adamw": ADAMW}[name]
    cls = {"adam": vk_adam.Adam, "adamw": vk_adam.AdamW}[name]
    shapes = [(37, 11), (256,), (5,)]
    params = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    hyper = {**rule.defaults, **options, "lr": 10 ** rng.uniform(-3, -1.5)}
    refs = [p.astype(np.float64) for p in params]
    states = [{k: np.zeros(s) for k in rule.state_names(hyper)} for s in shapes]
    kwargs = {k: hyper[k] for k in ("lr", "betas", "eps", "weight_decay", "amsgrad", "maximize")}
    with cls(params, **kwargs) as opt:
        for t in range(1, 101):
            grads = [random_grad(rng, s) for s in shapes]
            opt.step(grads)
            for p, ref, g, st in zip(params, refs, grads, states, strict=False):
                rule.reference(ref, g.astype(np.float64), st, hyper, t)
                assert scale_error(p, ref) <= REFERENCE_RTOL, f"step {t}"
        sd = opt.state_dict()
    for i, st in enumerate(states):
        for k, v in st.items():
            assert scale_error(sd["state"][i][k], v) <= REFERENCE_RTOL * 10, k
        assert sd["state"][i]["step"] == 100


@pytest.mark.parametrize("n", [1, 3, 4, 5, 255, 256, 257, 1_000_003])
def test_any_element_count(rng, n):
    p = rng.standard_normal(n).astype(np.float32)
    ref = p.astype(np.float64)
    hyper = dict(ADAMW.defaults)
    st = {k: np.zeros(n) for k in ADAMW.state_names(hyper)}
    with vk_adam.AdamW([p]) as opt:
        for t in range(1, 4):
            g = random_grad(rng, (n,))
            opt.step([g])
            ADAMW.reference(ref, g.astype(np.float64), st, hyper, t)
    assert scale_error(p, ref) <= REFERENCE_RTOL
    assert not np.array_equal(p, ref.astype(np.float32) * 0)  # really updated, not zeros


def test_grid_stride_loop_covers_more_than_one_dispatch_width(rng, monkeypatch):
    """With the workgroup count capped at 2, each invocation loops many times: the same code
    path that lets one dispatch cover 10^9 elements where drivers cap a dimension at 65535."""
    import vk_adam._runtime.runtime as runtime_module

    monkeypatch.setattr(runtime_module, "MAX_WORKGROUPS", 2)
    n = 2 * 256 * 4 * 7 + 3  # 7 loop iterations per invocation, plus a scalar tail
    p = rng.standard_normal(n).astype(np.float32)
    ref = p.astype(np.float64)
    hyper = dict(ADAM.defaults)
    st = {k: np.zeros(n) for k in ADAM.state_names(hyper)}
    with vk_adam.Adam([p]) as opt:
        assert opt._rt.workgroup_cap == 2
        g = random_grad(rng, (n,))
        opt.step([g])
    ADAM.reference(ref, g.astype(np.float64), st, hyper, 1)
    assert scale_error(p, ref) <= REFERENCE_RTOL


def test_param_groups_have_their_own_hyperparameters(rng):
    a = rng.standard_normal((64, 3)).astype(np.float32)
    b = rng.standard_normal(10).astype(np.float32)
    ra, rb = a.astype(np.float64), b.astype(np.float64)
    groups = [{"params": [a]}, {"params": [b], "lr": 0.05, "weight_decay": 0.0}]
    ha = {**ADAMW.defaults, "lr": 1e-2}
    hb = {**ADAMW.defaults, "lr": 0.05, "weight_decay": 0.0}
    sa = {k: np.zeros(a.shape) for k in ADAMW.state_names(ha)}
    sb = {k: np.zeros(b.shape) for k in ADAMW.state_names(hb)}
    with vk_adam.AdamW(groups, lr=1e-2) as opt:
        assert opt.dispatches_per_step() == 2
        for t in range(1, 21):
            ga, gb = random_grad(rng, a.shape), random_grad(rng, b.shape)
            opt.step([ga, gb])
            ADAMW.reference(ra, ga.astype(np.float64), sa, ha, t)
            ADAMW.reference(rb, gb.astype(np.float64), sb, hb, t)
        assert scale_error(a, ra) <= REFERENCE_RTOL and scale_error(b, rb) <= REFERENCE_RTOL
        # torch-style schedule: change lr between steps
        opt.param_groups[1]["lr"] = 0.001
        ga, gb = random_grad(rng, a.shape), random_grad(rng, b.shape)
        opt.step([ga, gb])
        ADAMW.reference(rb, gb.astype(np.float64), sb, {**hb, "lr": 0.001}, 21)
        assert scale_error(b, rb) <= REFERENCE_RTOL
