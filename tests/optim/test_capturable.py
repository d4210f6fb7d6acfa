"""Captured steps (``capturable=True``, docs/usage.md "Record once, evaluate in a loop"): one
recorded step evaluated any number of times, each evaluation one step, against a float64
reference fed the same gradients and lrs and against torch.optim; the lr between evaluations,
frozen hyperparameters, several steps per evaluation, a schedule on the device, skipped
non-finite steps, state dicts mid-replay, plugin rules, and the refusals."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

import vk_adam
from vk_adam._runtime import kp_features
from vk_adam._runtime._kp import kp_module

from ..conftest import random_grad, scale_error
from ..runtime.test_device_buffers import download, upload

pytestmark = pytest.mark.skipif(
    "region copies" not in kp_features().patches, reason="capturable=True needs vk-adam's kp (region copies)"
)

#: Params after captured steps against float64: the steps' float32 rounding (bias corrections
#: in float32 on the device, as torch's capturable steps) over tens of steps.
TOLERANCE = 2e-5


class Reference:
    """A rule's float64 reference over several params, stepped with given grads and lrs."""

    def __init__(self, rule: vk_adam.UpdateRule, params: Sequence[np.ndarray], **hyper: Any) -> None:
        self.rule, self.hyper = rule, {**rule.defaults, **hyper}
        self.params = [p.astype(np.float64) for p in params]
        self.state = [
            {s.name: np.full(p.shape, s.initial_value) for s in rule.variant_for(self.hyper).state}
            for p in params
        ]
        self.steps = 0

    def step(self, grads: Sequence[np.ndarray], lr: float | None = None) -> None:
        self.steps += 1
        hyper = {**self.hyper, **({"lr": lr} if lr is not None else {})}
        for p, g, s in zip(self.params, grads, self.state, strict=True):
            self.rule.reference(p, g.astype(np.float64), s, hyper, self.steps)


def _kp_params(mgr: Any, values: Sequence[np.ndarray]) -> list[Any]:
    tensors = [mgr.tensor(v.copy()) for v in values]
    for t, v in zip(tensors, values, strict=True):
        upload(mgr, t, v)
    return tensors


def _write(tensors: Sequence[Any], values: Sequence[np.ndarray]) -> None:
    """Fill the gradient tensors' host copies; the recorded upload takes them to the device."""
    for t, v in zip(tensors, values, strict=True):
        t.data()[:] = v


def _recorded(mgr: Any, opt: vk_adam.Optimizer, grads: Sequence[Any], steps: int = 1) -> Any:
    """A sequence that uploads ``grads`` and holds ``steps`` captured steps on them."""
    kp = kp_module()
    seq = mgr.sequence()
    seq.record(kp.OpTensorSyncDevice(list(grads)))
    for _ in range(steps):
        assert opt.record_step(seq, list(grads)) == 0
    return seq


@pytest.mark.parametrize(
    ("name", "hyper"),
    [
        ("adamw", {"lr": 3e-3, "weight_decay": 0.1}),
        ("adam", {"lr": 1e-2, "weight_decay": 0.01, "amsgrad": True}),
        ("adam", {"lr": 1e-2, "betas": (0.5, 0.9999), "maximize": True}),
        ("sgd", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-3}),
        ("sgd", {"lr": 0.05, "momentum": 0.5, "dampening": 0.25}),
        ("sgd", {"lr": 0.05}),
    ],
)
def test_one_recording_evaluated_many_times_equals_float64_and_torch(rng, kp_manager, name, hyper):
    """Each evaluation of one recording is one step: three params (three dispatches a step), fresh
    gradients every evaluation; float64 and torch.optim agree, and the device counts the steps."""
    torch = pytest.importorskip("torch")
    mgr, n_steps = kp_manager, 25
    shapes = [(300,), (17, 5), (1,)]
    init = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    params = _kp_params(mgr, [p.reshape(-1) for p in init])
    grads = _kp_params(mgr, [np.zeros(int(np.prod(s)), np.float32) for s in shapes])
    rule = vk_adam.default_registry().get(name)
    ref = Reference(rule, [p.reshape(-1) for p in init], **hyper)
    tparams = [torch.tensor(p.reshape(-1).astype(np.float64), requires_grad=True) for p in init]
    tclass = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam, "sgd": torch.optim.SGD}[name]
    topt = tclass(tparams, **hyper)
    # float32's rounding is relative to the values a param held on the way, not to where it ends:
    # the one-element param may end near zero, so each error is scaled by the param's largest
    # magnitude over the steps (the float64 reference's)
    peak = [float(np.max(np.abs(p))) for p in init]
    with vk_adam.create(name, params, manager=mgr, capturable=True, **hyper) as opt:
        seq = _recorded(mgr, opt, grads)
        for _ in range(n_steps):
            g = [random_grad(rng, (int(np.prod(s)),)) for s in shapes]
            _write(grads, g)
            seq.eval()
            ref.step(g)
            peak = [max(m, float(np.max(np.abs(r)))) for m, r in zip(peak, ref.params, strict=True)]
            for t, gi in zip(tparams, g, strict=True):
                t.grad = torch.tensor(gi.astype(np.float64))
            topt.step()
        assert opt.state_dict()["state"][0]["step"] == n_steps
        for k, param in enumerate(params):
            got = download(mgr, param)
            assert scale_error(got, ref.params[k], peak[k]) < TOLERANCE, k
            assert scale_error(got, tparams[k].detach().numpy(), peak[k]) < TOLERANCE, k
        seq.destroy()
    for t in [*params, *grads]:
        t.destroy()


