"""state_dict round trips: save, load into a fresh optimizer, continue identically."""

from __future__ import annotations

import numpy as np
import pytest

import vk_adam

from ..conftest import random_grad


@pytest.mark.parametrize("amsgrad", [False, True])
def test_resume_from_state_dict_is_bit_identical(rng, amsgrad):
    shapes = [(20, 3), (7,)]
    a = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [[random_grad(rng, s) for s in shapes] for _ in range(10)]
    with vk_adam.AdamW(a, lr=1e-2, amsgrad=amsgrad) as opt:
        for g in grads[:5]:
            opt.step(g)
        sd = opt.state_dict()
        b = [p.copy() for p in a]
        for g in grads[5:]:
            opt.step(g)
    assert sd["state"][0]["step"] == 5.0 and set(sd["state"][0]) >= {"exp_avg", "exp_avg_sq"}
    with vk_adam.AdamW(b, lr=1e-2, amsgrad=amsgrad) as opt2:
        opt2.load_state_dict(sd)
        for g in grads[5:]:
            opt2.step(g)
    for x, y in zip(a, b, strict=False):
        np.testing.assert_array_equal(x, y)


def test_fresh_optimizer_has_torch_like_empty_state():
    with vk_adam.Adam([np.ones(3, np.float32)]) as opt:
        sd = opt.state_dict()
    assert sd["state"] == {}
    assert sd["param_groups"][0]["params"] == [0] and sd["param_groups"][0]["lr"] == 1e-3


def test_load_torch_state_dict(rng):
    torch = pytest.importorskip("torch")
    p = rng.standard_normal(10).astype(np.float32)
    tp = torch.tensor(p.copy(), requires_grad=True)
    topt = torch.optim.AdamW([tp], lr=1e-2)
    for _ in range(3):
        tp.grad = torch.from_numpy(random_grad(rng, (10,)))
        topt.step()
    tsd = topt.state_dict()
    sd = {
        "state": {
            k: {n: (v.numpy() if hasattr(v, "numpy") else v) for n, v in s.items()}
            for k, s in tsd["state"].items()
        },
        "param_groups": tsd["param_groups"],
    }
    q = tp.detach().numpy().copy()
    with vk_adam.AdamW([q], lr=1e-2) as opt:
        opt.load_state_dict(sd)
        g = random_grad(rng, (10,))
        opt.step([g])
    tp.grad = torch.from_numpy(g.copy())
    topt.step()
    np.testing.assert_allclose(q, tp.detach().numpy(), rtol=0, atol=1e-6 * np.abs(q).max())


def test_another_rules_state_is_named_as_such(rng):
    """An SGD state dict loaded into AdamW says it looks like another rule's state, and changes nothing."""
    p = rng.standard_normal(16).astype(np.float32)
    with vk_adam.SGD([p], lr=0.1, momentum=0.9) as sgd:
        sgd.step([rng.standard_normal(16).astype(np.float32)])
        sd = sgd.state_dict()
    with vk_adam.AdamW([p.copy()]) as adamw:
        before = adamw.state_dict()
        with pytest.raises(ValueError) as refused:
            adamw.load_state_dict(sd)
        assert adamw.state_dict() == before
    message = str(refused.value)
    assert "lacks 'exp_avg' (rule 'adamw' keeps ['exp_avg', 'exp_avg_sq'])" in message
    assert "looks like the state of a rule with buffers ['momentum_buffer']" in message
    assert "hyperparameters ['dampening', 'momentum', 'nesterov']" in message
