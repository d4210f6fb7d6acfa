"""Bad input: torch's messages, clear errors, and nothing half-applied."""

from __future__ import annotations

import numpy as np
import pytest

import vk_adam

from ..conftest import random_grad


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lr": -1.0}, "Invalid learning rate: -1.0"),
        ({"eps": -1e-8}, "Invalid epsilon value: -1e-08"),
        ({"betas": (1.0, 0.999)}, "Invalid beta parameter at index 0: 1.0"),
        ({"betas": (0.9, -0.1)}, "Invalid beta parameter at index 1: -0.1"),
        ({"weight_decay": -0.5}, "Invalid weight_decay value: -0.5"),
        ({"lr": float("nan")}, "Invalid learning rate: nan"),
    ],
)
@pytest.mark.parametrize("cls", [vk_adam.Adam, vk_adam.AdamW])
def test_adam_hyperparameters_validated_with_torch_messages(cls, kwargs, message):
    with pytest.raises(ValueError, match=f"^{message.replace('(', '[(]').replace('.', '[.]')}$"):
        cls([np.zeros(4, np.float32)], **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lr": -1.0}, "Invalid learning rate: -1.0"),
        ({"momentum": -0.1}, "Invalid momentum value: -0.1"),
        ({"weight_decay": -1.0}, "Invalid weight_decay value: -1.0"),
        ({"nesterov": True}, "Nesterov momentum requires a momentum and zero dampening"),
        ({"nesterov": True, "momentum": 0.9, "dampening": 0.1}, "Nesterov momentum requires"),
    ],
)
def test_sgd_hyperparameters_validated_with_torch_messages(kwargs, message):
    with pytest.raises(ValueError, match=message.replace(".", "[.]")):
        vk_adam.SGD([np.zeros(4, np.float32)], **kwargs)


def snapshot(opt, params):
    return [p.copy() for p in params], opt.state_dict()


def assert_unchanged(before, opt, params):
    old_params, old_sd = before
    for p, q in zip(params, old_params, strict=False):
        np.testing.assert_array_equal(p, q)
    sd = opt.state_dict()
    assert sd["param_groups"] == old_sd["param_groups"]
    assert sd["state"].keys() == old_sd["state"].keys()
    for i in sd["state"]:
        for k, v in sd["state"][i].items():
            np.testing.assert_array_equal(v, old_sd["state"][i][k])


def test_wrong_gradients_raise_and_change_nothing(rng):
    params = [rng.standard_normal((8, 4)).astype(np.float32), rng.standard_normal(5).astype(np.float32)]
    with vk_adam.AdamW(params, lr=1e-2) as opt:
        opt.step([random_grad(rng, (8, 4)), random_grad(rng, (5,))])
        before = snapshot(opt, params)
        with pytest.raises(ValueError, match="got 1 gradient"):
            opt.step([random_grad(rng, (8, 4))])
        assert_unchanged(before, opt, params)
        with pytest.raises(
            ValueError, match=r"grad for param 1 has shape \(6,\); the param has shape \(5,\)"
        ):
            opt.step([random_grad(rng, (8, 4)), random_grad(rng, (6,))])
        assert_unchanged(before, opt, params)
        with pytest.raises(ValueError, match=r"grad for param 0 has shape \(4, 8\)"):
            opt.step([random_grad(rng, (4, 8)), random_grad(rng, (5,))])
        assert_unchanged(before, opt, params)
        with pytest.raises(TypeError, match="dtype int64"):
            opt.step([np.ones((8, 4), np.int64), random_grad(rng, (5,))])
        assert_unchanged(before, opt, params)


def test_grad_dtype_rule_converts_float64_with_a_warning(rng):
    p = rng.standard_normal(16).astype(np.float32)
    q = p.copy()
    g = rng.standard_normal(16)
    with vk_adam.AdamW([p]) as a, vk_adam.AdamW([q]) as b:
        with pytest.warns(UserWarning, match="float64; converting to float32"):
            a.step([g])
        b.step([g.astype(np.float32)])
    np.testing.assert_array_equal(p, q)


def test_non_contiguous_grad_gives_the_contiguous_result(rng):
    p = rng.standard_normal((6, 5)).astype(np.float32)
    q = p.copy()
    g = rng.standard_normal((5, 6)).astype(np.float32).T  # non-contiguous view
    with vk_adam.Adam([p]) as a, vk_adam.Adam([q]) as b:
        a.step([g])
        b.step([np.ascontiguousarray(g)])
    np.testing.assert_array_equal(p, q)


@pytest.mark.parametrize(
    "param",
    [np.zeros(4, np.float64), np.zeros((4, 4), np.float32).T, np.zeros(4, np.int32)],
    ids=["float64", "non-contiguous", "int32"],
)
def test_params_must_be_float32_contiguous(param):
    with pytest.raises(TypeError, match="C-contiguous float32"):
        vk_adam.Adam([param])


