"""Adam/AdamW against the float64 NumPy reference, every step of 100.

Tolerance: max |p - p_ref| <= 2e-6 * max |p_ref| at every step (float32 rounding: each step
rounds p once, ~6e-8 relative; over 100 steps we measured at most ~7e-7), plus, element by
element, the error Adam's coupled L2 term amplifies where g + wd p lands near eps
(``coupled_decay_error``).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import vk_adam
from vk_adam._rules.builtin import ADAM, ADAMW

from ..conftest import random_grad, scale_error

REFERENCE_RTOL = 2e-6

OPTIONS = [
    dict(amsgrad=a, maximize=m, weight_decay=wd)
    for a, m, wd in itertools.product([False, True], [False, True], [0.0, 0.05])
]


def coupled_decay_error(
    hyper: dict, t: int, g: np.ndarray, p: np.ndarray, state: dict[str, np.ndarray], allowed: np.ndarray
) -> np.ndarray:
    """How much step ``t`` may add to a float32 param's distance from the float64 one, element
    by element, when Adam's coupled L2 term brings s = g + wd p near eps.

    The shader rounds s in float32: |ds| <= 2^-23 (|g| + wd |p|), plus wd times the param's
    own error so far. The update lr m^ / (sqrt(v^) + eps) then moves by its derivatives in s,
    through m ((1 - b1) / (1 - b1^t) / D) and v (|m^| (1 - b2) |s| / ((1 - b2^t) sqrt(v^) D^2)),
    D = sqrt(v^) + eps: up to lr / eps times |ds| where s ~ eps. Elsewhere this is far below
    the 2e-6 of scale. (AdamW's decay scales p instead: wd counts 0 here.)"""
    (b1, b2), eps, lr = hyper["betas"], hyper["eps"], hyper["lr"]
    wd = 0.0 if hyper["decoupled_weight_decay"] else hyper["weight_decay"]
    g64 = -g.astype(np.float64) if hyper["maximize"] else g.astype(np.float64)
    s = g64 + wd * p
    scale = float(np.max(np.abs(p)))
    ds = 2.0**-23 * (np.abs(g64) + wd * np.abs(p)) + wd * (allowed + REFERENCE_RTOL * scale)
    v = state["max_exp_avg_sq"] if hyper["amsgrad"] else state["exp_avg_sq"]
    c1, c2 = 1.0 - b1**t, 1.0 - b2**t
    root = np.sqrt(v / c2)
    d = root + eps
    through_m = (1.0 - b1) / c1 / d
    through_v = (
        np.abs(state["exp_avg"]) / c1 * (1.0 - b2) * np.abs(s) / c2 / (np.maximum(root, 1e-300) * d * d)
    )
    return lr * ds * (through_m + through_v)


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
    allowed = [np.zeros(s) for s in shapes]  # amplified float32 error, element by element
    with cls(params, **kwargs) as opt:
        for t in range(1, 101):
            grads = [random_grad(rng, s) for s in shapes]
            opt.step(grads)
            for p, ref, g, st, allow in zip(params, refs, grads, states, allowed, strict=True):
                before = ref.copy()
                rule.reference(ref, g.astype(np.float64), st, hyper, t)
                allow += coupled_decay_error(hyper, t, g, before, st, allow)
                error = np.abs(p.astype(np.float64) - ref)
                bound = REFERENCE_RTOL * max(float(np.max(np.abs(ref))), 1e-30) + allow
                assert np.all(error <= bound), (f"step {t}", float(np.max(error / bound)))
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
    from vk_adam._runtime.facts import MAX_WORKGROUPS_ENV

    monkeypatch.setenv(MAX_WORKGROUPS_ENV, "2")
    n = 2 * 256 * 4 * 7 + 3  # 7 loop iterations per invocation, plus a scalar tail
    p = rng.standard_normal(n).astype(np.float32)
    ref = p.astype(np.float64)
    hyper = dict(ADAM.defaults)
    st = {k: np.zeros(n) for k in ADAM.state_names(hyper)}
    with vk_adam.Adam([p]) as opt:
        assert opt._rt.facts.workgroup_cap == opt._rt.facts.update_workgroup_cap == 2
        g = random_grad(rng, (n,))
        opt.step([g])
    ADAM.reference(ref, g.astype(np.float64), st, hyper, 1)
    assert scale_error(p, ref) <= REFERENCE_RTOL


def test_an_update_dispatch_may_take_the_device_s_whole_grid(rng):
    """The rule harness's loops index vec4s, so an update dispatch runs up to the device's
    maxComputeWorkGroupCount[0] workgroups (one per tile: no grid-stride tail), where vk-adam's
    other shaders keep 65535. A step wider than 65535 workgroups updates every element; the
    check needs a device whose limit is above 65535 (NVIDIA's, AMD's; not lavapipe's)."""
    with vk_adam.Adam([np.zeros(4, np.float32)]) as probe:
        facts = probe._rt.facts
        assert facts.update_workgroup_cap == facts.info.max_workgroup_count
        assert facts.workgroup_cap == min(65535, facts.info.max_workgroup_count)
        limit = facts.info.max_workgroup_count
        if limit <= 65535:
            pytest.skip(f"maxComputeWorkGroupCount[0] is {limit} here: no wider grid")
    n = 65536 * 256 * 4 + 4 * 1000 + 3  # 65,540 workgroups of 256 vec4s, and a scalar tail
    p = rng.standard_normal(n).astype(np.float32)
    ref = p.astype(np.float64)
    hyper = dict(ADAM.defaults)
    st = {k: np.zeros(n) for k in ADAM.state_names(hyper)}
    with vk_adam.Adam([p]) as opt:
        for t in (1, 2):
            g = random_grad(rng, (n,))
            opt.step([g])
            ADAM.reference(ref, g.astype(np.float64), st, hyper, t)
    assert scale_error(p, ref) <= REFERENCE_RTOL
    assert scale_error(p[-5000:], ref[-5000:]) <= REFERENCE_RTOL  # the last workgroups' share


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
