"""The flat-buffer layout and the argument checks: pure NumPy, no Vulkan device needed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vk_adam._optim.groups import prepare_grads
from vk_adam._optim.host.to_device import gather
from vk_adam._optim.host.to_host import scatter
from vk_adam._optim.layout import ALIGN_ELEMENTS, ParamSlot, align, plan_flat
from vk_adam._optim.params import normalize_groups


def test_align_rounds_up_to_whole_256_byte_blocks():
    assert [align(n) for n in (1, 63, 64, 65, 128)] == [64, 64, 64, 128, 128]
    assert ALIGN_ELEMENTS * 4 == 256


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(1, 40), min_size=1, max_size=3), min_size=1, max_size=12))
def test_slots_are_aligned_disjoint_and_round_trip(shapes):
    params = [np.random.default_rng(i).standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)]
    slots, total = plan_flat(params, limit=1 << 30)
    assert total == sum(align(p.size) for p in params)
    end = 0
    for slot, p in zip(slots, params, strict=True):
        assert slot.offset % ALIGN_ELEMENTS == 0 and slot.offset >= end
        assert (slot.size, slot.shape, slot.host is p) == (p.size, p.shape, True)
        end = slot.offset + slot.size
    flat = np.full(total, np.nan, np.float32)
    gather(slots, params, flat)
    copies = [p.copy() for p in params]
    for p in params:
        p[...] = 0
    scatter(slots, flat)
    for p, c in zip(params, copies, strict=True):
        np.testing.assert_array_equal(p, c)
    # the padding between params is never written
    covered = np.zeros(total, bool)
    for s in slots:
        covered[s.offset : s.offset + s.size] = True
    assert np.isnan(flat[~covered]).all()


def test_a_group_over_the_buffer_limit_is_refused():
    with pytest.raises(ValueError, match="holds 128 elements; at most 100"):
        plan_flat([np.zeros(60, np.float32), np.zeros(10, np.float32)], limit=100)


def test_groups_get_defaults_and_params_are_checked():
    a, b = np.zeros(3, np.float32), np.zeros((2, 2), np.float32)
    groups = normalize_groups([{"params": [a]}, {"params": b, "lr": 0.5}], {"lr": 0.1, "eps": 1e-8})
    assert [g["lr"] for g in groups] == [0.1, 0.5] and groups[1]["params"][0] is b
    with pytest.raises(ValueError, match="appears in more than one place"):
        normalize_groups([a, a], {})
    with pytest.raises(TypeError, match="writeable, C-contiguous float32"):
        normalize_groups([np.zeros(3)], {})
    with pytest.raises(ValueError, match="empty parameter list"):
        normalize_groups([], {})


class _Shape:
    def __init__(self, shapes, host_mode=True):
        self.slots = [ParamSlot(0, 0, int(np.prod(s)), s, None) for s in shapes]
        self.host_mode = host_mode
        self.param_dtype = "float32"


def test_gradients_are_checked_before_anything_is_written():
    groups = [_Shape([(3,), (2, 2)])]
    out = prepare_grads([np.ones(3, np.float32), np.ones((2, 2), np.float32)], groups)
    assert out is not None and [g.shape for g in out[0]] == [(3,), (2, 2)]
    with pytest.raises(ValueError, match="got 1 gradient"):
        prepare_grads([np.ones(3, np.float32)], groups)
    with pytest.raises(ValueError, match="grad for param 1 has shape"):
        prepare_grads([np.ones(3, np.float32), np.ones(4, np.float32)], groups)
    with pytest.raises(TypeError, match="grad for param 0 has dtype int64"):
        prepare_grads([np.ones(3, np.int64), np.ones((2, 2), np.float32)], groups)
    with pytest.warns(UserWarning, match="converting to float32"):
        out = prepare_grads([np.ones(3, np.float64), np.ones((2, 2), np.float32)], groups)
    assert out is not None and out[0][0].dtype == np.float32