def test_other_construction_errors():
    with pytest.raises(ValueError, match="empty parameter list"):
        vk_adam.Adam([])
    with pytest.raises(TypeError, match="list of arrays"):
        vk_adam.Adam(np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="unknown hyperparameter"):
        vk_adam.create("adam", [np.zeros(4, np.float32)], momentum=0.9)
    with pytest.raises(ValueError, match="unknown update rule 'nope'"):
        vk_adam.create("nope", [np.zeros(4, np.float32)])
    with pytest.raises(ValueError, match="Vulkan device index 99 out of range"):
        vk_adam.Adam([np.zeros(4, np.float32)], device=99)
    with pytest.raises(ValueError, match="no Vulkan device name contains"):
        vk_adam.Adam([np.zeros(4, np.float32)], device="no-such-gpu")


def test_closed_optimizer_refuses_work():
    p = np.ones(4, np.float32)
    opt = vk_adam.Adam([p])
    opt.close()
    opt.close()  # idempotent
    assert opt.closed
    with pytest.raises(vk_adam.OptimizerClosedError):
        opt.step([np.ones(4, np.float32)])


def test_invalid_hyperparameter_set_between_steps_is_rejected_before_work(rng):
    p = rng.standard_normal(8).astype(np.float32)
    with vk_adam.Adam([p]) as opt:
        opt.step([random_grad(rng, (8,))])
        before = snapshot(opt, [p])
        opt.param_groups[0]["lr"] = -1.0
        with pytest.raises(ValueError, match=r"Invalid learning rate: -1\.0"):
            opt.step([random_grad(rng, (8,))])
        opt.param_groups[0]["lr"] = 1e-3
        assert_unchanged(before, opt, [p])


def test_missing_spirv_is_an_actionable_error(tmp_path):
    from vk_adam._rules.spirv import load_spirv

    with pytest.raises(vk_adam.ShaderMissingError, match="glslang-tools"):
        load_spirv(tmp_path / "absent.spv")


def test_no_vulkan_device_is_an_actionable_error(monkeypatch):
    import vk_adam._runtime.devices as device

    class BrokenKp:
        class Manager:
            def __init__(self, *args):
                raise RuntimeError("vkCreateInstance failed")

    monkeypatch.setattr(device, "kp_module", lambda: BrokenKp)
    device.list_devices.cache_clear()
    try:
        with pytest.raises(vk_adam.NoVulkanDeviceError, match="mesa-vulkan-drivers"):
            device.list_devices()
    finally:
        device.list_devices.cache_clear()


def test_load_state_dict_rejects_mismatch_and_keeps_state(rng):
    p = rng.standard_normal((3, 3)).astype(np.float32)
    with vk_adam.Adam([p]) as opt:
        opt.step([random_grad(rng, (3, 3))])
        good = opt.state_dict()
        before = snapshot(opt, [p])
        bad = {
            "state": {0: {**good["state"][0], "exp_avg": np.zeros(5, np.float32)}},
            "param_groups": good["param_groups"],
        }
        with pytest.raises(ValueError, match="has 5 elements"):
            opt.load_state_dict(bad)
        assert_unchanged(before, opt, [p])
        amsgrad = {"state": good["state"], "param_groups": [{**good["param_groups"][0], "amsgrad": True}]}
        with pytest.raises(ValueError, match="different shader options"):
            opt.load_state_dict(amsgrad)
        assert_unchanged(before, opt, [p])
        with pytest.raises(ValueError, match="2 param group"):
            opt.load_state_dict({"state": {}, "param_groups": good["param_groups"] * 2})
        assert_unchanged(before, opt, [p])


def test_step_without_grads_on_numpy_params_is_refused_unless_the_buffer_was_taken(rng):
    """A step without grads on NumPy params would read a gradient buffer nobody wrote (zeros:
    weight decay moves the params anyway); the refusal says what to do, and changes nothing."""
    p = rng.standard_normal(32).astype(np.float32)
    before = p.copy()
    with vk_adam.AdamW([p], lr=0.1) as opt:
        for call in (lambda: opt.step(), lambda: opt.step(wait=False)):
            with pytest.raises(
                ValueError,
                match=r"pass the gradients, step\(grads\), or write them into opt.grad_buffer\(0\)",
            ):
                call()
        np.testing.assert_array_equal(p, before)
        assert opt.param_groups[0] and opt.state_dict()["state"] == {}
        opt.grad_buffer()  # the application may now have written it on the device
        opt.step()
        assert not np.array_equal(p, before)  # weight decay: the step ran
    q = rng.standard_normal(32).astype(np.float32)
    with vk_adam.SGD([q], lr=0.1, zero_grad=False) as opt:
        with pytest.raises(ValueError, match="without grads on NumPy params"):
            opt.step()
        g = random_grad(rng, (32,))
        opt.step([g])
        after_one = q.copy()
        opt.step()  # zero_grad=False: the first step's gradients are still on the device
        np.testing.assert_allclose(q, after_one - 0.1 * g, rtol=1e-6, atol=1e-7)
