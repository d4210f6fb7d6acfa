"""Learning-rate schedules (vk_adam.schedules): the lrs of torch.optim.lr_scheduler and of the
transformers schedule functions, torch's protocol and state dicts, bad input refused with
nothing changed, steps recorded with record_step each at their own lr, and checkpoints that
resume a schedule bit-exactly."""

from __future__ import annotations

import json
import math
from functools import partial
from typing import Any

import numpy as np
import pytest
import torch
from torch.optim import lr_scheduler as torch_sched

import vk_adam
import vk_adam.schedules as S
from vk_adam._rules.builtin import ADAMW
from vk_adam.lora import CheckpointError, load_checkpoint, save_checkpoint

from ..conftest import random_grad, scale_error
from ..lora.test_lora_hardening import read_checkpoint, small_adapter, train, write_signed
from ..runtime.test_device_buffers import download, upload

STEPS = 200


@pytest.fixture
def seed(vk_seed: int) -> int:
    """This test's seed (tests/conftest.py: derived from VK_ADAM_TEST_SEED and the test's id)."""
    return vk_seed


LRS = (0.1, 3e-4)  # two param groups with different initial lrs


def vk_optimizer(lrs: tuple[float, ...] = LRS) -> vk_adam.Optimizer:
    """A vk-adam SGD over one small param per group (each group's lr scheduled on its own)."""
    groups = [{"params": [np.zeros(8, np.float32)], "lr": lr} for lr in lrs]
    return vk_adam.SGD(groups)


def torch_optimizer(lrs: tuple[float, ...] = LRS) -> torch.optim.Optimizer:
    return torch.optim.SGD([{"params": [torch.zeros(1, requires_grad=True)], "lr": lr} for lr in lrs])


def run_both(vk: S.LRScheduler, ref: Any, steps: int, step_opt: bool = True) -> tuple[list[Any], list[Any]]:
    """The lrs of every step 0..steps-1, as each scheduler sets them in its optimizer's groups."""
    got, want = [], []
    opt = vk.optimizer
    grads = [np.ones(8, np.float32) for _ in opt.param_groups]
    for _ in range(steps):
        assert vk.get_last_lr() == [g["lr"] for g in opt.param_groups]
        got.append([g["lr"] for g in opt.param_groups])
        want.append([g["lr"] for g in ref.optimizer.param_groups])
        if step_opt:
            opt.step(grads)  # the optimizer accepts (and checks) every scheduled lr
        ref.optimizer.step()
        ref.step()
        vk.step()
    return got, want


# -- parity with torch.optim.lr_scheduler ---------------------------------------------------------

TORCH_CASES = {
    # name: (vk-adam scheduler, torch scheduler, lrs); the definitions coincide
    "LambdaLR": (
        lambda o: S.LambdaLR(o, lambda s: 0.97**s + 0.01 * (s % 7)),
        lambda o: torch_sched.LambdaLR(o, lambda s: 0.97**s + 0.01 * (s % 7)),
        LRS,
    ),
    "LambdaLR per group": (
        lambda o: S.LambdaLR(o, [lambda s: 1 / (1 + s), lambda s: math.exp(-s / 50)]),
        lambda o: torch_sched.LambdaLR(o, [lambda s: 1 / (1 + s), lambda s: math.exp(-s / 50)]),
        LRS,
    ),
    "LinearLR": (
        lambda o: S.LinearWarmup(o, warmup_steps=37, start_factor=0.25),
        lambda o: torch_sched.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=37),
        LRS,
    ),
    "ConstantLR": (
        lambda o: S.Constant(o),
        lambda o: torch_sched.ConstantLR(o, factor=1.0, total_iters=10),
        LRS,
    ),
    "CosineAnnealingLR": (  # 200 steps over T_max=60: the cosine goes on past the end in both
        lambda o: S.CosineDecay(o, total_steps=60),
        lambda o: torch_sched.CosineAnnealingLR(o, T_max=60),
        LRS,
    ),
    "CosineAnnealingLR eta_min": (  # eta_min is absolute in torch: one group
        lambda o: S.CosineDecay(o, total_steps=150, min_lr_ratio=0.1),
        lambda o: torch_sched.CosineAnnealingLR(o, T_max=150, eta_min=0.1 * 0.05),
        (0.05,),
    ),
}


