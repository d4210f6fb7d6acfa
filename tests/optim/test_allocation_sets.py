"""NumPy groups larger than one device allocation (``maxMemoryAllocationSize``): their params
spread over several buffer sets, each within one allocation (``layout.plan_sets``), and a param
larger than one allocation is cut into pieces, one per set. The step of such a group must equal
the one-set step bit for bit, on every path (host imports, staging, asynchronous steps, the
device holding the params), in the storage formats, and through the state dict.

``limit_allocations`` (tests/conftest.py) lowers the device's limit so that small groups take
the path that groups past 4 GiB take on an NVIDIA GPU."""

from __future__ import annotations

import itertools
import os

import ml_dtypes
import numpy as np
import pytest

import vk_adam
from vk_adam._optim.layout import ALIGN_ELEMENTS, align, plan_sets

from ..conftest import limit_allocations, random_grad, scale_error

#: 256 KiB allocations: 65,536 float32 elements per buffer set. The params are large enough for
#: host imports (``MIN_IMPORT_BYTES``), so the import path runs too.
SMALL = 1 << 18
#: With 8-bit state, allocations of 1 MiB and params four times longer (the same sets): the
#: quantization tables take 514 KiB (any conformant device allocates 1 GiB at once).
INT8_SCALE = 4
SHAPES = [(20000,), (120, 250), (40000,), (7,), (60000,), (90, 90)]
#: With a param of 150,000 elements: three pieces of at most 65,536 float32 (or 131,072 bf16
#: with bf16 state and no master copy), the last sharing its set with the params after it.
SPLIT_SHAPES = [(20000,), (300, 500), (7,), (90, 90)]
DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}


def _params(rng, dtype=np.float32, shapes=SHAPES):
    return [(rng.standard_normal(s) * 0.5).astype(dtype) for s in shapes]


def _limit_and_shapes(state_dtype, shapes):
    """The allocation limit and the shapes for ``state_dtype``: ``SMALL`` and ``shapes``, or with
    8-bit state both ``INT8_SCALE`` times larger (each shape's first dimension)."""
    if state_dtype != "int8-blockwise":
        return SMALL, shapes
    return SMALL * INT8_SCALE, [(s[0] * INT8_SCALE, *s[1:]) for s in shapes]


def _run(monkeypatch, limit, seed, steps=3, dtype=np.float32, wait=True, shapes=SHAPES, **options):
    """Params after ``steps`` AdamW steps, the state dict, and how many buffer sets the group had."""
    limit_allocations(monkeypatch, limit)
    rng = np.random.default_rng(seed)
    params = _params(rng, dtype, shapes)
    with vk_adam.AdamW(params, lr=1e-2, weight_decay=0.01, **options) as opt:
        sets = len(opt._groups[0].sets)
        for _ in range(steps):
            handle = opt.step([random_grad(rng, p.shape).astype(dtype) for p in params], wait=wait)
            if handle is not None:
                handle.wait()
        imports = len(opt._dev.to_device.imports)
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


@pytest.mark.parametrize("shapes", [SHAPES, SPLIT_SHAPES], ids=["whole-params", "a-param-in-pieces"])
@pytest.mark.parametrize("host_import", ["1", "0"])
@pytest.mark.parametrize("wait", [True, False])
def test_several_sets_step_like_one_bit_for_bit(monkeypatch, rng, host_import, wait, shapes):
    monkeypatch.setenv("VK_ADAM_HOST_IMPORT", host_import)
    seed = int(rng.integers(2**32))
    whole = _run(monkeypatch, None, seed, wait=wait, shapes=shapes)
    split = _run(monkeypatch, SMALL, seed, wait=wait, shapes=shapes)
    assert whole[2] == 1 and split[2] >= 3  # the small limit really spread the group
    _same(whole, split)


@pytest.mark.parametrize(
    "param_dtype,state_dtype",
    [("float32", "int8-blockwise"), ("bfloat16", "float32"), ("bfloat16", "int8-blockwise")],
)
@pytest.mark.parametrize("shapes", [SHAPES, SPLIT_SHAPES], ids=["whole-params", "a-param-in-pieces"])
def test_several_sets_in_storage_formats(monkeypatch, rng, param_dtype, state_dtype, shapes):
    """16-bit params with a float32 master copy and 8-bit state: the same bits as one set (each
    param, and each piece of one, starts on a block, so no block's scale changes with the split)."""
    seed = int(rng.integers(2**32))
    options = dict(dtype=DTYPES[param_dtype], state_dtype=state_dtype, stochastic_rounding=False)
    small, shapes = _limit_and_shapes(state_dtype, shapes)
    whole = _run(monkeypatch, None, seed, shapes=shapes, **options)
    split = _run(monkeypatch, small, seed, shapes=shapes, **options)
    assert split[2] >= 2
    _same(whole, split)


