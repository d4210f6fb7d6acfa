"""Buffers larger than one storage-buffer binding may span (``maxStorageBufferRange``): each
chunk's dispatch binds windows of the buffers (``vk_adam/_optim/windows.py``). The windowed step
must equal the whole-buffer step bit for bit, in every storage format and on every path, and a
real oversized buffer on lavapipe (128 MiB limit) must step under validation with 0 messages."""

from __future__ import annotations

import dataclasses
import itertools

import ml_dtypes
import numpy as np
import pytest

import vk_adam
from vk_adam import _formats as fmt
from vk_adam._optim.windows import Chunk, chunks, window
from vk_adam._runtime import DeviceLimits, kp_features
from vk_adam.testing import FORMAT_CASES

from ..conftest import random_grad

DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
needs_windows = pytest.mark.skipif(
    not kp_features().binding_windows, reason="this kp build lacks binding windows (vk-adam's kp patch)"
)
#: The limits' constructor as the library defines it (the tests below lower what it reports).
_FROM_PROPERTIES = DeviceLimits.__dict__["from_properties"]


def limit_bindings(monkeypatch, limit):
    """Bindings of at most ``limit`` bytes (None: the device's own) for the runtimes made after
    this: the device's properties report that ``maxStorageBufferRange``, so small buffers take the
    windowed path (``_optim/windows.py``) that large ones take on real devices."""
    if limit is None:
        monkeypatch.setattr(DeviceLimits, "from_properties", _FROM_PROPERTIES)
        return

    def lowered(cls, props):
        limits = _FROM_PROPERTIES.__func__(cls, props)
        return dataclasses.replace(
            limits, max_storage_buffer_range=min(limit, limits.max_storage_buffer_range)
        )

    monkeypatch.setattr(DeviceLimits, "from_properties", classmethod(lowered))


# -- the chunks (pure) -----------------------------------------------------------------------------