@pytest.mark.parametrize("case", list(TORCH_CASES))
def test_lrs_match_torch_lr_scheduler(case):
    """Every step's lr within 1e-12 of torch's, relative to the group's initial lr (torch's
    LinearLR and CosineAnnealingLR update recursively; vk-adam uses the closed form, which
    torch documents as their definition). LambdaLR is the same product, bit for bit."""
    make_vk, make_torch, lrs = TORCH_CASES[case]
    with vk_optimizer(lrs) as opt:
        vk = make_vk(opt)
        got, want = run_both(vk, make_torch(torch_optimizer(lrs)), STEPS)
        assert all(g["initial_lr"] == lr for g, lr in zip(opt.param_groups, lrs, strict=True))
    worst = max(
        abs(a - b) / lr
        for gs, ws in zip(got, want, strict=True)
        for a, b, lr in zip(gs, ws, lrs, strict=True)
    )
    assert worst <= 1e-12, worst
    if case.startswith("LambdaLR"):
        assert got == want


# -- parity with transformers' schedule functions ------------------------------------------------
#
# transformers is not a dependency: its lr_lambda functions are reproduced here from its source
# (src/transformers/optimization.py), each as get_*_schedule* hands it to torch's LambdaLR.


def _get_constant_lambda(_=None):  # get_constant_schedule
    return 1


def _get_constant_schedule_with_warmup_lr_lambda(current_step: int, *, num_warmup_steps: int):
    if current_step < num_warmup_steps:
        return float(current_step) / float(max(1.0, num_warmup_steps))
    return 1.0


def _get_linear_schedule_with_warmup_lr_lambda(
    current_step: int, *, num_warmup_steps: int, num_training_steps: int
):
    if current_step < num_warmup_steps:
        return float(current_step) / float(max(1, num_warmup_steps))
    return max(
        0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps))
    )


def _get_cosine_schedule_with_warmup_lr_lambda_legacy(
    current_step: int, *, num_warmup_steps: int, num_training_steps: int, num_cycles: float
):  # get_cosine_schedule_with_warmup, before min_lr_rate was added
    if current_step < num_warmup_steps:
        return float(current_step) / float(max(1, num_warmup_steps))
    progress = float(current_step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * float(num_cycles) * 2.0 * progress)))


def _get_cosine_schedule_with_warmup_lr_lambda(
    current_step: int,
    *,
    num_warmup_steps: int,
    num_training_steps: int,
    num_cycles: float,
    min_lr_rate: float = 0.0,
):  # get_cosine_schedule_with_warmup and get_cosine_with_min_lr_schedule_with_warmup
    if current_step < num_warmup_steps:
        return float(current_step) / float(max(1, num_warmup_steps))
    progress = float(current_step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
    factor = 0.5 * (1.0 + math.cos(math.pi * float(num_cycles) * 2.0 * progress))
    factor = factor * (1 - min_lr_rate) + min_lr_rate
    return max(0, factor)


def _get_cosine_with_hard_restarts_schedule_with_warmup_lr_lambda(
    current_step: int, *, num_warmup_steps: int, num_training_steps: int, num_cycles: int
):  # get_cosine_with_hard_restarts_schedule_with_warmup
    if current_step < num_warmup_steps:
        return float(current_step) / float(max(1, num_warmup_steps))
    progress = float(current_step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
    if progress >= 1.0:
        return 0.0
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * ((float(num_cycles) * progress) % 1.0))))


