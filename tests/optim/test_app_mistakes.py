"""What a Vulkan-native application gets wrong first, planted one by one: each mistake that
used to go silent now warns or is refused, by name, before anything changes.

1. Kompute's habit of uploading the params from the host every iteration (a lost update);
2. a sequence holding ``record_step`` evaluated again (a replayed step);
3. buffers and sequences of another ``kp.Manager`` (another VkDevice).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import vk_adam
from vk_adam._runtime import kp_features
from vk_adam._runtime._kp import kp_module

from ..conftest import random_grad

needs_patch = pytest.mark.skipif(
    "upload counter" not in kp_features().patches, reason="needs vk-adam's kp (upload counter, eval once)"
)


def _adam_reference(p, grads, lr):
    p = p.astype(np.float64)
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        g = g.astype(np.float64)
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        p = p - lr / (1 - 0.9**t) * m / (np.sqrt(v) / np.sqrt(1 - 0.999**t) + 1e-8)
    return p


@pytest.fixture
def kp():
    return kp_module()


@needs_patch
def test_uploading_a_param_between_steps_warns_once_naming_it(kp_manager, kp, rng):
    w = kp_manager.tensor(rng.standard_normal(64).astype(np.float32))
    upload = kp_manager.sequence()
    upload.record(kp.OpTensorSyncDevice([w]))  # Kompute's example: recorded once, evaluated each iteration
    upload.eval()
    with vk_adam.Adam([w], lr=1e-2, manager=kp_manager) as opt:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            opt.step([random_grad(rng, (64,))])  # the first upload, before any step, is fine
        upload.eval()  # the app's loop uploads again: step 1's update is overwritten
        with pytest.warns(vk_adam.LostUpdateWarning, match=r"param 0 .*uploaded .*1 time\(s\) since step 1"):
            opt.step([random_grad(rng, (64,))])
        upload.eval()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # once per param: not again
            opt.step([random_grad(rng, (64,))])
    w.destroy()


@needs_patch
def test_the_documented_kompute_loop_trains_without_a_warning(kp_manager, kp, rng):
    """docs/usage.md's loop: upload once, then each iteration the app's gradient work, the
    optimizer's step, and a download to read the params; matches a float64 Adam."""
    start = rng.standard_normal(256).astype(np.float32)
    w = kp_manager.tensor(start.copy())
    g = kp_manager.tensor(np.zeros(256, np.float32))
    kp_manager.sequence().eval(kp.OpTensorSyncDevice([w, g]))
    grads = [random_grad(rng, (256,)) for _ in range(5)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with vk_adam.Adam([w], lr=1e-2, manager=kp_manager) as opt:
            read = kp_manager.sequence()
            read.record(kp.OpTensorSyncLocal([w]))
            for grad in grads:
                g.data()[:] = grad  # stands in for the app's gradient shader
                kp_manager.sequence().eval(kp.OpTensorSyncDevice([g]))
                opt.step([g])
                read.eval()
            got = w.data().copy()
    expected = _adam_reference(start, grads, 1e-2)
    assert np.max(np.abs(got - expected)) <= 1e-5 * np.max(np.abs(expected))
    w.destroy()
    g.destroy()


@needs_patch
def test_a_recorded_step_evaluated_again_is_refused_and_runs_nothing(kp_manager, kp, rng):
    w = kp_manager.tensor(rng.standard_normal(32).astype(np.float32))
    g = kp_manager.tensor(random_grad(rng, (32,)))
    kp_manager.sequence().eval(kp.OpTensorSyncDevice([w, g]))
    with vk_adam.Adam([w], lr=1e-2, manager=kp_manager) as opt:
        seq = kp_manager.sequence()
        assert opt.record_step(seq, [g]) == 1
        seq.eval()
        kp_manager.sequence().eval(kp.OpTensorSyncLocal([w]))
        after_one = w.data().copy()
        with pytest.raises(
            RuntimeError, match=r"step 1 .*record_step\(\).* Record a new step for each evaluation"
        ):
            seq.eval()
        kp_manager.sequence().eval(kp.OpTensorSyncLocal([w]))
        assert np.array_equal(w.data(), after_one)  # the refused evaluation ran nothing
        assert opt.state_dict()["state"][0]["step"] == 1
        seq.clear()  # recorded again, it runs again: the documented loop
        assert opt.record_step(seq, [g]) == 2
        seq.eval()
        assert opt.state_dict()["state"][0]["step"] == 2
    for t in (w, g):
        t.destroy()


@needs_patch
def test_buffers_and_sequences_of_another_device_are_refused_by_name(kp_manager, kp, rng):
    other = kp.Manager()
    try:
        w = kp_manager.tensor(rng.standard_normal(16).astype(np.float32))
        foreign_w = other.tensor(rng.standard_normal(16).astype(np.float32))
        foreign_g = other.tensor(random_grad(rng, (16,)))
        kp_manager.sequence().eval(kp.OpTensorSyncDevice([w]))
        other.sequence().eval(kp.OpTensorSyncDevice([foreign_w, foreign_g]))
        # a param whose manager= is not its own
        with pytest.raises(ValueError, match=r"kp tensor param 0 belongs to another Vulkan device"):
            vk_adam.Adam([foreign_w], lr=1e-2, manager=kp_manager)
        with vk_adam.Adam([w], lr=1e-2, manager=kp_manager) as opt:
            kp_manager.sequence().eval(kp.OpTensorSyncLocal([w]))
            before = w.data().copy()
            with pytest.raises(ValueError, match=r"grad 0 is a kp tensor of another Vulkan device"):
                opt.step([foreign_g])
            with pytest.raises(ValueError, match=r"the sequence belongs to another Vulkan device"):
                opt.record_step(other.sequence())
            kp_manager.sequence().eval(kp.OpTensorSyncLocal([w]))
            assert np.array_equal(w.data(), before)  # nothing was recorded or run
            assert opt.state_dict()["state"] == {}  # no step counted
        for t in (w, foreign_w, foreign_g):
            t.destroy()
    finally:
        other.destroy()