def test_a_thousand_evaluations_with_a_new_lr_each(rng, kp_manager):
    """1,000 evaluations of one recording; a scheduler sets a new lr before each (no
    re-recording), and every step takes it: float64 fed the same lrs agrees."""
    mgr, n_steps = kp_manager, 1000
    init = rng.standard_normal(64).astype(np.float32)
    (param,) = _kp_params(mgr, [init])
    (grad,) = _kp_params(mgr, [np.zeros(64, np.float32)])
    ref = Reference(vk_adam.default_registry().get("adamw"), [init], lr=1e-3)
    with vk_adam.AdamW([param], manager=mgr, lr=1e-3, capturable=True) as opt:
        sched = vk_adam.schedules.CosineDecay(opt, warmup_steps=50, total_steps=n_steps)
        seq = _recorded(mgr, opt, [grad])
        for _ in range(n_steps):
            g = random_grad(rng, (64,))
            _write([grad], [g])
            lr = opt.param_groups[0]["lr"]
            seq.eval()
            ref.step([g], lr=lr)
            sched.step()
        sd = opt.state_dict()
        assert sd["state"][0]["step"] == n_steps
        assert sd["param_groups"][0]["lr"] == sched.get_last_lr()[0]
        assert scale_error(download(mgr, param), ref.params[0]) < TOLERANCE
        seq.destroy()
    for t in (param, grad):
        t.destroy()


def test_several_steps_per_evaluation_and_step_share_one_count(rng, kp_manager):
    """Three steps recorded one after another are three steps per evaluation; ``step()`` between
    evaluations counts on the same clock; float64 fed the same gradients agrees."""
    mgr = kp_manager
    init = rng.standard_normal(500).astype(np.float32)
    (param,) = _kp_params(mgr, [init])
    grads = _kp_params(mgr, [np.zeros(500, np.float32) for _ in range(3)])
    ref = Reference(vk_adam.default_registry().get("adamw"), [init], lr=1e-2)
    kp = kp_module()
    with vk_adam.AdamW([param], manager=mgr, lr=1e-2, capturable=True) as opt:
        seq = mgr.sequence()
        seq.record(kp.OpTensorSyncDevice(grads))
        for g in grads:
            opt.record_step(seq, [g])
        for round_ in range(4):
            values = [random_grad(rng, (500,)) for _ in grads]
            _write(grads, values)
            seq.eval()
            for v in values:
                ref.step([v])
            direct = random_grad(rng, (500,))
            handle = opt.step([direct])
            ref.step([direct])
            assert handle.step == 4 * (round_ + 1) and not handle.skipped
        assert opt.state_dict()["state"][0]["step"] == 16
        assert scale_error(download(mgr, param), ref.params[0]) < TOLERANCE
        seq.destroy()
    for t in (param, *grads):
        t.destroy()