@pytest.mark.parametrize("alignment", [4, 16, 64, 256])
@pytest.mark.parametrize("n", [1, 255, 4096, 65536 * 3 + 17, 10**7 + 3])
def test_chunks_cover_every_element_once_with_aligned_windows(n, alignment):
    max_range = 1 << 20  # 262,144 float32 elements per binding
    spans = chunks(n, max_range, alignment)
    assert spans[0].start == 0 and sum(c.count for c in spans) == n
    assert all(a.start + a.count == b.start for a, b in itertools.pairwise(spans))
    if fmt.words_for(n, "float32") * 4 <= max_range:
        assert spans == [Chunk(0, n)]  # fits: one dispatch over whole buffers, as before
    for chunk in spans:
        for per in [(4, 1), (2, 1), (1, 1), (4, fmt.BLOCK)]:
            nbytes = -(-n * per[0] // per[1]) + 64
            offset, size = window(nbytes, per, chunk)
            assert offset % alignment == 0, (chunk, per)
            assert 0 < size <= max_range and offset + size <= nbytes
            assert offset + size >= -(-(chunk.start + chunk.count) * per[0] // per[1])  # covers it


def test_a_device_too_small_for_one_aligned_chunk_is_refused():
    with pytest.raises(ValueError, match=r"maxStorageBufferRange .*minStorageBufferOffsetAlignment 256\)"):
        chunks(10**6, 4096, 256)


# -- windowed equals whole, bit for bit --------------------------------------------------------------


def _run(monkeypatch, limit, make_params, steps, rng_seed, **options):
    """Params after ``steps`` steps and the state dict, with bindings limited to ``limit`` bytes
    (None: the device's own)."""
    limit_bindings(monkeypatch, limit)
    rng = np.random.default_rng(rng_seed)
    params = make_params(rng)
    with vk_adam.AdamW(params, lr=1e-2, **options) as opt:
        dispatches = opt._dev.dispatches_per_step()
        for _ in range(steps):
            opt.step([random_grad(rng, p.shape).astype(p.dtype) for p in params])
        state = opt.state_dict()
    return [p.copy() for p in params], state, dispatches


def _same(a, b):
    (pa, sa, _), (pb, sb, _) = a, b
    for x, y in zip(pa, pb, strict=True):
        assert np.array_equal(x.view(np.uint8), y.view(np.uint8))
    for i, entry in sa["state"].items():
        for key, value in entry.items():
            other = sb["state"][i][key]
            if isinstance(value, np.ndarray):
                assert np.array_equal(value.view(np.uint8), other.view(np.uint8)), (i, key)
            else:
                assert value == other


@needs_windows
@pytest.mark.parametrize("param_dtype,stochastic,state_dtype", [("float32", False, "float32"), *FORMAT_CASES])
def test_windowed_steps_equal_whole_buffer_steps_in_every_format(
    monkeypatch, rng, param_dtype, stochastic, state_dtype
):
    seed = int(rng.integers(2**32))
    dtype = DTYPES[param_dtype]

    def make(r):  # two params: the flat buffer holds both, and a chunk boundary falls inside one
        return [
            (r.standard_normal(70_001) * 0.5).astype(dtype),
            (r.standard_normal((130, 257)) * 0.5).astype(dtype),
        ]

    options = dict(state_dtype=state_dtype, stochastic_rounding=stochastic, skip_nonfinite=True, seed=7)
    whole = _run(monkeypatch, None, make, 3, seed, **options)
    windowed = _run(monkeypatch, 1 << 16, make, 3, seed, **options)  # 16,384 float32 per binding
    assert whole[2] == 1 and windowed[2] > 4  # the windowed run really was cut into chunks
    _same(whole, windowed)


@needs_windows
def test_windowed_clipping_norm_agrees_to_float32_rounding(monkeypatch, rng):
    """Clipping's pass 1 sums per workgroup of each dispatch, so chunks change the order of the
    norm's float32 sum (not its terms): the norm agrees to rounding, and so do the params."""
    seed = int(rng.integers(2**32))

    def make(r):
        return [(r.standard_normal(100_003) * 0.5).astype(np.float32)]

    norms = []
    results = []
    for limit in (None, 1 << 16):
        limit_bindings(monkeypatch, limit)
        r = np.random.default_rng(seed)
        params = make(r)
        with vk_adam.AdamW(params, lr=1e-2, clip_grad_norm=1.0) as opt:
            for _ in range(3):
                opt.step([random_grad(r, p.shape) for p in params])
                norms.append(opt.last_grad_norm())
        results.append(params[0].copy())
    whole, windowed = norms[:3], norms[3:]
    assert np.allclose(whole, windowed, rtol=1e-5, atol=0)
    assert np.max(np.abs(results[0] - results[1])) <= 1e-5 * 1e-2 * 3  # lr * steps, to rounding


@needs_windows
def test_windowed_kp_tensor_params_and_skip_nonfinite(monkeypatch, kp_manager, rng):
    from vk_adam._runtime._kp import kp_module

    kp = kp_module()
    n = 50_000
    values = rng.standard_normal(n).astype(np.float32)
    grads = [random_grad(rng, (n,)) for _ in range(3)]
    grads[1][123] = np.nan  # skipped: params and state untouched
    results = []
    for limit in (None, 1 << 17):
        limit_bindings(monkeypatch, limit)
        param = kp_manager.tensor(values.copy())
        kp_manager.sequence().eval(kp.OpTensorSyncDevice([param]))
        with vk_adam.Adam([param], lr=1e-2, manager=kp_manager, skip_nonfinite=True) as opt:
            skipped = [opt.step([g]).skipped for g in grads]
            kp_manager.sequence().eval(kp.OpTensorSyncLocal([param]))
            results.append((param.data().copy(), opt.state_dict(), opt._dev.dispatches_per_step(), skipped))
        param.destroy()
    (a, sa, da, ka), (b, sb, db, kb) = results
    assert ka == kb == [False, True, False]
    assert da == 1 and db >= 2
    assert np.array_equal(a, b)
    for key in ("exp_avg", "exp_avg_sq"):
        assert np.array_equal(sa["state"][0][key], sb["state"][0][key])


@needs_windows
def test_windowed_functional_adam_update(monkeypatch, rng):
    n = 40_000
    start = [rng.standard_normal(n).astype(np.float32) for _ in range(3)]
    start[2] = np.abs(start[2])
    grad = random_grad(rng, (n,))
    out = []
    for limit in (None, 1 << 17):
        limit_bindings(monkeypatch, limit)
        p, m, v = (a.copy() for a in start)
        vk_adam.adam_update(p, grad.copy(), m, v, 3, {"lr": 1e-2})
        out.append((p, m, v))
    for x, y in zip(*out, strict=True):
        assert np.array_equal(x, y)


# -- a real oversized buffer: lavapipe's 128 MiB binding limit ---------------------------------------


@needs_windows
@pytest.mark.slow
def test_a_256_mib_param_steps_within_lavapipe_binding_limit(rng):
    """One AdamW step on a single float32 param of 2**26 elements (256 MiB), against NumPy in
    float64. Under ``--vk-validation`` the layer checks every descriptor against the device's
    maxStorageBufferRange; the suite fails on any message it reports."""
    from vk_adam._runtime import select_device

    if "llvmpipe" not in select_device().name:
        pytest.skip("the 128 MiB binding limit is lavapipe's; other devices bind 256 MiB whole")
    n = 1 << 26
    p = rng.standard_normal(n, dtype=np.float32)
    g = rng.standard_normal(n, dtype=np.float32)
    expected = p.astype(np.float64)
    lr, b1, b2, eps, wd = 1e-3, 0.9, 0.999, 1e-8, 1e-2
    expected *= 1 - lr * wd
    m = (1 - b1) * g.astype(np.float64)
    v = (1 - b2) * g.astype(np.float64) ** 2
    expected -= lr / (1 - b1) * m / (np.sqrt(v) / np.sqrt(1 - b2) + eps)
    with vk_adam.AdamW([p], lr=lr) as opt:
        assert opt._dev.dispatches_per_step() >= 2  # 256 MiB in windows of at most 128 MiB
        opt.step([g])
    assert np.max(np.abs(p - expected)) <= 4e-6 * np.max(np.abs(expected))
