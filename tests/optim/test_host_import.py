"""NumPy params and gradients the GPU copies where they lie (VK_EXT_external_memory_host, kp patch
0017): the same values as the staging path, a float64 reference and torch.optim, for every kind
of array that can reach a step; imports that follow their arrays' lives; and the refusals."""

from __future__ import annotations

import gc

import numpy as np
import pytest

kp = pytest.importorskip("kp")

import vk_adam  # noqa: E402
from vk_adam._optim.host import imports as host_imports  # noqa: E402
from vk_adam._runtime import sharing  # noqa: E402
from vk_adam._runtime.external import supported  # noqa: E402

from ..conftest import adamw_f64, random_grad, scale_error  # noqa: E402

pytestmark = pytest.mark.skipif(not supported(), reason="kp without vk-adam's patch 0017 (stock kp)")


@pytest.fixture(autouse=True)
def _host_import_device():
    """These tests are about imports: a device without them steps through staging instead
    (the same results, which the rest of the suite checks)."""
    with vk_adam.open_device() as handle:
        if not getattr(sharing(handle.manager), "host_import", False):
            pytest.skip(f"{handle.info.name} cannot import host memory (VK_EXT_external_memory_host)")


# Sizes on both sides of MIN_IMPORT_BYTES (64 KiB = 16,384 float32): imported and staged params
# share one flat buffer.
SHAPES = [(160, 130), (7,), (129, 257), (20_000,), (3, 5)]


def _imports(opt: vk_adam.Optimizer) -> int:
    return len(opt._dev.to_device.imports)


def _run(params, grad_steps, monkeypatch=None, imports=True, **opts):
    if monkeypatch is not None:
        monkeypatch.setenv(host_imports.HOST_IMPORT_ENV, "1" if imports else "0")
    with vk_adam.AdamW(params, lr=1e-3, **opts) as opt:
        for grads in grad_steps:
            opt.step(grads)
        return _imports(opt)


def test_imported_arrays_step_like_float64_and_torch(rng):
    torch = pytest.importorskip("torch")
    params = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    grads = [np.zeros(s, np.float32) for s in SHAPES]  # reused: written in place every step
    ref = [p.astype(np.float64) for p in params]
    ms = [np.zeros_like(r) for r in ref]
    vs = [np.zeros_like(r) for r in ref]
    tparams = [torch.tensor(p.copy(), requires_grad=True) for p in params]
    topt = torch.optim.AdamW(tparams, lr=1e-3)
    with vk_adam.AdamW(params, lr=1e-3) as opt:
        for step in range(1, 7):
            for g in grads:
                g[...] = random_grad(rng, g.shape)
            # one gradient is a fresh array every step: it takes the staging path
            fresh = random_grad(rng, SHAPES[2])
            step_grads = [grads[0], grads[1], fresh, grads[3], grads[4]]
            opt.step(step_grads)
            for t, g in zip(tparams, step_grads, strict=True):
                t.grad = torch.from_numpy(g.copy())
            topt.step()
            for r, g, m, v in zip(ref, step_grads, ms, vs, strict=True):
                adamw_f64(r, g.astype(np.float64), m, v, step)
        # the three large params, then (from the second step) the two large reused gradients
        assert _imports(opt) == 5
    for p, r, t in zip(params, ref, tparams, strict=True):
        assert scale_error(p, r) < 2e-6
        np.testing.assert_allclose(p, t.detach().numpy(), rtol=0, atol=2e-6 * float(np.abs(r).max()))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_same_bits_as_the_staging_path(rng, monkeypatch, dtype):
    if dtype == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        np_dtype = np.dtype(ml_dtypes.bfloat16)
    else:
        np_dtype = np.dtype(dtype)
    shapes = [(300, 130), (5, 3), (70_000,)]
    start = [rng.standard_normal(s).astype(np_dtype) for s in shapes]
    steps = [[random_grad(rng, s).astype(np_dtype) for s in shapes] for _ in range(4)]
    results = []
    for imports in (False, True):
        params = [p.copy() for p in start]
        grads = [g.copy() for g in steps[0]]
        plan = []
        for values in steps:
            for g, v in zip(grads, values, strict=True):
                g[...] = v
            plan.append(grads)
        made = _run(params, plan, monkeypatch, imports)
        assert made == (4 if imports else 0)  # two large params, their two gradients
        results.append(params)
    for staged, imported in zip(*results, strict=True):
        assert staged.tobytes() == imported.tobytes()