def test_a_state_dict_taken_mid_replay_resumes_in_a_new_optimizer(rng, kp_manager):
    """Stop after 7 of 15 evaluations, save, load into a new capturable optimizer, record again:
    the result equals 15 uninterrupted evaluations bit for bit."""
    mgr = kp_manager
    init = rng.standard_normal(1000).astype(np.float32)
    a, b = _kp_params(mgr, [init, init])
    (grad,) = _kp_params(mgr, [np.zeros(1000, np.float32)])
    values = [random_grad(rng, (1000,)) for _ in range(15)]
    kw: dict[str, Any] = {"manager": mgr, "lr": 2e-3, "capturable": True, "state_dtype": "bfloat16"}
    with vk_adam.AdamW([a], **kw) as whole:
        seq = _recorded(mgr, whole, [grad])
        for v in values:
            _write([grad], [v])
            seq.eval()
        seq.destroy()
    with vk_adam.AdamW([b], **kw) as first:
        seq = _recorded(mgr, first, [grad])
        for v in values[:7]:
            _write([grad], [v])
            seq.eval()
        saved = first.state_dict()
        seq.destroy()
    assert saved["state"][0]["step"] == 7
    with vk_adam.AdamW([b], **kw) as resumed:
        resumed.load_state_dict(saved)
        assert resumed.state_dict()["state"][0]["step"] == 7
        seq = _recorded(mgr, resumed, [grad])
        for v in values[7:]:
            _write([grad], [v])
            seq.eval()
        assert resumed.state_dict()["state"][0]["step"] == 15
        seq.destroy()
    assert np.array_equal(download(mgr, b), download(mgr, a))
    for t in (a, b, grad):
        t.destroy()


@pytest.mark.parametrize("clip", [None, 1.0])
def test_an_evaluation_with_an_inf_gradient_is_skipped_and_not_counted(rng, kp_manager, clip):
    """skip_nonfinite in a captured step: an inf (or NaN) gradient changes nothing and is not
    counted, as torch's GradScaler skips a step; the next evaluations go on from the right step
    (with clipping too: its pass flags the step)."""
    mgr = kp_manager
    init = rng.standard_normal(400).astype(np.float32)
    (param,) = _kp_params(mgr, [init])
    (grad,) = _kp_params(mgr, [np.zeros(400, np.float32)])
    ref = Reference(vk_adam.default_registry().get("adamw"), [init], lr=1e-2)
    kw: dict[str, Any] = {"manager": mgr, "lr": 1e-2, "capturable": True, "skip_nonfinite": True}
    with vk_adam.AdamW([param], clip_grad_norm=clip, **kw) as opt:
        seq = _recorded(mgr, opt, [grad])
        for k in range(9):
            g = random_grad(rng, (400,))
            if k in (0, 4, 5):
                g[rng.integers(400)] = np.inf if k != 5 else np.nan
                before = download(mgr, param)
                _write([grad], [g])
                seq.eval()
                assert np.array_equal(download(mgr, param), before)
                continue
            _write([grad], [g])
            seq.eval()
            if clip is not None:  # the reference takes the clipped gradient
                g = g * min(1.0, clip / (float(np.linalg.norm(g.astype(np.float64))) + 1e-6))
            ref.step([g])
        assert opt.state_dict()["state"][0]["step"] == ref.steps == 6
        assert scale_error(download(mgr, param), ref.params[0]) < TOLERANCE
        handle = opt.step([np.full(400, np.inf, np.float32)])
        assert handle.skipped and opt.state_dict()["state"][0]["step"] == 6
        seq.destroy()
    for t in (param, grad):
        t.destroy()


