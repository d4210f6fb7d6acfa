"""vk-adam's warnings name the application's line, the call that led to them, not a line inside
the library, whichever path the call took (step, record_step, a LoRA update)."""

from __future__ import annotations

import warnings

import numpy as np

import vk_adam
from vk_adam._runtime._kp import kp_module

from ..runtime.test_device_buffers import upload


def _caught(call) -> list[warnings.WarningMessage]:  # type: ignore[no-untyped-def]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return caught


def test_a_lost_update_warning_names_the_callers_line(rng, kp_manager):
    mgr, kp = kp_manager, kp_module()
    w = mgr.tensor(rng.standard_normal(16).astype(np.float32))
    g = mgr.tensor(rng.standard_normal(16).astype(np.float32))
    upload(mgr, w, w.data().copy())
    upload(mgr, g, g.data().copy())
    for recorded in (False, True):  # a param warns once per optimizer: one of each
        with vk_adam.Adam([w], manager=mgr) as opt:
            opt.step([g])
            mgr.sequence().eval(kp.OpTensorSyncDevice([w]))  # the application's stale upload
            if recorded:
                caught = _caught(lambda: opt.record_step(mgr.sequence(), [g]))
            else:
                caught = _caught(lambda: opt.step([g]))
            (lost,) = [c for c in caught if c.category is vk_adam.LostUpdateWarning]
            assert lost.filename == __file__
    for t in (w, g):
        t.destroy()


def test_a_converted_gradient_warning_names_the_callers_line():
    with vk_adam.AdamW([np.zeros(4, np.float32)]) as opt:
        (caught,) = _caught(lambda: opt.step([np.zeros(4, np.float64)]))
    assert "converting to float32" in str(caught.message) and caught.filename == __file__