@pytest.mark.parametrize("shapes", [SHAPES, SPLIT_SHAPES], ids=["whole-params", "a-param-in-pieces"])
def test_several_sets_against_the_float64_reference(monkeypatch, rng, shapes):
    limit_allocations(monkeypatch, SMALL)
    params = _params(rng, shapes=shapes)
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


@pytest.mark.parametrize("shapes", [SHAPES, SPLIT_SHAPES], ids=["whole-params", "a-param-in-pieces"])
@pytest.mark.parametrize("state_dtype", ["float32", "int8-blockwise"])
def test_a_state_dict_moves_between_one_set_and_several(monkeypatch, rng, shapes, state_dtype):
    seed = int(rng.integers(2**32))
    small, shapes = _limit_and_shapes(state_dtype, shapes)
    _, saved, _ = _run(monkeypatch, small, seed, steps=2, shapes=shapes, state_dtype=state_dtype)
    continued = []
    for limit in (None, small):
        limit_allocations(monkeypatch, limit)
        r = np.random.default_rng(seed + 1)
        params = _params(r, shapes=shapes)
        with vk_adam.AdamW(params, lr=1e-2, weight_decay=0.01, state_dtype=state_dtype) as opt:
            opt.load_state_dict(saved)
            opt.step([random_grad(r, p.shape) for p in params])
            continued.append(([p.copy() for p in params], opt.state_dict(), 0))
    _same(*continued)


def test_plan_sets_cuts_a_param_larger_than_one_set_into_pieces():
    params = [np.arange(s, dtype=np.float32) for s in (100, 150000, 7, 1000)]
    slots, totals = plan_sets(params, 65536, alignment=256)
    big = slots[1]
    assert [p.size for p in big.pieces] == [65536, 65536, 150000 - 2 * 65536]
    assert [p.start for p in big.pieces] == [0, 65536, 2 * 65536]
    assert [p.buffer_set for p in big.pieces] == [1, 2, 3] and all(p.offset == 0 for p in big.pieces)
    # each piece views the param's memory: what the optimizer writes into it lands in the array
    joined = np.concatenate([p.host for p in big.pieces])
    assert np.array_equal(joined, params[1]) and all(np.shares_memory(p.host, params[1]) for p in big.pieces)
    # the last piece's set goes on with the params after it, each on a block
    assert slots[2].buffer_set == 3 and slots[2].offset == align(150000 - 2 * 65536, 256)
    assert slots[3].buffer_set == 3 and slots[3].offset == slots[2].offset + 256
    assert totals == [256, 65536, 65536, slots[3].offset + 1024]
    assert [s.parts() for s in (slots[0], slots[2])] == [(slots[0],), (slots[2],)]


def test_a_param_larger_than_one_allocation_steps_in_pieces(monkeypatch, rng):
    """One array three allocations long, with host imports, against the float64 reference:
    the first pieces' elements, the boundaries between pieces and the last one all update."""
    limit_allocations(monkeypatch, SMALL)
    big = rng.standard_normal(200000).astype(np.float32)
    ref = big.astype(np.float64)
    m, v = np.zeros_like(ref), np.zeros_like(ref)
    lr, (b1, b2), eps = 1e-2, (0.9, 0.999), 1e-8
    with vk_adam.Adam([big], lr=lr) as opt:
        assert len(opt._groups[0].sets) == 4
        for t in range(1, 4):
            g = random_grad(rng, big.shape)
            opt.step([g])
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g.astype(np.float64) ** 2
            ref -= lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
            assert scale_error(big, ref) <= 2e-6, t
        state = opt.state_dict()["state"][0]
    assert state["exp_avg"].shape == big.shape
    assert scale_error(state["exp_avg"], m) <= 2e-6 and scale_error(state["exp_avg_sq"], v) <= 2e-6