def test_every_kind_of_gradient_array(rng, monkeypatch, tmp_path):
    """Read-only, non-contiguous and file-backed gradients: imported where the driver takes
    them, staged otherwise; the values are the staging path's either way."""
    shape = (200, 128)
    start = rng.standard_normal(shape).astype(np.float32)
    values = [random_grad(rng, shape) for _ in range(3)]
    readonly = values[0].copy()
    readonly.flags.writeable = False
    wide = np.zeros((200, 256), np.float32)
    wide[:, ::2] = values[1]
    mapped = np.memmap(tmp_path / "grad.bin", dtype=np.float32, mode="w+", shape=shape)
    mapped[...] = values[2]
    kinds = [readonly, wide[:, ::2], mapped, readonly, wide[:, ::2], mapped]
    results = []
    for imports in (False, True):
        p = start.copy()
        _run([p], [[g] for g in kinds], monkeypatch, imports)
        results.append(p)
    assert results[0].tobytes() == results[1].tobytes()


def test_imports_follow_their_arrays(rng):
    params = [rng.standard_normal((128, 128)).astype(np.float32) for _ in range(2)]
    with vk_adam.AdamW(params, lr=1e-3) as opt:
        grads = [random_grad(rng, (128, 128)) for _ in range(2)]
        opt.step(grads)
        assert _imports(opt) == 2  # the params; gradients seen once are staged
        opt.step(grads)
        assert _imports(opt) == 4
        del grads
        gc.collect()
        assert _imports(opt) == 2  # dropped with their arrays
        for _ in range(20):  # a fresh gradient every step: never imported
            opt.step([random_grad(rng, (128, 128)) for _ in range(2)])
        assert _imports(opt) == 2
    assert _imports(opt) == 0  # close() drops every import


def test_imports_are_bounded(rng, monkeypatch):
    monkeypatch.setattr(host_imports, "MAX_IMPORTS", 6)
    p = rng.standard_normal((128, 128)).astype(np.float32)
    kept = [random_grad(rng, (128, 128)) for _ in range(10)]
    expected = p.astype(np.float64)
    with vk_adam.AdamW([p], lr=1e-3) as opt:
        for g in kept + kept:
            opt.step([g])
            assert _imports(opt) <= 6
    q = expected.astype(np.float32)
    with vk_adam.AdamW([q], lr=1e-3) as ref:
        for g in kept + kept:
            ref.step([g.copy()])
    assert p.tobytes() == q.tobytes()


def test_dropping_the_gradient_of_a_step_in_flight_is_safe(rng):
    shape = (256, 128)
    start = rng.standard_normal(shape).astype(np.float32)
    values = [random_grad(rng, shape) for _ in range(3)]
    p = start.copy()
    with vk_adam.AdamW([p], lr=1e-3) as opt:
        opt.step([values[0].copy()])
        g = values[1].copy()
        opt.step([g])  # imported: the second sight of nothing, but p is
        g = values[2].copy()
        handle = opt.step([g], wait=False)
        g[...] = np.nan  # the caller reuses and drops its array while the step runs
        del g
        gc.collect()
        handle.wait()
    q = start.copy()
    with vk_adam.AdamW([q], lr=1e-3) as ref:
        for v in values:
            ref.step([v.copy()])
    assert np.isfinite(p).all()
    assert p.tobytes() == q.tobytes()


def test_a_param_resized_in_place_is_refused(rng):
    p = rng.standard_normal(40_000).astype(np.float32)
    g = random_grad(rng, (40_000,))
    with vk_adam.AdamW([p], lr=1e-3) as opt:
        p.resize(50_000, refcheck=False)  # before its first step: its memory has moved
        kept = p.copy()
        with pytest.raises(ValueError, match="resized in place"):
            opt.step([g])
        assert opt.state_dict()["state"] == {}  # no step taken
        assert p.tobytes() == kept.tobytes()


def test_imported_arrays_cannot_be_resized_under_their_import(rng):
    """NumPy refuses to resize an array that has weak references, even with refcheck=False:
    an import's weak reference keeps its pages where they are."""
    p = rng.standard_normal(40_000).astype(np.float32)
    g = random_grad(rng, (40_000,))
    with vk_adam.AdamW([p], lr=1e-3) as opt:
        opt.step([g])
        opt.step([g])
        assert _imports(opt) == 2
        for array in (p, g):
            with pytest.raises(ValueError, match="resize"):
                array.resize(80_000, refcheck=False)
        opt.step([g])


