"""Params and gradients that already live on the application's kp.Manager."""

from __future__ import annotations

import numpy as np
import pytest

import vk_adam
from vk_adam._rules.builtin import ADAMW
from vk_adam._runtime._kp import kp_module

from ..conftest import random_grad, scale_error


def download(mgr, tensor):
    kp = kp_module()
    mgr.sequence().eval(kp.OpTensorSyncLocal([tensor]))
    return tensor.data().copy()


def upload(mgr, tensor, values):
    kp = kp_module()
    tensor.data()[:] = values
    mgr.sequence().eval(kp.OpTensorSyncDevice([tensor]))


@pytest.mark.parametrize("n", [1, 257, 4096])
def test_kp_tensor_params_with_device_gradients(rng, kp_manager, n):
    mgr = kp_manager
    init = rng.standard_normal(n).astype(np.float32)
    param = mgr.tensor(init.copy())
    grad = mgr.tensor(np.zeros(n, np.float32))
    upload(mgr, param, init)
    ref = init.astype(np.float64)
    hyper = dict(ADAMW.defaults)
    state = {k: np.zeros(n) for k in ADAMW.state_names(hyper)}
    with vk_adam.AdamW([param], manager=mgr) as opt:
        assert opt.param_buffer() is param
        for t in range(1, 6):
            g = random_grad(rng, (n,))
            upload(mgr, grad, g)  # the application's own write
            opt.step([grad])
            ADAMW.reference(ref, g.astype(np.float64), state, hyper, t)
        # the gradient buffer was zeroed in the same pass
        np.testing.assert_array_equal(download(mgr, grad), np.zeros(n, np.float32))
    assert scale_error(download(mgr, param), ref) <= 2e-6
    param.destroy()
    grad.destroy()


def test_step_without_grads_reads_the_optimizer_gradient_buffer(rng, kp_manager):
    mgr = kp_manager
    n = 300
    init = rng.standard_normal(n).astype(np.float32)
    param = mgr.tensor(init.copy())
    upload(mgr, param, init)
    ref = init.astype(np.float64)
    hyper = {**ADAMW.defaults, "lr": 0.01}
    state = {k: np.zeros(n) for k in ADAMW.state_names(hyper)}
    with vk_adam.AdamW([param], lr=0.01, manager=mgr) as opt:
        for t in range(1, 4):
            g = random_grad(rng, (n,))
            upload(mgr, opt.grad_buffer(), g)
            opt.step()
            ADAMW.reference(ref, g.astype(np.float64), state, hyper, t)
        sd = opt.state_dict()
    assert scale_error(download(mgr, param), ref) <= 2e-6
    assert scale_error(sd["state"][0]["exp_avg"], state["exp_avg"]) <= 1e-5
    param.destroy()


def test_kp_params_need_their_manager(kp_manager):
    t = kp_manager.tensor(np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="manager="):
        vk_adam.Adam([t])
    t.destroy()


def test_numpy_group_grad_buffer_offsets(rng):
    a = rng.standard_normal((3, 5)).astype(np.float32)
    b = rng.standard_normal(2).astype(np.float32)
    with vk_adam.SGD([a, b], lr=0.1) as opt:
        offsets = opt.param_offsets()
        assert offsets[0] == (0, (3, 5)) and offsets[1][0] % 64 == 0 and offsets[1][0] >= 15
        assert opt.dispatches_per_step() == 1


def test_zero_grad_clears_the_device_gradient_buffer(rng, kp_manager):
    mgr = kp_manager
    param = mgr.tensor(rng.standard_normal(64).astype(np.float32))
    upload(mgr, param, param.data().copy())
    with vk_adam.SGD([param], lr=0.1, manager=mgr, zero_grad=False) as opt:
        assert not opt.zeroes_grad
        upload(mgr, opt.grad_buffer(), random_grad(rng, (64,)))
        opt.step()
        assert np.any(download(mgr, opt.grad_buffer()) != 0)  # zero_grad=False keeps it
        opt.zero_grad()
        np.testing.assert_array_equal(download(mgr, opt.grad_buffer()), 0)
        before = download(mgr, param)
        opt.step()  # a zero gradient: plain SGD leaves the params unchanged
        np.testing.assert_array_equal(download(mgr, param), before)
    param.destroy()


def test_manager_takes_a_device_handle(rng):
    """``manager=vk_adam.open_device()`` is the handle's shared kp.Manager; another object that
    carries one is refused with a message that says ``.manager``; a closed handle is refused."""
    init = rng.standard_normal(64).astype(np.float32)
    g = random_grad(rng, (64,))
    with vk_adam.open_device() as dev:
        param = dev.manager.tensor(init.copy())
        upload(dev.manager, param, init)
        with vk_adam.SGD([param], lr=0.5, manager=dev) as opt:
            assert opt._rt.manager is dev.manager
            upload(dev.manager, opt.grad_buffer(), g)
            opt.step()
        np.testing.assert_allclose(download(dev.manager, param), init - 0.5 * g, rtol=1e-6, atol=1e-6)
        param.destroy()

        class Holder:
            manager = dev.manager

        with pytest.raises(
            TypeError, match=r"kp.Manager, a vk_adam.DeviceHandle or None .*pass its .manager"
        ):
            vk_adam.Adam([np.zeros(4, np.float32)], manager=Holder())
    with pytest.raises(ValueError, match="closed DeviceHandle"):
        vk_adam.Adam([np.zeros(4, np.float32)], manager=dev)