W, T = 17, 200  # warmup and training steps; the runs go 50 steps past T
HF = {"num_warmup_steps": W, "num_training_steps": T}
VK = {"warmup_steps": W, "total_steps": T}
TRANSFORMERS_CASES = {
    "get_constant_schedule": (lambda o: S.Constant(o), _get_constant_lambda),
    "get_constant_schedule_with_warmup": (
        lambda o: S.Constant(o, warmup_steps=W),
        partial(_get_constant_schedule_with_warmup_lr_lambda, num_warmup_steps=W),
    ),
    "get_constant_schedule_with_warmup as LinearWarmup": (
        lambda o: S.LinearWarmup(o, warmup_steps=W),
        partial(_get_constant_schedule_with_warmup_lr_lambda, num_warmup_steps=W),
    ),
    "get_linear_schedule_with_warmup": (
        lambda o: S.LinearDecay(o, **VK),
        partial(_get_linear_schedule_with_warmup_lr_lambda, **HF),
    ),
    "get_linear_schedule_with_warmup, no warmup": (
        lambda o: S.LinearDecay(o, total_steps=T),
        partial(_get_linear_schedule_with_warmup_lr_lambda, num_warmup_steps=0, num_training_steps=T),
    ),
    "get_cosine_schedule_with_warmup": (
        lambda o: S.CosineDecay(o, **VK),
        partial(_get_cosine_schedule_with_warmup_lr_lambda, **HF, num_cycles=0.5),
    ),
    "get_cosine_schedule_with_warmup (legacy formula)": (
        lambda o: S.CosineDecay(o, **VK),
        partial(_get_cosine_schedule_with_warmup_lr_lambda_legacy, **HF, num_cycles=0.5),
    ),
    "get_cosine_schedule_with_warmup num_cycles=1.5": (
        lambda o: S.CosineDecay(o, **VK, num_cycles=1.5),
        partial(_get_cosine_schedule_with_warmup_lr_lambda_legacy, **HF, num_cycles=1.5),
    ),
    "get_cosine_with_min_lr_schedule_with_warmup": (
        lambda o: S.CosineDecay(o, **VK, min_lr_ratio=0.1),
        partial(_get_cosine_schedule_with_warmup_lr_lambda, **HF, num_cycles=0.5, min_lr_rate=0.1),
    ),
    "get_cosine_with_hard_restarts_schedule_with_warmup": (
        lambda o: S.CosineWithHardRestarts(o, **VK, num_cycles=3),
        partial(_get_cosine_with_hard_restarts_schedule_with_warmup_lr_lambda, **HF, num_cycles=3),
    ),
}


@pytest.mark.parametrize("case", list(TRANSFORMERS_CASES))
def test_lrs_match_transformers_schedule_functions_bit_for_bit(case):
    """transformers' lambda on torch's LambdaLR over a torch optimizer, against vk-adam's
    scheduler over a vk-adam optimizer: every step's lr is the same float (warmup, decay, and
    50 steps past num_training_steps)."""
    make_vk, hf_lambda = TRANSFORMERS_CASES[case]
    with vk_optimizer() as opt:
        got, want = run_both(make_vk(opt), torch_sched.LambdaLR(torch_optimizer(), hf_lambda), T + 50)
    assert got == want
    assert got[0] == ([0.0, 0.0] if "warmup" in case and "no warmup" not in case else list(LRS))


# -- torch's protocol and state dicts --------------------------------------------------------------

SCHEDULES = {
    "constant": lambda o: S.Constant(o, warmup_steps=5),
    "linear_warmup": lambda o: S.LinearWarmup(o, warmup_steps=9, start_factor=0.1),
    "linear_decay": lambda o: S.LinearDecay(o, warmup_steps=4, total_steps=30),
    "cosine": lambda o: S.CosineDecay(o, warmup_steps=4, total_steps=30, num_cycles=0.75, min_lr_ratio=0.05),
    "cosine_with_hard_restarts": lambda o: S.CosineWithHardRestarts(
        o, warmup_steps=3, total_steps=30, num_cycles=2
    ),
    "lambda": lambda o: S.LambdaLR(o, [lambda s: 0.9**s, lambda s: 1.0 / (1 + s)]),
}


def lrs_of(sched: S.LRScheduler, steps: int) -> list[list[float]]:
    out = []
    for _ in range(steps):
        sched.step()
        out.append(sched.get_last_lr())
    return out