def test_a_schedule_on_the_device_gives_each_recorded_step_its_lr(rng, kp_manager):
    """A recording of two steps per evaluation under a cosine schedule with warmup running on
    the device: every step takes the schedule's lr for its number; handed back, the host's
    scheduler goes on from the right step."""
    mgr = kp_manager
    init = rng.standard_normal(256).astype(np.float32)
    (param,) = _kp_params(mgr, [init])
    grads = _kp_params(mgr, [np.zeros(256, np.float32), np.zeros(256, np.float32)])
    ref = Reference(vk_adam.default_registry().get("adamw"), [init])
    kp = kp_module()
    with vk_adam.AdamW([param], manager=mgr, lr=1e-2, capturable=True) as opt:
        sched = vk_adam.schedules.CosineDecay(opt, warmup_steps=5, total_steps=30, min_lr_ratio=0.1)
        host_lrs = [sched.lrs_at(k)[0] for k in range(40)]
        # two steps on the host's lr first, then the device takes over from step 3
        for _ in range(2):
            g = random_grad(rng, (256,))
            ref.step([g], lr=opt.param_groups[0]["lr"])
            opt.step([g])
            sched.step()
        opt.schedule_on_device(sched)
        with pytest.raises(ValueError, match="runs on the device"):
            opt.param_groups[0]["lr"] = 1.0
        seq = mgr.sequence()
        seq.record(kp.OpTensorSyncDevice(grads))
        for g in grads:
            opt.record_step(seq, [g])
        for _ in range(15):
            values = [random_grad(rng, (256,)) for _ in grads]
            _write(grads, values)
            seq.eval()
            for v in values:
                ref.step([v], lr=host_lrs[ref.steps])  # step t takes the schedule's lr at t - 1
        assert opt.state_dict()["param_groups"][0]["lr"] == pytest.approx(host_lrs[32])
        opt.schedule_on_device(None)
        assert sched.last_epoch == 32 and opt.param_groups[0]["lr"] == host_lrs[32]
        g = random_grad(rng, (256,))
        opt.step([g])
        ref.step([g], lr=host_lrs[32])
        assert scale_error(download(mgr, param), ref.params[0]) < TOLERANCE
        seq.destroy()
    for t in (param, *grads):
        t.destroy()


def test_storage_formats_and_windows_replay(rng, kp_manager, monkeypatch):
    """8-bit and bf16 state, and a buffer bound in windows (several dispatches per step): each
    evaluation of the recording is the step ``step()`` takes."""
    from .test_windows import limit_bindings

    mgr = kp_manager
    n = 3000
    init = rng.standard_normal(n).astype(np.float32)
    for state_dtype, limit in (("int8-blockwise", None), ("bfloat16", 4096), ("float32", 4096)):
        limit_bindings(monkeypatch, limit)
        a, b = _kp_params(mgr, [init, init])
        (grad,) = _kp_params(mgr, [np.zeros(n, np.float32)])
        kw: dict[str, Any] = {"manager": mgr, "lr": 1e-2, "state_dtype": state_dtype}
        with vk_adam.AdamW([a], **kw) as plain, vk_adam.AdamW([b], capturable=True, **kw) as captured:
            if limit is not None:
                assert captured.dispatches_per_step() > 1
            seq = _recorded(mgr, captured, [grad])
            for _ in range(6):
                g = random_grad(rng, (n,))
                _write([grad], [g])
                seq.eval()
                plain.step([g])
            assert captured.state_dict()["state"][0]["step"] == 6
            assert scale_error(download(mgr, b), download(mgr, a)) < TOLERANCE, state_dtype
            seq.destroy()
        for t in (a, b, grad):
            t.destroy()


def test_the_lion_plugin_replays(rng, kp_manager):
    """A third-party rule (the Lion plugin, through the registry) declares capturable; N
    evaluations of one recording equal N steps of its float64 reference."""
    pytest.importorskip("vk_adam_lion")
    mgr = kp_manager
    init = rng.standard_normal(700).astype(np.float32)
    (param,) = _kp_params(mgr, [init])
    (grad,) = _kp_params(mgr, [np.zeros(700, np.float32)])
    rule = vk_adam.default_registry().get("lion")
    assert rule.capturable
    ref = Reference(rule, [init], lr=1e-3, weight_decay=0.1)
    with vk_adam.create("lion", [param], manager=mgr, capturable=True, lr=1e-3, weight_decay=0.1) as opt:
        seq = _recorded(mgr, opt, [grad])
        for k in range(12):
            if k == 6:
                opt.param_groups[0]["lr"] = 3e-3
            g = random_grad(rng, (700,))
            _write([grad], [g])
            seq.eval()
            ref.step([g], lr=opt.param_groups[0]["lr"])
        assert scale_error(download(mgr, param), ref.params[0]) < TOLERANCE
        seq.destroy()
    for t in (param, grad):
        t.destroy()


