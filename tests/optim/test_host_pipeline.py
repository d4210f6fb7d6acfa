"""The pipelined NumPy step (``_optim/host_pipeline``): each chunk's copies in, update and copies
out on their own queues, chained by timeline semaphores. The values must be exactly those of the
one-submission step on every path it takes (reused and fresh gradients, ``device_params``,
16-bit params, params of every size in one group, a small staged param beside imported ones),
and the float64 reference's and torch's.

On lavapipe (one queue) the three stages run on that queue in turn (``MIN_QUEUES`` lowered), so
the chunking, the semaphores and the staging beside the imports are checked under validation;
on a GPU with three queues in its compute family they run on three queues."""

from __future__ import annotations

import numpy as np
import pytest

kp = pytest.importorskip("kp")

import vk_adam  # noqa: E402
from vk_adam._optim import host_imports, host_pipeline  # noqa: E402
from vk_adam._optim.host_pipeline import PIPELINE_CHUNK_ENV, HostPipeline, chunk_bytes  # noqa: E402

from ..conftest import adamw_f64, random_grad, scale_error  # noqa: E402

# 64 KiB of float32 per chunk: every group below spans several, and chunk edges fall inside params
CHUNK = 64 * 1024
# params of uneven sizes (padding between them in the flat buffer); (7,) and (3, 5) are below
# the import threshold and go through staging memory
SHAPES = [(300, 257), (7,), (40_001,), (3, 5), (61_111,)]


def _imports_available() -> bool:
    with vk_adam.open_device() as handle:
        from vk_adam._runtime import sharing

        return bool(getattr(sharing(handle.manager), "host_import", False))


@pytest.fixture
def runs(monkeypatch):
    """How many steps went through the pipeline; every device may run it (one queue is enough)."""
    if not _imports_available():
        pytest.skip("the pipelined step copies through host imports, which this device lacks")
    monkeypatch.setattr(host_pipeline, "MIN_QUEUES", 1)
    monkeypatch.setenv(host_imports.HOST_IMPORT_ENV, "1")
    calls = {"runs": 0}
    run = HostPipeline.run

    def counted(self, *args, **kwargs):
        calls["runs"] += 1
        return run(self, *args, **kwargs)

    monkeypatch.setattr(HostPipeline, "run", counted)
    return calls


def _steps(monkeypatch, chunk, start, grad_steps, *, fresh=False, **opts):
    """The params and state after ``grad_steps``, pipelined in chunks of ``chunk`` bytes (0:
    the one-submission step). The gradient arrays are reused (written in place, so they are
    imported from the second step) unless ``fresh``."""
    monkeypatch.setenv(PIPELINE_CHUNK_ENV, str(chunk))
    params = [p.copy() for p in start]
    grads = [np.zeros_like(g) for g in grad_steps[0]]
    with vk_adam.AdamW(params, lr=1e-3, **opts) as opt:
        for step_grads in grad_steps:
            if fresh:
                grads = [g.copy() for g in step_grads]
            else:
                for g, new in zip(grads, step_grads, strict=True):
                    g[...] = new
            opt.step(grads)
        state = opt.state_dict()
    return params, state


def _same(a, b):
    return len(a) == len(b) and all(x.tobytes() == y.tobytes() for x, y in zip(a, b, strict=True))


def _same_state(a, b):
    return all(
        np.asarray(value).tobytes() == np.asarray(b["state"][i][name]).tobytes()
        for i, entry in a["state"].items()
        for name, value in entry.items()
    )


