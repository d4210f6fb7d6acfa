"""Synchronous steps copy large staged buffers in chunks (``_optim/host/staging``): the host
gathers chunk k + 1 while the GPU uploads chunk k, and scatters chunk k while it downloads
chunk k + 1. The values must be exactly those of whole-buffer copies, on every path that stages
(no host imports, fresh gradients beside imported params, 16-bit params, device-held params,
params cut into pieces, skipped steps), and the float64 reference's."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

kp = pytest.importorskip("kp")

import vk_adam  # noqa: E402
from vk_adam._optim.host import imports as host_imports  # noqa: E402
from vk_adam._optim.host import staging as host_staging  # noqa: E402
from vk_adam._optim.host import to_device, to_host  # noqa: E402
from vk_adam._optim.host.staging import (  # noqa: E402
    MAX_CHUNKS,
    STAGING_CHUNK_ENV,
    chunk_ranges,
)
from vk_adam._optim.layout import ParamSlot  # noqa: E402

from ..conftest import adamw_f64, limit_allocations, random_grad, scale_error  # noqa: E402

# 64 KiB chunks: every shape set below spans several, and chunk edges fall inside params
CHUNK = 64 * 1024
# ~0.5 MiB of float32 in params of uneven sizes (padding between them in the flat buffer)
SHAPES = [(300, 257), (7,), (40_001,), (3, 5), (61_111,)]


@pytest.fixture
def counted(monkeypatch):
    """How many buffers were uploaded and downloaded in chunks."""
    calls = {"up": 0, "down": 0}
    up, down = to_device.upload_in_chunks, to_host.download_in_chunks

    def upload(*args, **kwargs):
        calls["up"] += 1
        return up(*args, **kwargs)

    def download(*args, **kwargs):
        calls["down"] += 1
        return down(*args, **kwargs)

    monkeypatch.setattr(to_device, "upload_in_chunks", upload)
    monkeypatch.setattr(to_host, "download_in_chunks", download)
    return calls


def _steps(monkeypatch, chunk, start, grad_steps, *, imports=False, wait=True, **opts):
    """The params after ``grad_steps`` with chunks of ``chunk`` bytes (0: whole buffers)."""
    monkeypatch.setenv(STAGING_CHUNK_ENV, str(chunk))
    monkeypatch.setenv(host_imports.HOST_IMPORT_ENV, "1" if imports else "0")
    params = [p.copy() for p in start]
    with vk_adam.AdamW(params, lr=1e-3, **opts) as opt:
        for grads in grad_steps:
            opt.step(grads, wait=wait)
        opt.synchronize()
        state = opt.state_dict()
    return params, state


def _same(a, b):
    return len(a) == len(b) and all(x.tobytes() == y.tobytes() for x, y in zip(a, b, strict=True))


def _same_state(a, b):
    for i, entry in a["state"].items():
        for name, value in entry.items():
            other = b["state"][i][name]
            if np.asarray(value).tobytes() != np.asarray(other).tobytes():
                return False
    return True


@pytest.mark.parametrize("task_bytes", [16 * 1024, host_staging.TASK_BYTES])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_chunked_staging_equals_whole_buffers_bit_for_bit(rng, monkeypatch, counted, dtype, task_bytes):
    # 16 KiB tasks: several copy-thread tasks per chunk, taken in order by the threads
    monkeypatch.setattr(host_staging, "TASK_BYTES", task_bytes)
    if dtype == "bfloat16":
        np_dtype = np.dtype(pytest.importorskip("ml_dtypes").bfloat16)
    else:
        np_dtype = np.dtype(dtype)
    start = [rng.standard_normal(s).astype(np_dtype) for s in SHAPES]
    # fresh gradient arrays each step
    steps = [[random_grad(rng, s).astype(np_dtype) for s in SHAPES] for _ in range(3)]
    whole, whole_state = _steps(monkeypatch, 0, start, steps)
    assert counted == {"up": 0, "down": 0}
    chunked, chunked_state = _steps(monkeypatch, CHUNK, start, steps)
    # every step: the params and the gradients up in chunks, the params down in chunks
    assert counted == {"up": 2 * len(steps), "down": len(steps)}
    assert _same(whole, chunked)
    assert _same_state(whole_state, chunked_state)
    assert not _same(whole, start)  # the steps changed the params


def test_chunked_staging_steps_like_float64_and_torch(rng, monkeypatch, counted):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv(STAGING_CHUNK_ENV, str(CHUNK))
    monkeypatch.setenv(host_imports.HOST_IMPORT_ENV, "0")
    params = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    ref = [p.astype(np.float64) for p in params]
    ms, vs = [np.zeros_like(r) for r in ref], [np.zeros_like(r) for r in ref]
    tparams = [torch.tensor(p.copy(), requires_grad=True) for p in params]
    topt = torch.optim.AdamW(tparams, lr=1e-3)
    with vk_adam.AdamW(params, lr=1e-3) as opt:
        for step in range(1, 6):
            grads = [random_grad(rng, s) for s in SHAPES]
            opt.step(grads)
            for t, g in zip(tparams, grads, strict=True):
                t.grad = torch.from_numpy(g.copy())
            topt.step()
            for r, g, m, v in zip(ref, grads, ms, vs, strict=True):
                adamw_f64(r, g.astype(np.float64), m, v, step)
    assert counted["up"] == 10 and counted["down"] == 5
    for p, r, t in zip(params, ref, tparams, strict=True):
        assert scale_error(p, r) < 2e-6
        np.testing.assert_allclose(p, t.detach().numpy(), rtol=0, atol=2e-6 * float(np.abs(r).max()))


def test_fresh_gradients_beside_imported_params(rng, monkeypatch, counted):
    """With host imports, a fresh gradient array each step takes staging memory (chunked), the
    params their imports: the same bits as whole buffers."""
    shapes = [(200_003,)]  # one float32 param: its import is bound to the update shader
    start = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    steps = [[random_grad(rng, s) for s in shapes] for _ in range(3)]
    whole, _ = _steps(monkeypatch, 0, start, steps, imports=True)
    chunked, _ = _steps(monkeypatch, CHUNK, start, steps, imports=True)
    with vk_adam.open_device() as handle:
        from vk_adam._runtime import sharing

        imported = bool(getattr(sharing(handle.manager), "host_import", False))
    # where the device imports host memory only the gradients are staged (and chunked)
    assert counted["up"] == (3 if imported else 6)
    assert counted["down"] == (0 if imported else 3)
    assert _same(whole, chunked)


def test_device_held_params_and_pieces(rng, monkeypatch, counted):
    """``device_params=True`` (gradients up, params only down) and a param cut into pieces of
    one buffer set each (a lowered allocation limit): chunks per piece, the same bits."""
    limit_allocations(monkeypatch, 512 * 1024)
    shapes = [(300_000,), (20_000,)]
    start = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    steps = [[random_grad(rng, s) for s in shapes] for _ in range(3)]
    results = []
    for chunk in (0, CHUNK):
        for held in (False, True):
            results.append(_steps(monkeypatch, chunk, start, steps, device_params=held)[0])
    assert counted["up"] > 0 and counted["down"] > 0
    assert _same(results[0], results[2])  # arrays own the params: whole / chunked
    assert _same(results[1], results[3])  # the device holds them: whole / chunked
    assert _same(results[0], results[1])


def test_asynchronous_steps_copy_whole_buffers(rng, monkeypatch, counted):
    start = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    steps = [[random_grad(rng, s) for s in SHAPES] for _ in range(3)]
    whole, _ = _steps(monkeypatch, 0, start, steps)
    asynchronous, _ = _steps(monkeypatch, CHUNK, start, steps, wait=False)
    assert counted == {"up": 0, "down": 0}  # their inputs are snapshots taken at submission
    assert _same(whole, asynchronous)


def test_a_skipped_step_leaves_the_arrays_alone(rng, monkeypatch, counted):
    monkeypatch.setenv(STAGING_CHUNK_ENV, str(CHUNK))
    monkeypatch.setenv(host_imports.HOST_IMPORT_ENV, "0")
    params = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    with vk_adam.AdamW(params, lr=1e-3, skip_nonfinite=True) as opt:
        opt.step([random_grad(rng, s) for s in SHAPES])
        before = [p.copy() for p in params]
        bad = [random_grad(rng, s) for s in SHAPES]
        bad[2][123] = np.inf
        handle = opt.step(bad)
        assert handle.skipped
        assert _same(params, before)
        opt.step([random_grad(rng, s) for s in SHAPES])
    assert not _same(params, before)
    assert counted["up"] == 6 and counted["down"] == 2


def _slots(sizes, gap=3):
    slots, at = [], 0
    for n in sizes:
        slots.append(ParamSlot(0, at, n, (n,), None))
        at += n + gap
    return slots


def test_chunk_ranges(monkeypatch):
    monkeypatch.setenv(STAGING_CHUNK_ENV, str(CHUNK))
    slots = _slots([100_000, 5, 250_001])
    end = slots[-1].offset + slots[-1].size
    ranges = chunk_ranges(slots, 4)
    assert ranges is not None
    assert ranges[0][0] == 0 and ranges[-1][1] == end
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))  # no gap, no overlap
    assert all((b - a) % 1024 == 0 for a, b in ranges[:-1])  # whole 4 KiB pages
    assert len(ranges) <= MAX_CHUNKS
    assert chunk_ranges(_slots([CHUNK // 4]), 4) is None  # below two chunks: whole
    monkeypatch.setenv(STAGING_CHUNK_ENV, "0")
    assert chunk_ranges(slots, 4) is None
    monkeypatch.setenv(STAGING_CHUNK_ENV, "-5")
    with pytest.raises(ValueError, match=r"VK_ADAM_STAGING_CHUNK_BYTES must be a number of bytes, or 0"):
        chunk_ranges(slots, 4)
    monkeypatch.delenv(STAGING_CHUNK_ENV)
    assert host_staging.chunk_bytes() == host_staging.DEFAULT_CHUNK_BYTES
