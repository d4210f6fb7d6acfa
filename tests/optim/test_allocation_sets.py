"""NumPy groups larger than one device allocation (``maxMemoryAllocationSize``): their params
spread over several buffer sets, each within one allocation (``layout.plan_sets``). The step of
such a group must equal the one-set step bit for bit, on every path (host imports, staging,
asynchronous steps), in the storage formats, and through the state dict; a param larger than one
allocation is refused before anything changes.

``VK_ADAM_MAX_ALLOCATION_BYTES`` lowers the device's limit so that small groups take the path
that groups past 4 GiB take on an NVIDIA GPU."""

from __future__ import annotations

import itertools
import os

import ml_dtypes
import numpy as np
import pytest

import vk_adam
from vk_adam import DeviceCapabilityError
from vk_adam._optim.layout import ALIGN_ELEMENTS, align, plan_sets
from vk_adam._runtime import MAX_ALLOCATION_BYTES_ENV

from ..conftest import random_grad, scale_error

#: 256 KiB allocations: 65,536 float32 elements per buffer set. The params are large enough for
#: host imports (``MIN_IMPORT_BYTES``), so the import path runs too.
SMALL = 1 << 18
SHAPES = [(20000,), (120, 250), (40000,), (7,), (60000,), (90, 90)]
DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}


def _params(rng, dtype=np.float32):
    return [(rng.standard_normal(s) * 0.5).astype(dtype) for s in SHAPES]


def _run(monkeypatch, limit, seed, steps=3, dtype=np.float32, wait=True, **options):
    """Params after ``steps`` AdamW steps, the state dict, and how many buffer sets the group had."""
    if limit is None:
        monkeypatch.delenv(MAX_ALLOCATION_BYTES_ENV, raising=False)
    else:
        monkeypatch.setenv(MAX_ALLOCATION_BYTES_ENV, str(limit))
    rng = np.random.default_rng(seed)
    params = _params(rng, dtype)
    with vk_adam.AdamW(params, lr=1e-2, weight_decay=0.01, **options) as opt:
        sets = len(opt._groups[0].sets)
        for _ in range(steps):
            handle = opt.step([random_grad(rng, p.shape).astype(dtype) for p in params], wait=wait)
            if handle is not None:
                handle.wait()
        imports = len(opt._dev.traffic.imports)
        state = opt.state_dict()
    if wait and os.environ.get("VK_ADAM_HOST_IMPORT") == "1" and dtype == np.float32:
        assert imports > 0  # the params went through host imports
    return [p.copy() for p in params], state, sets


def _same(a, b):
    (pa, sa, _), (pb, sb, _) = a, b
    for x, y in zip(pa, pb, strict=True):
        assert np.array_equal(x.view(np.uint8), y.view(np.uint8))
    assert sa["state"].keys() == sb["state"].keys()
    for i, entry in sa["state"].items():
        for key, value in entry.items():
            other = sb["state"][i][key]
            if isinstance(value, np.ndarray):
                assert np.array_equal(value.view(np.uint8), other.view(np.uint8)), (i, key)
            else:
                assert value == other


def test_plan_sets_packs_params_in_order_within_the_capacity():
    params = [np.empty(s, np.float32) for s in SHAPES]
    slots, totals = plan_sets(params, 65536)
    assert len(totals) > 1 and all(0 < t <= 65536 for t in totals)
    for slot, p in zip(slots, params, strict=True):
        assert slot.offset % ALIGN_ELEMENTS == 0 and slot.offset + align(p.size) <= totals[slot.buffer_set]
    assert [s.buffer_set for s in slots] == sorted(s.buffer_set for s in slots)  # in order
    # slots of one set never overlap
    for k in range(len(totals)):
        spans = sorted((s.offset, s.offset + s.size) for s in slots if s.buffer_set == k)
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    one, [total] = plan_sets(params, 10**9)
    assert {s.buffer_set for s in one} == {0} and total == sum(align(p.size) for p in params)