@pytest.mark.parametrize("fresh", [False, True], ids=["reused grads", "fresh grads"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_pipelined_step_equals_one_submission_bit_for_bit(rng, monkeypatch, runs, dtype, fresh):
    np_dtype = np.dtype(pytest.importorskip("ml_dtypes").bfloat16) if dtype == "bfloat16" else np.float32
    start = [rng.standard_normal(s).astype(np_dtype) for s in SHAPES]
    steps = [[random_grad(rng, s).astype(np_dtype) for s in SHAPES] for _ in range(4)]
    whole, whole_state = _steps(monkeypatch, 0, start, steps, fresh=fresh)
    assert runs["runs"] == 0
    piped, piped_state = _steps(monkeypatch, CHUNK, start, steps, fresh=fresh)
    assert runs["runs"] == len(steps)  # every step: the params are imported at their first
    assert _same(whole, piped)
    assert _same_state(whole_state, piped_state)
    assert not _same(whole, start)  # the steps changed the params


def test_pipelined_step_with_device_held_params(rng, monkeypatch, runs):
    """``device_params=True``: the chunks copy only gradients in and params out."""
    shapes = [(200_003,)]
    start = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    steps = [[random_grad(rng, s) for s in shapes] for _ in range(4)]
    whole, _ = _steps(monkeypatch, 0, start, steps, device_params=True)
    piped, _ = _steps(monkeypatch, CHUNK, start, steps, device_params=True)
    assert runs["runs"] == len(steps)
    assert _same(whole, piped)


def test_pipelined_step_steps_like_float64_and_torch(rng, monkeypatch, runs):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv(PIPELINE_CHUNK_ENV, str(CHUNK))
    params = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    grads = [np.zeros(s, np.float32) for s in SHAPES]
    ref = [p.astype(np.float64) for p in params]
    ms, vs = [np.zeros_like(r) for r in ref], [np.zeros_like(r) for r in ref]
    tparams = [torch.tensor(p.copy(), requires_grad=True) for p in params]
    topt = torch.optim.AdamW(tparams, lr=1e-3)
    with vk_adam.AdamW(params, lr=1e-3) as opt:
        for step in range(1, 6):
            for g in grads:
                g[...] = random_grad(rng, g.shape)
            opt.step(grads)
            for t, g in zip(tparams, grads, strict=True):
                t.grad = torch.from_numpy(g.copy())
            topt.step()
            for r, g, m, v in zip(ref, grads, ms, vs, strict=True):
                adamw_f64(r, g.astype(np.float64), m, v, step)
    assert runs["runs"] == 5
    for p, r, t in zip(params, ref, tparams, strict=True):
        assert scale_error(p, r) < 2e-6
        np.testing.assert_allclose(p, t.detach().numpy(), rtol=0, atol=2e-6 * float(np.abs(r).max()))


@pytest.mark.parametrize(
    "opts",
    [{"profile": True}, {"clip_grad_norm": 1.0}, {"skip_nonfinite": True}],
    ids=["timestamps", "clipping", "skip_nonfinite"],
)
def test_steps_the_pipeline_cannot_take_are_one_submission(rng, monkeypatch, runs, opts):
    """Timestamps bracket one submission; clipping and the non-finite check read every gradient
    before any update. Those steps take the one-submission path, with the same values."""
    start = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    steps = [[random_grad(rng, s) for s in SHAPES] for _ in range(2)]
    whole, _ = _steps(monkeypatch, 0, start, steps, **opts)
    chunked, _ = _steps(monkeypatch, CHUNK, start, steps, **opts)
    assert runs["runs"] == 0
    assert _same(whole, chunked)


def test_a_skipped_pipeline_leaves_the_params_alone(rng, monkeypatch, runs):
    """A NaN gradient with ``skip_nonfinite``: the step is skipped (one submission), the arrays keep
    their values, and the next finite step pipelines again only where it can (it cannot here)."""
    monkeypatch.setenv(PIPELINE_CHUNK_ENV, str(CHUNK))
    params = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    before = [p.copy() for p in params]
    grads = [random_grad(rng, s) for s in SHAPES]
    grads[0][3, 4] = np.nan
    with vk_adam.AdamW(params, lr=1e-3, skip_nonfinite=True) as opt:
        assert opt.step(grads).skipped
    assert _same(params, before)
    assert runs["runs"] == 0


def test_the_chunk_variable(monkeypatch):
    monkeypatch.delenv(PIPELINE_CHUNK_ENV, raising=False)
    assert chunk_bytes() == host_pipeline.DEFAULT_CHUNK_BYTES
    monkeypatch.setenv(PIPELINE_CHUNK_ENV, "0")
    assert chunk_bytes() == 0
    monkeypatch.setenv(PIPELINE_CHUNK_ENV, "16MiB")
    with pytest.raises(ValueError, match="VK_ADAM_PIPELINE_CHUNK_BYTES must be a number of bytes"):
        chunk_bytes()
