"""Each device limit vk-adam depends on, lowered one at a time: what still runs gives the same
results, and what cannot run is refused when the optimizer is made, by a
``vk_adam.DeviceCapabilityError`` that names the Vulkan limit and the device's value, with nothing
changed.

The lower limits come from an application's ``kp.Manager`` whose ``get_device_properties()``
reports them (vk-adam reads every limit from there); the device underneath is lavapipe, and
``scripts/test-profiles.sh`` runs the suite on whole simulated device classes as well.
"""

from __future__ import annotations

import numpy as np
import pytest

import vk_adam
from vk_adam._optim.variants import SUBGROUPS_ENV
from vk_adam._runtime._kp import kp_module

from ..conftest import random_grad


def limited_manager(**limits):
    """A kp.Manager on the default device whose properties report ``limits`` instead."""
    kp = kp_module()

    class Limited(kp.Manager):
        def get_device_properties(self):
            props = dict(super().get_device_properties())
            props.update(limits)
            return props

    return Limited()


def _step(manager, rng_seed, steps=3, n=20_000, **options):
    kp = kp_module()
    rng = np.random.default_rng(rng_seed)
    param = manager.tensor(rng.standard_normal(n).astype(np.float32))
    manager.sequence().eval(kp.OpTensorSyncDevice([param]))
    try:
        with vk_adam.AdamW([param], lr=1e-2, manager=manager, **options) as opt:
            for _ in range(steps):
                opt.step([random_grad(rng, (n,))])
        manager.sequence().eval(kp.OpTensorSyncLocal([param]))
        return param.data().copy()
    finally:
        param.destroy()


@pytest.fixture
def seed(rng):
    return int(rng.integers(2**32))


def test_a_device_of_128_invocations_runs_128_wide_workgroups_with_the_same_results(seed):
    plain = limited_manager()
    narrow = limited_manager(max_work_group_invocations=128, max_work_group_size=(128, 128, 64))
    try:
        assert np.array_equal(_step(plain, seed), _step(narrow, seed))
        # the non-finite pre-pass runs at the narrow width too; the step is the same
        assert np.array_equal(
            _step(plain, seed, skip_nonfinite=True), _step(narrow, seed, skip_nonfinite=True)
        )
        with vk_adam.AdamW([np.zeros(8, np.float32)], manager=narrow) as opt:
            assert opt._rt.facts.threads == 128 and opt._dev.shape.workgroup_size == 128
    finally:
        plain.destroy()
        narrow.destroy()


def test_8bit_state_on_a_128_wide_device_without_subgroups_is_refused_by_name(monkeypatch):
    monkeypatch.setenv(SUBGROUPS_ENV, "0")  # the base variant: its shared block maxima need 256
    narrow = limited_manager(max_work_group_invocations=128, max_work_group_size=(128, 128, 64))
    try:
        param = narrow.tensor(np.ones(8192, np.float32))
        narrow.sequence().eval(kp_module().OpTensorSyncDevice([param]))
        with pytest.raises(
            vk_adam.DeviceCapabilityError, match=r"allows 128 invocations .*maxComputeWorkGroupInvocations"
        ):
            vk_adam.AdamW([param], manager=narrow, state_dtype="int8-blockwise")
        narrow.sequence().eval(kp_module().OpTensorSyncLocal([param]))
        assert np.all(param.data() == 1.0)  # nothing changed
        param.destroy()
    finally:
        narrow.destroy()


def test_too_few_storage_buffers_per_pipeline_is_refused_by_name():
    spec_minimum = limited_manager(
        max_per_stage_descriptor_storage_buffers=4, max_descriptor_set_storage_buffers=24
    )
    try:
        p = np.ones(64, np.float32)
        with pytest.raises(
            vk_adam.DeviceCapabilityError, match=r"rule 'adamw' binds 9 storage buffers.*: 4\); .*no rule can"
        ):
            vk_adam.AdamW([p], manager=spec_minimum)  # Adam's harness binds 5 + 2 * 2
        assert np.all(p == 1.0)
    finally:
        spec_minimum.destroy()


def test_a_param_past_max_memory_allocation_size_steps_in_pieces(seed):
    """The device's own ``maxMemoryAllocationSize`` (64 KiB, simulated) is read: a 128 KiB array
    is cut into two pieces of one allocation each, and steps as on a device without the limit."""
    small, plain = limited_manager(max_memory_allocation_size=1 << 16), limited_manager()
    try:
        rng = np.random.default_rng(seed)
        p = rng.standard_normal(1 << 15).astype(np.float32)
        q, before = p.copy(), p.copy()
        grads = [rng.standard_normal(1 << 15).astype(np.float32) for _ in range(2)]
        with vk_adam.AdamW([p], manager=small) as pieces, vk_adam.AdamW([q], manager=plain) as whole:
            assert [len(o._groups[0].sets) for o in (pieces, whole)] == [2, 1]
            for g in grads:
                pieces.step([g])
                whole.step([g])
        assert p.tobytes() == q.tobytes() and not np.array_equal(p, before)
    finally:
        small.destroy()
        plain.destroy()


def test_a_storage_buffer_range_smaller_than_one_chunk_is_refused_by_name():
    tiny = limited_manager(max_storage_buffer_range=4096, min_storage_buffer_offset_alignment=256)
    try:
        p = np.ones(1 << 16, np.float32)
        with pytest.raises(vk_adam.DeviceCapabilityError, match=r"maxStorageBufferRange \(4096 bytes\)"):
            vk_adam.AdamW([p], manager=tiny)
        assert np.all(p == 1.0)
    finally:
        tiny.destroy()


def test_a_smaller_storage_buffer_range_binds_windows_with_the_same_results(seed):
    plain = limited_manager()
    windowed = limited_manager(max_storage_buffer_range=1 << 16, min_storage_buffer_offset_alignment=64)
    try:
        assert np.array_equal(_step(plain, seed), _step(windowed, seed))
    finally:
        plain.destroy()
        windowed.destroy()