def test_new_arrays_where_old_ones_were(rng):
    """An array dropped and a new one made (often at the same address, with the same id): the
    old import goes with the old array, the new one gets its own."""
    shape = (40_000,)
    start = rng.standard_normal(shape).astype(np.float32)
    values = [random_grad(rng, shape) for _ in range(6)]
    p = start.copy()
    with vk_adam.AdamW([p], lr=1e-3) as opt:
        for pair in (values[0:2], values[2:4], values[4:6]):
            g = np.empty(shape, np.float32)
            for v in pair:
                g[...] = v
                opt.step([g])
            del g
            gc.collect()
    q = start.copy()
    with vk_adam.AdamW([q], lr=1e-3) as ref:
        for v in values:
            ref.step([v.copy()])
    assert p.tobytes() == q.tobytes()


def test_a_skipped_step_leaves_imported_params_alone(rng):
    p = rng.standard_normal(40_000).astype(np.float32)
    g = random_grad(rng, (40_000,))
    with vk_adam.AdamW([p], lr=1e-3, skip_nonfinite=True) as opt:
        opt.step([g])
        opt.step([g])
        kept = p.copy()
        g[7] = np.inf
        assert opt.step([g]).skipped
        assert _imports(opt) == 2
    assert p.tobytes() == kept.tobytes()


def _aligned(values: np.ndarray, to: int = 256) -> np.ndarray:
    """A copy of ``values`` whose first byte is ``to``-aligned: a param whose import a shader
    can bind on any driver (lavapipe's buffers need 64 bytes; NumPy's large arrays start 16
    bytes into a page)."""
    raw = np.empty(values.size + to // values.itemsize, values.dtype)
    skip = (-raw.__array_interface__["data"][0] % to) // values.itemsize
    out = raw[skip : skip + values.size].reshape(values.shape)
    out[...] = values
    return out


def _bound_directly(opt: vk_adam.Optimizer) -> bool:
    bset = opt._dev.groups[0].sets[0]
    return bset.bound_param is not None and bset.bound_param is not bset.param


@pytest.mark.parametrize("options", [{}, {"clip_grad_norm": 0.5}, {"skip_nonfinite": True}])
def test_a_param_bound_to_the_update_shader_steps_like_the_staging_path(rng, monkeypatch, options):
    """A group of one float32 param whose import the update shader binds: the same bits as the
    staging path, through reused and fresh gradients, an asynchronous step (which goes back to
    the flat buffer) and a non-finite gradient."""
    n = 40_001  # not a whole number of vec4s
    start = rng.standard_normal(n).astype(np.float32)
    values = [random_grad(rng, (n,)) for _ in range(6)]
    if "skip_nonfinite" in options:
        values[4][123] = np.nan
    results = []
    for imports in (False, True):
        monkeypatch.setenv(host_imports.HOST_IMPORT_ENV, "1" if imports else "0")
        p = _aligned(start)
        reused = np.empty(n, np.float32)
        with vk_adam.AdamW([p], lr=1e-3, **options) as opt:
            for i, v in enumerate(values):
                if i == 3 and "skip_nonfinite" not in options:  # (which is synchronous only)
                    opt.step([v.copy()], wait=False).wait()
                elif i % 2:
                    opt.step([v.copy()])  # fresh
                else:
                    reused[...] = v
                    opt.step([reused])
            assert _bound_directly(opt) == imports
        results.append(p.copy())
    assert results[0].tobytes() == results[1].tobytes()


def test_param_buffer_is_current_after_direct_steps(rng, kp_manager):
    n = 50_000
    p = _aligned(rng.standard_normal(n).astype(np.float32))
    g = random_grad(rng, (n,))
    with vk_adam.AdamW([p], lr=1e-3) as opt:
        opt.step([g])
        opt.step([g])
        assert _bound_directly(opt)
        flat = opt.param_buffer()  # brought up to date, and kept so from now on
        opt.step([g])
        assert not _bound_directly(opt)
        opt._rt.run([opt._rt.download_op([flat])])
        assert np.array(flat.data())[:n].tobytes() == p.tobytes()


def test_exportable_optimizers_keep_their_flat_buffer(rng):
    n = 50_000
    p = _aligned(rng.standard_normal(n).astype(np.float32))
    with vk_adam.AdamW([p], lr=1e-3, exportable=True) as opt:
        opt.step([random_grad(rng, (n,))])
        opt.step([random_grad(rng, (n,))])
        assert not _bound_directly(opt)