@pytest.mark.parametrize("kind", list(SCHEDULES))
def test_state_dict_round_trip_resumes_mid_schedule_with_identical_lrs(kind):
    make = SCHEDULES[kind]
    with vk_optimizer() as a, vk_optimizer((0.5, 0.5)) as b, vk_optimizer() as c:
        first = make(a)
        assert first.kind == kind and first.last_epoch == 0
        lrs_of(first, 12)
        sd = json.loads(json.dumps(first.state_dict()))  # plain JSON data
        assert sd == first.state_dict() and sd["kind"] == kind and sd["last_epoch"] == 12
        expected = lrs_of(first, 25)
        # A fresh scheduler on another optimizer (other initial lrs): the state dict sets the
        # schedule, initial_lr and lr of every group, as the next step and record_step read them.
        second = make(b)
        second.load_state_dict(sd)
        assert second.state_dict() == sd
        assert [g["lr"] for g in b.param_groups] == sd["_last_lr"] == second.get_last_lr()
        assert [g["initial_lr"] for g in b.param_groups] == sd["base_lrs"] == list(LRS)
        assert lrs_of(second, 25) == expected
        # torch's other way to resume: last_epoch=k, from the initial_lr a schedule left in the groups.
        make(c)
        resumed = resumed_like(first, c, last_epoch=12)
        assert resumed.last_epoch == 13 and resumed.get_last_lr() == expected[0]
        assert lrs_of(resumed, 24) == expected[1:]


def resumed_like(sched: S.LRScheduler, opt: Any, last_epoch: int) -> S.LRScheduler:
    """A scheduler of ``sched``'s kind and settings on ``opt``, built with ``last_epoch``."""
    if isinstance(sched, S.LambdaLR):
        return S.LambdaLR(opt, sched.lr_lambdas, last_epoch=last_epoch)
    protocol = ("kind", "last_epoch", "base_lrs", "_last_lr")
    settings = {k: v for k, v in sched.state_dict().items() if k not in protocol}
    return type(sched)(opt, **settings, last_epoch=last_epoch)


def test_load_state_dict_restores_the_saved_settings_like_torch():
    with vk_optimizer() as a, vk_optimizer() as b:
        saved = S.CosineDecay(a, warmup_steps=2, total_steps=50)
        lrs_of(saved, 5)
        other = S.CosineDecay(b, warmup_steps=0, total_steps=500)
        other.load_state_dict(saved.state_dict())
        assert (other.warmup_steps, other.total_steps) == (2, 50)
        assert lrs_of(other, 60) == lrs_of(saved, 60)
        assert "CosineDecay(warmup_steps=2, total_steps=50" in repr(other)