def test_a_recording_freezes_every_hyperparameter_but_lr(rng, kp_manager):
    """Before any recording, step() takes a changed beta; once a captured step is recorded, a
    change raises when it is set (and clip_grad_norm's too); lr still changes; nothing half-done."""
    mgr = kp_manager
    (param,) = _kp_params(mgr, [rng.standard_normal(64).astype(np.float32)])
    (grad,) = _kp_params(mgr, [random_grad(rng, (64,))])
    with vk_adam.AdamW([param], manager=mgr, capturable=True, clip_grad_norm=1.0) as opt:
        opt.param_groups[0]["betas"] = (0.8, 0.99)
        opt.step([grad])
        seq = _recorded(mgr, opt, [grad])
        for key, value in (("betas", (0.9, 0.999)), ("eps", 1e-6), ("weight_decay", 0.0), ("amsgrad", True)):
            with pytest.raises(ValueError, match=f"{key} of param group 0 cannot change"):
                opt.param_groups[0][key] = value
        assert opt.param_groups[0]["betas"] == (0.8, 0.99) and opt.param_groups[0]["eps"] == 1e-8
        opt.param_groups[0]["betas"] = (0.8, 0.99)  # the same value is no change
        with pytest.raises(ValueError, match="clip_grad_norm cannot change"):
            opt.clip_grad_norm = 2.0
        with pytest.raises(ValueError, match="Invalid learning rate"):
            opt.param_groups[0]["lr"] = -1.0
        opt.param_groups[0]["lr"] = 0.0
        before = download(mgr, param)
        seq.eval()  # lr 0 and decoupled decay lr * wd = 0: the param stays
        assert np.array_equal(download(mgr, param), before)
        saved = opt.state_dict()
        saved["param_groups"][0]["eps"] = 1e-3
        with pytest.raises(ValueError, match="eps"):
            opt.load_state_dict(saved)
        assert opt.state_dict()["state"][0]["step"] == 2
        seq.destroy()
    for t in (param, grad):
        t.destroy()


def _not_capturable(rule: vk_adam.UpdateRule) -> vk_adam.UpdateRule:
    return dataclasses.replace(rule, name="adamw_push_only", capturable_constants=None)


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda mgr, p: vk_adam.AdamW([np.zeros(8, np.float32)], capturable=True), TypeError, "NumPy params"),
        (
            lambda mgr, p: vk_adam.Optimizer(
                [p], _not_capturable(vk_adam.default_registry().get("adamw")), manager=mgr, capturable=True
            ),
            ValueError,
            "rule 'adamw_push_only' does not declare captured steps",
        ),
        (
            lambda mgr, p: vk_adam.AdamW([p], manager=mgr, capturable=1),
            TypeError,
            "capturable must be True or False",
        ),
    ],
)
def test_refusals_before_anything_is_built(rng, kp_manager, make: Callable[..., Any], error, match):
    (param,) = _kp_params(kp_manager, [rng.standard_normal(8).astype(np.float32)])
    with pytest.raises(error, match=match):
        make(kp_manager, param)
    param.destroy()


def test_zero1_refuses_capturable_by_name():
    from vk_adam.distributed import ZeroRedundancyOptimizer

    with pytest.raises(ValueError, match="capturable=True is not supported by ZeroRedundancyOptimizer"):
        ZeroRedundancyOptimizer([np.zeros(8, np.float32)], capturable=True)


def test_schedule_on_device_needs_capturable(rng, kp_manager):
    (param,) = _kp_params(kp_manager, [rng.standard_normal(8).astype(np.float32)])
    with vk_adam.AdamW([param], manager=kp_manager) as opt:
        sched = vk_adam.schedules.LinearDecay(opt, total_steps=10)
        with pytest.raises(ValueError, match="capturable=True"):
            opt.schedule_on_device(sched)
    with vk_adam.AdamW([param], manager=kp_manager, capturable=True) as opt:
        hard = vk_adam.schedules.CosineWithHardRestarts(opt, total_steps=10)
        with pytest.raises(ValueError, match="cannot run on the device"):
            opt.schedule_on_device(hard)
    param.destroy()


def test_record_step_on_a_gradient_buffer_nothing_was_given_is_refused(rng, kp_manager):
    """docs/usage.md's newcomer trap: the app uploads its own gradient tensor and records
    ``opt.record_step(seq)``, which would step on the optimizer's never-written gradient buffer."""
    mgr = kp_manager
    (param,) = _kp_params(mgr, [rng.standard_normal(32).astype(np.float32)])
    for capturable in (False, True):
        with vk_adam.AdamW([param], manager=mgr, capturable=capturable) as opt:
            seq = mgr.sequence()
            with pytest.raises(ValueError, match=r"record_step\(sequence, \[grads\]\).*grad_buffer"):
                opt.record_step(seq)
            opt.grad_buffer()  # taken: the app writes it
            opt.record_step(seq)
            seq.destroy()
    param.destroy()