@pytest.mark.parametrize("host_import", ["1", "0"])
@pytest.mark.parametrize("wait", [True, False])
def test_several_sets_step_like_one_bit_for_bit(monkeypatch, rng, host_import, wait):
    monkeypatch.setenv("VK_ADAM_HOST_IMPORT", host_import)
    seed = int(rng.integers(2**32))
    whole = _run(monkeypatch, None, seed, wait=wait)
    split = _run(monkeypatch, SMALL, seed, wait=wait)
    assert whole[2] == 1 and split[2] >= 3  # the small limit really spread the group
    _same(whole, split)


@pytest.mark.parametrize(
    "param_dtype,state_dtype",
    [("float32", "int8-blockwise"), ("bfloat16", "float32"), ("bfloat16", "int8-blockwise")],
)
def test_several_sets_in_storage_formats(monkeypatch, rng, param_dtype, state_dtype):
    """16-bit params with a float32 master copy and 8-bit state: the same bits as one set (each
    param starts on a block, so no block's scale changes with the split)."""
    seed = int(rng.integers(2**32))
    options = dict(dtype=DTYPES[param_dtype], state_dtype=state_dtype, stochastic_rounding=False)
    whole = _run(monkeypatch, None, seed, **options)
    split = _run(monkeypatch, SMALL, seed, **options)
    assert split[2] >= 2
    _same(whole, split)


def test_several_sets_against_the_float64_reference(monkeypatch, rng):
    monkeypatch.setenv(MAX_ALLOCATION_BYTES_ENV, str(SMALL))
    params = _params(rng)
    ref = [p.astype(np.float64) for p in params]
    m = [np.zeros_like(r) for r in ref]
    v = [np.zeros_like(r) for r in ref]
    lr, (b1, b2), eps, wd = 1e-2, (0.9, 0.999), 1e-8, 0.01
    with vk_adam.AdamW(params, lr=lr, weight_decay=wd) as opt:
        assert len(opt._groups[0].sets) >= 3
        for t in range(1, 6):
            grads = [random_grad(rng, p.shape) for p in params]
            opt.step(grads)
            for i, g in enumerate(grads):
                ref[i] *= 1 - lr * wd
                m[i] = b1 * m[i] + (1 - b1) * g
                v[i] = b2 * v[i] + (1 - b2) * g.astype(np.float64) ** 2
                ref[i] -= lr * (m[i] / (1 - b1**t)) / (np.sqrt(v[i] / (1 - b2**t)) + eps)
            for p, r in zip(params, ref, strict=True):
                assert scale_error(p, r) <= 2e-6, t


def test_a_state_dict_moves_between_one_set_and_several(monkeypatch, rng):
    seed = int(rng.integers(2**32))
    _, saved, _ = _run(monkeypatch, SMALL, seed, steps=2)
    continued = []
    for limit in (None, SMALL):
        if limit is None:
            monkeypatch.delenv(MAX_ALLOCATION_BYTES_ENV, raising=False)
        else:
            monkeypatch.setenv(MAX_ALLOCATION_BYTES_ENV, str(limit))
        r = np.random.default_rng(seed + 1)
        params = _params(r)
        with vk_adam.AdamW(params, lr=1e-2, weight_decay=0.01) as opt:
            opt.load_state_dict(saved)
            opt.step([random_grad(r, p.shape) for p in params])
            continued.append(([p.copy() for p in params], opt.state_dict(), 0))
    _same(*continued)


def test_a_param_larger_than_one_allocation_is_refused_before_anything_changes(monkeypatch, rng):
    monkeypatch.setenv(MAX_ALLOCATION_BYTES_ENV, str(SMALL))
    big = rng.standard_normal(70000).astype(np.float32)
    before = big.copy()
    message = r"param 1 holds 70000 elements, more than one of the device's"
    with pytest.raises(DeviceCapabilityError, match=message):
        vk_adam.AdamW([rng.standard_normal(10).astype(np.float32), big], lr=1e-2)
    assert np.array_equal(big, before)
    with pytest.raises(ValueError, match=r"maxMemoryAllocationSize.*split it"):
        vk_adam.Adam([big])