def snapshot(opt: Any, sched: S.LRScheduler | None = None) -> Any:
    groups = [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
    return groups, (sched.state_dict() if sched is not None else None)


BAD_ARGUMENTS = [
    (lambda o: S.Constant(o, warmup_steps=-1), ValueError, "warmup_steps must be a whole number from 0"),
    (
        lambda o: S.LinearDecay(o, warmup_steps=10, total_steps=5),
        ValueError,
        r"total_steps \(5\) must be at least warmup_steps \(10\)",
    ),
    (lambda o: S.CosineDecay(o, total_steps=0), ValueError, r"total_steps \(0\) must be at least"),
    (lambda o: S.CosineDecay(o, total_steps=-3), ValueError, "total_steps must be a whole number"),
    (
        lambda o: S.CosineDecay(o, total_steps=10, warmup_steps=1.5),
        TypeError,
        "warmup_steps must be a whole number",
    ),
    (lambda o: S.CosineDecay(o, total_steps=True), TypeError, "total_steps must be a whole number"),
    (lambda o: S.CosineDecay(o, total_steps="10"), TypeError, "total_steps must be a whole number"),
    (lambda o: S.CosineDecay(o, total_steps=10, num_cycles=0), ValueError, r"num_cycles must be in \(0.0"),
    (lambda o: S.CosineDecay(o, total_steps=10, num_cycles=math.nan), ValueError, "num_cycles must be in"),
    (
        lambda o: S.CosineDecay(o, total_steps=10, min_lr_ratio=1.5),
        ValueError,
        r"min_lr_ratio must be in \[0.0, 1.0\]",
    ),
    (
        lambda o: S.CosineWithHardRestarts(o, total_steps=10, num_cycles=0),
        ValueError,
        "num_cycles must be a whole number from 1",
    ),
    (lambda o: S.LinearWarmup(o, warmup_steps=5, start_factor=-0.1), ValueError, "start_factor must be in"),
    (
        lambda o: S.LinearWarmup(o, warmup_steps=5, start_factor=None),
        TypeError,
        "start_factor must be a real number",
    ),
    (lambda o: S.LambdaLR(o, 0.5), TypeError, "lr_lambda must be a function of the step"),
    (
        lambda o: S.LambdaLR(o, [abs]),
        ValueError,
        r"lr_lambda: expected 2 function\(s\), one per param group \(got 1\)",
    ),
    (lambda o: S.LambdaLR(o, lambda s: -1.0), ValueError, "param group 0 the factor float -1.0 at step 0"),
    (lambda o: S.LambdaLR(o, lambda s: math.inf), ValueError, "an lr must be a finite number >= 0"),
    (lambda o: S.LambdaLR(o, lambda s: "1"), ValueError, "the factor str '1' at step 0"),
    (lambda o: S.Constant(o, last_epoch=-2), ValueError, "last_epoch must be a whole number from -1"),
    (lambda o: S.Constant(o, last_epoch=4), ValueError, "param group 0 has no 'initial_lr'"),
    (lambda o: S.Constant(None), TypeError, "optimizer must be a vk-adam optimizer"),
]


@pytest.mark.parametrize("index", range(len(BAD_ARGUMENTS)))
def test_bad_arguments_raise_errors_naming_the_argument_and_change_nothing(index):
    make, error, match = BAD_ARGUMENTS[index]
    with vk_optimizer() as opt:
        before = snapshot(opt)
        with pytest.raises(error, match=match):
            make(opt)
        assert snapshot(opt) == before  # no initial_lr added, no lr set


def test_a_bad_lr_at_a_later_step_changes_nothing():
    with vk_optimizer() as opt:
        sched = S.LambdaLR(opt, lambda s: 1.0 if s < 3 else math.nan)
        lrs_of(sched, 2)
        before = snapshot(opt, sched)
        with pytest.raises(ValueError, match="factor float nan at step 3"):
            sched.step()
        assert snapshot(opt, sched) == before and sched.last_epoch == 2
        with pytest.raises(TypeError, match="step must be a whole number"):
            sched.lrs_at(2.0)
        assert sched.lrs_at(2) == list(LRS)


def bad_state_dicts(sd: dict[str, Any]) -> dict[str, Any]:
    return {
        "not a dict": [sd],
        "no kind": {k: v for k, v in sd.items() if k != "kind"},
        "unknown key": {**sd, "verbose": False},
        "other kind": {**sd, "kind": "linear_decay"},
        "last_epoch -1": {**sd, "last_epoch": -1},
        "last_epoch 2.5": {**sd, "last_epoch": 2.5},
        "base_lrs short": {**sd, "base_lrs": sd["base_lrs"][:1]},
        "base_lrs text": {**sd, "base_lrs": ["0.1", 0.1]},
        "base_lrs negative": {**sd, "base_lrs": [-0.1, 0.1]},
        "_last_lr inf": {**sd, "_last_lr": [math.inf, 0.1]},
        "_last_lr not a list": {**sd, "_last_lr": 0.1},
        "total < warmup": {**sd, "warmup_steps": 40, "total_steps": 30},
        "num_cycles 0": {**sd, "num_cycles": 0},
        "min_lr_ratio true": {**sd, "min_lr_ratio": True},
    }


def test_bad_state_dicts_are_refused_and_change_nothing():
    with vk_optimizer() as opt:
        sched = SCHEDULES["cosine"](opt)
        lrs_of(sched, 7)
        sd, before = sched.state_dict(), snapshot(opt, sched)
        for name, bad in bad_state_dicts(sd).items():
            with pytest.raises((TypeError, ValueError)) as caught:
                sched.load_state_dict(bad)
            assert snapshot(opt, sched) == before, name
            assert type(caught.value) in (TypeError, ValueError), name
        with pytest.raises(
            ValueError, match="the state_dict is of a 'linear_decay' schedule; this scheduler is 'cosine'"
        ):
            sched.load_state_dict(bad_state_dicts(sd)["other kind"])
        with pytest.raises(ValueError, match=r"total_steps \(30\) must be at least warmup_steps \(40\)"):
            sched.load_state_dict(bad_state_dicts(sd)["total < warmup"])


def test_the_optimizer_checks_each_scheduled_lr_and_its_state_dict_carries_initial_lr():
    with vk_optimizer() as opt:
        sched = S.LinearDecay(opt, warmup_steps=2, total_steps=4)
        opt.step([np.ones(8, np.float32)] * 2)
        sd = opt.state_dict()
        assert [g["initial_lr"] for g in sd["param_groups"]] == list(LRS)  # as torch's
        opt.param_groups[0]["lr"] = -1.0  # what a broken schedule would set
        with pytest.raises(ValueError, match=r"Invalid learning rate: -1\.0"):
            opt.step([np.ones(8, np.float32)] * 2)
        sched.step()  # the scheduler sets it again
        opt.step([np.ones(8, np.float32)] * 2)


# -- record_step: each recorded step carries its own scheduled lr ----------------------------------


def test_steps_recorded_with_scheduler_steps_between_carry_their_own_lrs(rng, kp_manager):
    """30 AdamW steps recorded into one sequence with scheduler.step() between record_step
    calls (warmup, then cosine decay), one submit; against the float64 reference with each
    step's lr. The same steps at one lr are far off: the lrs really differ per step."""
    mgr = kp_manager
    n, steps = 50_000, 30
    init = rng.standard_normal(n).astype(np.float32)
    param = mgr.tensor(init.copy())
    grads = [random_grad(rng, (n,)) for _ in range(4)]
    gtensors = [mgr.tensor(g) for g in grads]
    for t in [param, *gtensors]:
        upload(mgr, t, t.data().copy())
    seq = mgr.sequence()
    lrs = []
    with vk_adam.AdamW([param], lr=0.05, manager=mgr, zero_grad=False) as opt:
        sched = S.CosineDecay(opt, warmup_steps=5, total_steps=steps)
        for t in range(1, steps + 1):
            lrs.append(opt.param_groups[0]["lr"])
            assert opt.record_step(seq, [gtensors[t % 4]]) == t
            sched.step()
        seq.eval()
        result = download(mgr, param)
    assert lrs[0] == 0.0 and max(lrs) == 0.05 and len(set(lrs)) == steps
    references = {}
    for name, schedule in {"scheduled": lrs, "constant": [0.05] * steps}.items():
        ref = init.astype(np.float64)
        state = {k: np.zeros(n) for k in ADAMW.state_names(ADAMW.defaults)}
        for t in range(1, steps + 1):
            hyper = {**ADAMW.defaults, "lr": schedule[t - 1]}
            ADAMW.reference(ref, grads[t % 4].astype(np.float64), state, hyper, t)
        references[name] = ref
    assert scale_error(result, references["scheduled"]) <= 2e-6
    assert scale_error(result, references["constant"]) > 1e-2
    seq.destroy()
    for t in [param, *gtensors]:
        t.destroy()


# -- checkpoints -------------------------------------------------------------------------------------


def lora_run(seed: int, tmp_path: Any, steps: int, save_at: int | None = None, resume: bool = False) -> Any:
    """A LoRA run with AdamW and a warmup + cosine schedule (HF Trainer's order: optimizer
    step, then scheduler step); returns its params, optimizer state and the lr of each step."""
    adapter = small_adapter(seed)
    data = np.random.default_rng(seed + 1)
    path = tmp_path / "sched.safetensors"
    with adapter.optimizer("adamw", lr=1e-2) as opt:
        sched = S.CosineDecay(opt, warmup_steps=3, total_steps=20)
        start = load_checkpoint(path, adapter, opt, rng=data, scheduler=sched).step if resume else 0
        lrs = []
        for step in range(start, steps):
            lrs.append(opt.param_groups[0]["lr"])
            train(adapter, opt, data, 1)
            sched.step()
            if save_at == step + 1:
                save_checkpoint(path, adapter, opt, rng=data, scheduler=sched)
        return adapter.flat_params.copy(), opt.state_dict(), lrs, sched.state_dict()


def test_checkpoint_resumes_a_schedule_bit_exactly(tmp_path, seed):
    """Train 7 steps, save, train 9 more; against: load the checkpoint (into a fresh adapter,
    optimizer and scheduler) and train 9: identical params, state, lrs and scheduler state."""
    full_params, full_state, full_lrs, full_sched = lora_run(seed, tmp_path, 16, save_at=7)
    params, state, lrs, sched = lora_run(seed, tmp_path, 16, resume=True)
    np.testing.assert_array_equal(params, full_params)
    assert lrs == full_lrs[7:] and len(set(full_lrs)) == 16
    assert sched == full_sched
    for key in ("exp_avg", "exp_avg_sq"):
        np.testing.assert_array_equal(state["state"][0][key], full_state["state"][0][key])
    meta, _ = read_checkpoint(tmp_path / "sched.safetensors")
    assert meta["scheduler"]["kind"] == "cosine" and meta["scheduler"]["last_epoch"] == 7
    assert "initial_lr" not in meta["hyperparameters"]  # the scheduler's base_lrs carry it
    assert meta["hyperparameters"]["lr"] == meta["scheduler"]["_last_lr"][0]


def test_checkpoint_schedule_mismatches_are_refused_and_change_nothing(tmp_path, seed):
    adapter = small_adapter(seed)
    data = np.random.default_rng(seed + 1)
    with adapter.optimizer("adamw", lr=1e-2) as opt, vk_optimizer() as other_opt:
        sched = S.CosineDecay(opt, warmup_steps=2, total_steps=20)
        train(adapter, opt, data, 3)
        lrs_of(sched, 3)
        with_sched = save_checkpoint(tmp_path / "with.safetensors", adapter, opt, rng=data, scheduler=sched)
        without = save_checkpoint(tmp_path / "without.safetensors", adapter, opt, rng=data)
        train(adapter, opt, data, 1)
        sched.step()

        def refused(path: Any, match: str, scheduler: Any) -> None:
            before = (adapter.flat_params.tobytes(), repr(opt.state_dict()), snapshot(opt, sched))
            with pytest.raises(CheckpointError, match=match):
                load_checkpoint(path, adapter, opt, rng=data, scheduler=scheduler)
            assert (adapter.flat_params.tobytes(), repr(opt.state_dict()), snapshot(opt, sched)) == before

        refused(with_sched, r"saved with a learning-rate schedule \('cosine'\); pass scheduler=", None)
        refused(without, "holds no learning-rate schedule .* load it with scheduler=None", sched)
        linear = S.LinearDecay(opt, total_steps=20)  # another kind on the same optimizer
        refused(with_sched, "schedule state does not fit this scheduler .* 'cosine' schedule", linear)
        sched.load_state_dict(sched.state_dict())  # (linear set the lrs; put the cosine's back)
        meta, tensors = read_checkpoint(with_sched)
        edits = bad_state_dicts(meta["scheduler"])
        for name in ("no kind", "last_epoch -1", "base_lrs text", "_last_lr inf", "total < warmup"):
            write_signed(tmp_path / "edited.safetensors", {**meta, "scheduler": edits[name]}, tensors)
            refused(tmp_path / "edited.safetensors", "schedule state does not fit", sched)
        for bad in ([1], "cosine", 5):
            write_signed(tmp_path / "edited.safetensors", {**meta, "scheduler": bad}, tensors)
            refused(tmp_path / "edited.safetensors", "schedule state does not fit", sched)
        # The arguments themselves: TypeError / ValueError, as for the optimizer.
        with pytest.raises(TypeError, match=r"scheduler must be a vk_adam\.schedules scheduler"):
            save_checkpoint(tmp_path / "x.safetensors", adapter, opt, scheduler=torch_sched)
        with pytest.raises(ValueError, match="scheduler schedules another optimizer"):
            load_checkpoint(with_sched, adapter, opt, rng=data, scheduler=S.Constant(other_opt))
        # And the intact file loads: scheduler and lr back at step 3.
        load_checkpoint(with_sched, adapter, opt, rng=data, scheduler=sched)
        assert sched.last_epoch == 3 and opt.param_groups[0]["lr"] == sched.get_last_lr()[0]
        assert not (tmp_path / "x.safetensors").exists()
