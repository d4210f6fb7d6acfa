"""Asynchronous steps stay ordered; non-finite gradients follow torch or skip on request."""

from __future__ import annotations

import numpy as np
import pytest

import vk_adam
from vk_adam._rules.builtin import ADAMW
from vk_adam._runtime._kp import kp_module

from ..conftest import random_grad, scale_error
from ..runtime.test_device_buffers import download, upload


def test_back_to_back_async_steps_equal_synchronous_ones(rng, kp_manager):
    mgr = kp_manager
    n = 20_000
    init = rng.standard_normal(n).astype(np.float32)
    grads = [random_grad(rng, (n,)) for _ in range(4)]
    gtensors = [mgr.tensor(g) for g in grads]
    for gt, g in zip(gtensors, grads, strict=False):
        upload(mgr, gt, g)
    param = mgr.tensor(init.copy())
    upload(mgr, param, init)
    ref = init.astype(np.float64)
    hyper = {**ADAMW.defaults, "lr": 0.01}
    state = {k: np.zeros(n) for k in ADAMW.state_names(hyper)}
    with vk_adam.AdamW([param], lr=0.01, manager=mgr, zero_grad=False) as opt:
        handles = [opt.step([gt], wait=False) for gt in gtensors]  # no host wait in between
        assert [h.step for h in handles] == [1, 2, 3, 4]
        handles[-1].wait()
        assert all(h.done for h in handles)
    for t, g in enumerate(grads, start=1):
        ADAMW.reference(ref, g.astype(np.float64), state, hyper, t)
    assert scale_error(download(mgr, param), ref) <= 2e-6
    for t in [param, *gtensors]:
        t.destroy()


def test_steps_recorded_back_to_back_into_one_sequence_stay_ordered(rng, kp_manager):
    """50 steps recorded into the application's sequence, one submit: each step must see the
    previous step's params and state (the ordering record_step's bridge copy provides)."""
    mgr = kp_manager
    kp = kp_module()
    n = 300_000
    init = rng.standard_normal(n).astype(np.float32)
    param = mgr.tensor(init.copy())
    grads = [random_grad(rng, (n,)) for _ in range(3)]
    gtensors = [mgr.tensor(g) for g in grads]
    for t in [param, *gtensors]:
        upload(mgr, t, t.data().copy())
    ref = init.astype(np.float64)
    hyper = {**ADAMW.defaults, "lr": 0.01}
    state = {k: np.zeros(n) for k in ADAMW.state_names(hyper)}
    seq = mgr.sequence()
    with vk_adam.AdamW([param], lr=0.01, manager=mgr, zero_grad=False) as opt:
        for t in range(1, 51):
            assert opt.record_step(seq, [gtensors[t % 3]]) == t
            ADAMW.reference(ref, grads[t % 3].astype(np.float64), state, hyper, t)
        assert scale_error(download(mgr, param), init) == 0  # nothing ran yet
        seq.eval()
        with pytest.raises(TypeError, match="record_step needs params on the device"):
            with vk_adam.Adam([np.ones(3, np.float32)]) as host_opt:
                host_opt.record_step(seq)
    assert scale_error(download(mgr, param), ref) <= 2e-6
    seq.destroy()
    for t in [param, *gtensors]:
        t.destroy()
    del kp


def test_async_numpy_step_updates_params_on_wait(rng):
    p = rng.standard_normal(100).astype(np.float32)
    q = p.copy()
    grads = [random_grad(rng, (100,)) for _ in range(3)]
    with vk_adam.Adam([p], lr=0.01) as a, vk_adam.Adam([q], lr=0.01) as b:
        for g in grads:
            a.step([g], wait=False)
            b.step([g])
        a.synchronize()
    np.testing.assert_array_equal(p, q)


def test_nan_gradient_propagates_by_default_like_torch(rng):
    p = rng.standard_normal(10).astype(np.float32)
    g = random_grad(rng, (10,))
    g[3] = np.nan
    with vk_adam.Adam([p]) as opt:
        opt.step([g])
    assert np.isnan(p[3]) and np.isfinite(np.delete(p, 3)).all()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_skip_nonfinite_leaves_params_state_and_step_untouched(rng, bad):
    shapes = [(40,), (3, 3)]
    params = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    with vk_adam.AdamW(params, skip_nonfinite=True) as opt:
        opt.step([random_grad(rng, s) for s in shapes])
        before = [p.copy() for p in params]
        sd = opt.state_dict()
        grads = [random_grad(rng, s) for s in shapes]
        grads[1][2, 1] = bad
        handle = opt.step(grads)
        assert handle.skipped
        for p, q in zip(params, before, strict=False):
            np.testing.assert_array_equal(p, q)
        after = opt.state_dict()
        assert after["state"][0]["step"] == 1.0
        np.testing.assert_array_equal(after["state"][0]["exp_avg"], sd["state"][0]["exp_avg"])
        ok = opt.step([random_grad(rng, s) for s in shapes])
        assert not ok.skipped and opt.state_dict()["state"][0]["step"] == 2.0
        with pytest.raises(ValueError, match="synchronous"):
            opt.step([random_grad(rng, s) for s in shapes], wait=False)


def test_functional_adam_update_matches_reference(rng, kp_manager):
    n = 1001
    p = rng.standard_normal(n).astype(np.float32)
    m = np.zeros(n, np.float32)
    v = np.zeros(n, np.float32)
    ref = p.astype(np.float64)
    hyper = {**ADAMW.defaults, "lr": 0.01}
    state = {"exp_avg": np.zeros(n), "exp_avg_sq": np.zeros(n)}
    for t in range(1, 4):
        g = random_grad(rng, (n,))
        ref_g = g.astype(np.float64)
        vk_adam.adam_update(p, g, m, v, t, {"lr": 0.01})
        ADAMW.reference(ref, ref_g, state, hyper, t)
        np.testing.assert_array_equal(g, 0)  # zeroed in the same pass
    assert scale_error(p, ref) <= 2e-6
    assert scale_error(m, state["exp_avg"]) <= 1e-5
    # same on kp tensors owned by the application
    tensors = [kp_manager.tensor(a) for a in (p.copy(), random_grad(rng, (n,)), m.copy(), v.copy())]
    for t_ in tensors:
        upload(kp_manager, t_, t_.data().copy())
    vk_adam.adam_update(*tensors, 4, {"lr": 0.01}, manager=kp_manager)
    assert not np.array_equal(download(kp_manager, tensors[0]), p)
    with pytest.raises(ValueError, match="step must be an integer >= 1"):
        vk_adam.adam_update(p, g, m, v, 0)
    with pytest.raises(ValueError, match="differ in size"):
        vk_adam.adam_update(p, g[:5].copy(), m, v, 1)
    for t_ in tensors:
        t_.destroy()
