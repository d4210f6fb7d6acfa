"""Gradient clipping by global norm on the device: parity with torch.nn.utils.clip_grad_norm_
followed by torch.optim.AdamW, determinism, the device and recorded paths, skip_nonfinite in the
same pass, and bad input.

Tolerances: params within 1e-5 of the tensor's scale (as tests/optim/test_torch_parity.py: float32 on
both sides, different rounding order), the norm within 1e-5 relative (float32 sums in another
order than torch's per-tensor norms).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import vk_adam  # noqa: E402
from vk_adam._rules.builtin import ADAMW  # noqa: E402

from ..conftest import random_grad, scale_error  # noqa: E402
from ..runtime.test_device_buffers import download, upload  # noqa: E402

SHAPES = [(33, 7), (130,), (5, 4, 3)]


def _grads(rng, shapes, t):
    # Half the steps far above the bound (clipped), half below (scale 1): both paths run.
    scale = 30.0 if t % 2 else 0.01
    return [(rng.standard_normal(s) * scale).astype(np.float32) for s in shapes]


@pytest.mark.parametrize("groups", [1, 2])
def test_clipping_matches_torch_clip_grad_norm_then_adamw(rng, groups):
    max_norm = 1.0
    params = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    tparams = [torch.tensor(p.copy(), requires_grad=True) for p in params]
    if groups == 1:
        ours, theirs = [params], [tparams]
    else:
        ours = [{"params": params[:1]}, {"params": params[1:], "lr": 1e-3}]
        theirs = [{"params": tparams[:1]}, {"params": tparams[1:], "lr": 1e-3}]
    topt = torch.optim.AdamW(theirs if groups == 2 else tparams, lr=3e-3)
    with vk_adam.AdamW(ours[0] if groups == 1 else ours, lr=3e-3, clip_grad_norm=max_norm) as opt:
        assert opt.clip_grad_norm == max_norm
        for t in range(1, 21):
            grads = _grads(rng, SHAPES, t)
            opt.step(grads)
            for tp, g in zip(tparams, grads, strict=True):
                tp.grad = torch.from_numpy(g.copy())
            norm = float(torch.nn.utils.clip_grad_norm_(tparams, max_norm))
            topt.step()
            assert abs(opt.last_grad_norm() - norm) <= 1e-5 * norm, (t, opt.last_grad_norm(), norm)
            for p, tp in zip(params, tparams, strict=True):
                assert scale_error(p, tp.detach().numpy()) <= 1e-5, t


def test_the_norm_is_deterministic_bit_for_bit(rng):
    shapes = [(1000, 37), (4099,)]
    grads = [random_grad(rng, s) * 100 for s in shapes]
    norms = []
    for wait in (True, False, True):
        params = [np.zeros(s, np.float32) for s in shapes]
        with vk_adam.AdamW(params, clip_grad_norm=0.5) as opt:
            opt.step(grads, wait=wait)
            norms.append(np.float32(opt.last_grad_norm()).tobytes())
    assert norms[0] == norms[1] == norms[2]
    ref = np.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads))
    assert abs(np.frombuffer(norms[0], np.float32)[0] - ref) <= 1e-5 * ref


def test_recorded_steps_on_device_buffers_are_clipped(rng, kp_manager):
    """Two kp-tensor params (two buffer sets, one global norm), 6 steps recorded into one
    sequence, against a float64 reference of clip-then-AdamW."""
    mgr, max_norm = kp_manager, 0.7
    sizes = [3000, 517]
    inits = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    params = [mgr.tensor(x.copy()) for x in inits]
    grads = [[(rng.standard_normal(n) * 5).astype(np.float32) for n in sizes] for _ in range(6)]
    gtensors = [[mgr.tensor(g) for g in step] for step in grads]
    for t in [*params, *(g for step in gtensors for g in step)]:
        upload(mgr, t, t.data().copy())
    refs = [x.astype(np.float64) for x in inits]
    hyper = {**ADAMW.defaults, "lr": 0.01}
    states = [{k: np.zeros(n) for k in ADAMW.state_names(hyper)} for n in sizes]
    seq = mgr.sequence()
    with vk_adam.AdamW(params, lr=0.01, manager=mgr, zero_grad=False, clip_grad_norm=max_norm) as opt:
        for t, step in enumerate(gtensors, start=1):
            opt.record_step(seq, step)
            g64 = [g.astype(np.float64) for g in grads[t - 1]]
            norm = np.sqrt(sum(float(np.sum(g * g)) for g in g64))
            coef = min(1.0, max_norm / (norm + 1e-6))
            for ref, g, st in zip(refs, g64, states, strict=True):
                ADAMW.reference(ref, g * coef, st, hyper, t)
        seq.eval()
        assert abs(opt.last_grad_norm() - norm) <= 1e-5 * norm
    for p, ref in zip(params, refs, strict=True):
        assert scale_error(download(mgr, p), ref) <= 2e-6
    seq.destroy()
    for t in [*params, *(g for step in gtensors for g in step)]:
        t.destroy()


def test_one_pass_serves_clipping_and_skip_nonfinite(rng):
    params = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    with vk_adam.AdamW(params, clip_grad_norm=1.0, skip_nonfinite=True) as opt:
        # the pre-pass of every buffer set is the norm's pass 1, not the separate check
        assert all(b.check_ops and None not in b.check_ops for g in opt._groups for b in g.sets)
        opt.step(_grads(rng, SHAPES, 1))
        before = [p.copy() for p in params]
        grads = _grads(rng, SHAPES, 1)
        grads[2][1, 2, 0] = np.inf
        assert opt.step(grads).skipped
        for p, b in zip(params, before, strict=True):
            np.testing.assert_array_equal(p, b)
        assert not np.isfinite(opt.last_grad_norm())
        ok = opt.step(_grads(rng, SHAPES, 2))
        assert not ok.skipped and opt.state_dict()["state"][0]["step"] == 2.0


def test_bad_clipping_options_are_refused_clearly():
    p = np.zeros(4, np.float32)
    for bad in (0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="clip_grad_norm must be a positive, finite number"):
            vk_adam.AdamW([p], clip_grad_norm=bad)
    for bad in ("1", True, [1.0]):
        with pytest.raises(TypeError, match="clip_grad_norm must be a positive number or None"):
            vk_adam.AdamW([p], clip_grad_norm=bad)
    with vk_adam.AdamW([p]) as opt:
        assert opt.clip_grad_norm is None
        with pytest.raises(ValueError, match="needs an optimizer created with clip_grad_norm"):
            opt.last_grad_norm()
        with pytest.raises(ValueError, match="chosen at construction"):
            opt.clip_grad_norm = 1.0
    with vk_adam.AdamW([p], clip_grad_norm=1.0) as opt:
        opt.clip_grad_norm = 2.5
        assert opt.clip_grad_norm == 2.5
        with pytest.raises(ValueError, match="cannot be turned off"):
            opt.clip_grad_norm = None  # type: ignore[assignment]
