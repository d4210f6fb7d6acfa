"""``device_params=True``: the device holds a NumPy group's params and each step copies them into
the arrays (a gradient goes up, a param comes down). Its steps must equal the default mode's bit
for bit on every path (host imports, staging, asynchronous steps, storage formats, several
buffer sets), and a write into an array between steps is read only after ``reload_params()``."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import vk_adam

from ..conftest import limit_allocations, random_grad
from .test_host_import import _aligned

SHAPES = [(40000,), (100, 300), (17,)]


def _params(rng, dtype=np.float32):
    return [(rng.standard_normal(s) * 0.5).astype(dtype) for s in SHAPES]


def _run(seed, device_params, steps=3, wait=True, dtype=np.float32, edit=None, **options):
    """The params after ``steps`` AdamW steps (``edit(params, opt)`` runs after the first)."""
    rng = np.random.default_rng(seed)
    params = _params(rng, dtype)
    with vk_adam.AdamW(params, lr=1e-2, weight_decay=0.01, device_params=device_params, **options) as opt:
        for t in range(steps):
            handle = opt.step([random_grad(rng, p.shape).astype(dtype) for p in params], wait=wait)
            if handle is not None:
                handle.wait()
            if t == 0 and edit is not None:
                edit(params, opt)
        state = opt.state_dict()
    return [p.copy() for p in params], state


def _same(a, b):
    for x, y in zip(a[0], b[0], strict=True):
        assert np.array_equal(x.view(np.uint8), y.view(np.uint8))
    for i, entry in a[1]["state"].items():
        for key, value in entry.items():
            if isinstance(value, np.ndarray):
                assert np.array_equal(value, b[1]["state"][i][key]), (i, key)


@pytest.mark.parametrize("host_import", ["1", "0"])
@pytest.mark.parametrize("wait", [True, False])
def test_device_params_step_like_the_default_bit_for_bit(monkeypatch, rng, host_import, wait):
    monkeypatch.setenv("VK_ADAM_HOST_IMPORT", host_import)
    seed = int(rng.integers(2**32))
    _same(_run(seed, False, wait=wait), _run(seed, True, wait=wait))


def test_device_params_in_storage_formats_and_several_buffer_sets(monkeypatch, rng):
    seed = int(rng.integers(2**32))
    options = dict(dtype=ml_dtypes.bfloat16, state_dtype="int8-blockwise")
    _same(_run(seed, False, **options), _run(seed, True, **options))
    limit_allocations(monkeypatch, 1 << 18)  # 65,536 float32 per set: 2 sets
    _same(_run(seed, False), _run(seed, True))
    limit_allocations(monkeypatch, 1 << 17)  # 32,768 per set: param 0 in 2 pieces
    _same(_run(seed, False), _run(seed, True))
    _same(_run(seed, False, wait=False), _run(seed, True, wait=False))


def test_a_single_param_group_takes_the_copy_path_not_the_bound_import(rng):
    """The default mode binds a lone float32 param's import in the shader; with the device
    holding the param, the update runs on the device's copy and the array receives a copy."""
    seed = int(rng.integers(2**32))
    r = np.random.default_rng(seed)
    p = r.standard_normal(1 << 16).astype(np.float32)
    q = p.copy()
    grads = [random_grad(r, p.shape) for _ in range(3)]
    with vk_adam.Adam([p], lr=1e-2) as default, vk_adam.Adam([q], lr=1e-2, device_params=True) as held:
        for g in grads:
            default.step([g])
            held.step([g])
        assert np.array_equal(p, q)
        assert not held._dev.to_device.used_direct
        # the flat device buffer is current without a refresh: it is where the param lives
        flat = held.param_buffer()
        assert flat is held._groups[0].sets[0].param


def _write_ones(params, opt):
    params[0][:100] = 1.0


def _write_ones_and_reload(params, opt):
    params[0][:100] = 1.0
    opt.reload_params()


def test_a_write_between_steps_is_read_only_after_reload_params(rng):
    seed = int(rng.integers(2**32))
    default = _run(seed, False, edit=_write_ones)  # the array is the one true copy: read
    ignored = _run(seed, True, edit=_write_ones)  # the device's copy wins
    untouched = _run(seed, True)
    reloaded = _run(seed, True, edit=_write_ones_and_reload)
    _same(ignored, untouched)
    _same(reloaded, default)
    assert not np.array_equal(default[0][0], untouched[0][0])  # the write did matter


def test_device_params_must_be_a_bool(rng):
    p = rng.standard_normal(8).astype(np.float32)
    with pytest.raises(TypeError, match=r"device_params must be True or False \(got 'yes'\)"):
        vk_adam.Adam([p], device_params="yes")


@pytest.mark.parametrize("skip_nonfinite", [False, True])
def test_reused_gradients_are_read_where_they_lie_and_never_zeroed(monkeypatch, rng, skip_nonfinite):
    """A training loop that rewrites one gradient array: from its second step the update binds
    the gradient's import and the param's (the NumPy array, or with device_params the device's
    copy read and the array written), with no copy; results equal the staging path's bit for
    bit, and the application's gradient array is left as it was (zero_grad zeroes vk-adam's
    gradient buffers, never an application's array)."""
    seed = int(rng.integers(2**32))
    results = {}
    for label, device_params, host_import in [
        ("staging", False, "0"),
        ("default", False, "1"),
        ("held", True, "1"),
    ]:
        monkeypatch.setenv("VK_ADAM_HOST_IMPORT", host_import)
        r = np.random.default_rng(seed)
        p = _aligned(r.standard_normal(1 << 16).astype(np.float32))  # a shader can bind its import
        g = _aligned(np.zeros_like(p))
        with vk_adam.AdamW(
            [p], lr=1e-2, weight_decay=0.01, device_params=device_params, skip_nonfinite=skip_nonfinite
        ) as opt:
            for _ in range(4):
                g[:] = random_grad(r, p.shape)
                before = g.copy()
                opt.step([g])
                assert np.array_equal(g, before)  # the application's gradient is not zeroed
            bset = opt._groups[0].sets[0]
            if host_import == "1" and opt._dev.to_device.imports.enabled:
                assert bset.bound_param is not bset.param  # the param's import is bound
                grad_bound = bset.bound_grad is not bset.grad
                assert grad_bound == (not skip_nonfinite)  # a pre-pass needs the gradient on the device
            results[label] = ([p.copy()], opt.state_dict())
    for label in ("default", "held"):
        _same(results["staging"], results[label])
