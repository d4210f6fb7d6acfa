"""ZeRO-1 across real processes: torchrun (gloo) and mpirun (Open MPI, mpi4py), 2, 3 and 4 ranks
on lavapipe, uneven shards, against one process's vk-adam optimizer stepped with the mean
gradient and (fp32) a float64 reference.

Each job is tests/distributed/zero1_worker.py on every rank; the ranks write what they saw to a temp dir and
the test compares it here. Every rank must hold the same params bit for bit. ZeRO-1 must equal
one process bit for bit, in every storage format, when its mean gradient is the same bits: with
gradients whose float32 sum is exact in any order (``exact_mean``), or with random ones and no
clipping (the exchange adds in rank order, as ``mean_grad`` does). With clipping, whose norm is
reduced shard by shard, within 1e-6 of the tensor's scale (plus ``compressed_state_drift``, and
``rounding_bound`` for 16-bit state). Each case also tries bad input on one rank (all ranks raise
the same error, nothing changes), and some a checkpoint round trip in the middle (bit-exact
resume). The failure tests check that a job whose rank raises or hangs ends in bounded time.

Sizes are small (lavapipe on 2 cores; 4 ranks each open a device). Seeds are printed.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")

import vk_adam
from vk_adam.schedules import CosineDecay

from ..conftest import assert_same_refusals, gloo_world_of_one, scale_error
from . import zero1_worker as worker

WORKER = str(Path(worker.__file__).resolve())
HAS_MPI = shutil.which("mpirun") is not None
try:
    import mpi4py  # noqa: F401
except ImportError:
    HAS_MPI = False
needs_mpi = pytest.mark.skipif(not HAS_MPI, reason="needs mpirun (Debian openmpi-bin) and mpi4py")

# Uneven sizes: group lengths (64-aligned, or 256 for 8-bit state) that no world size divides.
SHAPES = [[(33, 7), (130,)], [(5, 4, 3), (300,)]]
BIG = [[(70, 90), (1000,), (17,)]]  # 7,488 elements (7,680 with 8-bit blocks): 8-bit state

CASES: dict[str, dict[str, Any]] = {
    # fp32, two groups with their own lr, global-norm clipping, a cosine schedule; random means
    "adamw-clip-groups": {
        "rule": "adamw",
        "groups": SHAPES,
        "group_lr": [3e-3, 1e-2],
        "options": {"lr": 3e-3, "clip_grad_norm": 1.0},
        "schedule": True,
        "steps": 4,
        "bad_step": 1,
        "resume_at": 2,
        "float64": True,
    },
    # bf16 params with stochastic rounding, 8-bit state, a NaN step skipped: bit-exact
    "adamw-bf16-sr-int8": {
        "rule": "adamw",
        "groups": BIG,
        "dtype": "bfloat16",
        "options": {
            "lr": 1e-2,
            "state_dtype": "int8-blockwise",
            "stochastic_rounding": True,
            "seed": 7,
            "skip_nonfinite": True,
        },
        "exact_mean": True,
        "steps": 3,
        "nan_step": 1,
    },
    # SGD with Nesterov momentum, fp16 params with a master copy, bf16 state, loaded from a
    # state dict of one process's optimizer: bit-exact
    "sgd-fp16-master-load": {
        "rule": "sgd",
        "groups": SHAPES,
        "dtype": "float16",
        "options": {"lr": 0.05, "momentum": 0.9, "nesterov": True, "state_dtype": "bfloat16"},
        "exact_mean": True,
        "steps": 3,
        "bad_step": 2,
        "load_single": 2,
    },
    # a plugin rule: bit-exact
    "lion-plugin": {
        "rule": "lion",
        "groups": SHAPES,
        "options": {"lr": 1e-3, "weight_decay": 0.1},
        "exact_mean": True,
        "steps": 3,
        "bad_step": 0,
    },
    # AMSGrad with L2 decay, bf16 state, clipping: random means
    "adam-amsgrad-clip": {
        "rule": "adam",
        "groups": SHAPES,
        "options": {
            "lr": 1e-2,
            "amsgrad": True,
            "weight_decay": 0.01,
            "state_dtype": "bfloat16",
            "clip_grad_norm": 5.0,
        },
        "steps": 3,
    },
    # 2 blocks for 3 ranks: the last rank owns nothing, yet takes part (and refuses bad input)
    "adamw-tiny-empty-shard": {
        "rule": "adamw",
        "groups": [[(10,), (3,)]],
        "options": {"lr": 1e-2, "clip_grad_norm": 1.0},
        "steps": 3,
        "bad_step": 1,
        "float64": True,
    },
    # bf16 params with an fp32 master copy and 8-bit state, two groups, checkpoint in the middle
    "adamw-bf16-master-int8-resume": {
        "rule": "adamw",
        "groups": [BIG[0], [(64, 70)]],
        "dtype": "bfloat16",
        "options": {"lr": 3e-3, "state_dtype": "int8-blockwise"},
        "exact_mean": True,
        "steps": 4,
        "bad_step": 3,
        "resume_at": 2,
    },
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # 2 cores: one lavapipe thread per rank; close each rank's device at once at exit
    env.update(LP_NUM_THREADS="1", OMP_NUM_THREADS="1", VK_ADAM_DEVICE_LINGER="0", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
    return env


def launch(
    launcher: str,
    world: int,
    config: dict[str, Any],
    out: Path,
    *,
    timeout: float = 300,
    gloo_timeout: float = 60,
    mpi_timeout: float | None = None,
) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run the worker on ``world`` ranks; return the finished job and its wall time."""
    out.mkdir(parents=True, exist_ok=True)
    args = [WORKER, launcher, json.dumps(config), str(out)]
    if launcher == "torch":
        port = str(_free_port())
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(world)]
        cmd += ["--master_addr", "127.0.0.1", "--master_port", port, *args, str(gloo_timeout)]
    else:  # python -m mpi4py: an exception on any rank aborts the whole job (MPI_Abort)
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", str(world)]
        cmd += ["--timeout", str(int(mpi_timeout))] if mpi_timeout else []
        cmd += [sys.executable, "-m", "mpi4py", *args]
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env(), check=False)
    return done, time.perf_counter() - started


def _flat(params: list[list[np.ndarray]]) -> list[np.ndarray]:
    return [p for group in params for p in group]


def mean_grad(config: dict[str, Any], world: int, t: int) -> list[np.ndarray]:
    """The mean of the ranks' gradients as the transports compute it (gloo's and MPI's exchange):
    the float32 sum in rank order, divided by the world size in float32, in the params' dtype.

    A float64 sum would differ from it in the last bits of the terms, not of the result: where
    the ranks' gradients nearly cancel, by a large fraction of the mean, and Adam's update,
    which divides by each element's own gradient scale, turns that into a large fraction of lr.
    The rank-order mean leaves the clipping norm's reduction as the one difference, and that
    scales every gradient alike."""
    per_rank = [worker.make_grads(config, r, t) for r in range(world)]
    if t == config.get("nan_step"):
        per_rank[0][0].reshape(-1)[0] = np.nan
    out = []
    for grads in zip(*per_rank, strict=True):
        total = grads[0].astype(np.float32)
        for g in grads[1:]:
            total = total + g.astype(np.float32)
        out.append((total / np.float32(world)).astype(grads[0].dtype))
    return out


def same_bits_as_one_process(config: dict[str, Any]) -> bool:
    """Whether ZeRO-1 must equal one process bit for bit: when the ranks' gradients add up
    exactly (``exact_mean``), or when gloo's or MPI's exchange adds them in rank order as
    ``mean_grad`` does and no clipping norm (reduced shard by shard) scales them."""
    plain = config["options"].get("clip_grad_norm") is None and config.get("backend", "gloo") != "nccl"
    return bool(config.get("exact_mean")) or plain


def compressed_state_drift(config: dict[str, Any]) -> float:
    """How far a float32 param may move from one process's, beyond 1e-6 of its scale, when the
    state is stored in 16 or 8 bits and the mean gradients are not the same bits (clipping).

    A state value on a rounding boundary rounds one step the other way: up to 2^-7 of it in
    bfloat16, carried into later steps (``rounding_bound``). Adam's update is at most about lr,
    and divides m by its bias correction 1 - beta1^t, so at step t the carried roundings of m
    move it by up to about t 2^-7 lr, and those of v (under a square root) by half that: over T
    steps 0.75 T (T + 1) 2^-7 lr. Float32 state needs no drift; the "exact_mean" cases show the
    compressed formats bit for bit."""
    if config["options"].get("state_dtype", "float32") == "float32":
        return 0.0
    steps, lr = config["steps"], float(config["options"].get("lr", 1e-3))
    return 0.75 * steps * (steps + 1) * 2.0**-7 * lr


def single_process(config: dict[str, Any], world: int) -> dict[str, Any]:
    """One process's vk-adam optimizer on the same params, stepped with the mean gradient."""
    params = worker.make_params(config)
    opt = vk_adam.create(config["rule"], worker.param_groups(config, params), **config.get("options", {}))
    sched = (
        CosineDecay(opt, warmup_steps=1, total_steps=config["steps"] + 2) if config.get("schedule") else None
    )
    if config.get("load"):
        opt.load_state_dict(pickle.loads(Path(config["load"]).read_bytes()))
    skipped, lrs, means, history = [], [], [], []
    for t in range(config["steps"]):
        means.append(mean_grad(config, world, t))
        lrs.append([g["lr"] for g in opt.param_groups])
        skipped.append(opt.step(means[-1]).skipped)
        if sched is not None:
            sched.step()
        history.append(opt.state_dict()["state"])
    result = {
        "params": params,
        "state": opt.state_dict(),
        "skipped": skipped,
        "memory": opt.memory_bytes(),
        "lrs": lrs,
        "means": means,
        "history": history,
    }
    if opt.clip_grad_norm is not None:
        result["last_grad_norm"] = opt.last_grad_norm()
    opt.close()
    return result


def float64_reference(config: dict[str, Any], lrs: list[list[float]], means: list[list[np.ndarray]]) -> list:
    """The rule's float64 reference (fp32 params and state), clipping as torch.nn.utils.clip_grad_norm_."""
    rule = vk_adam.list_rules()[config["rule"]]
    params = [[p.astype(np.float64) for p in group] for group in worker.make_params(config)]
    hyper = [{**rule.defaults, **config["options"]} for _ in params]
    hyper = [{k: v for k, v in h.items() if k in rule.defaults} for h in hyper]
    state = [
        [{s.name: np.full(p.shape, s.initial_value) for s in rule.variant_for(h).state} for p in g]
        for g, h in zip(params, hyper, strict=True)
    ]
    max_norm = config["options"].get("clip_grad_norm")
    for t, (lr, grads) in enumerate(zip(lrs, means, strict=True)):
        grads64 = [g.astype(np.float64) for g in grads]
        if max_norm is not None:
            norm = np.sqrt(sum(np.sum(g * g) for g in grads64))
            grads64 = [g * min(1.0, max_norm / (norm + 1e-6)) for g in grads64]
        k = 0
        for gi, group in enumerate(params):
            for pi, p in enumerate(group):
                rule.reference(p, grads64[k], state[gi][pi], {**hyper[gi], "lr": lr[gi]}, t + 1)
                k += 1
    return params


def _close(
    actual: np.ndarray,
    expected: np.ndarray,
    exact: bool,
    what: str,
    drift: float = 0.0,
    history: list[np.ndarray] | None = None,
) -> None:
    """``drift``: the absolute difference a float32 param may take on top of 1e-6 of scale from
    compressed state (below). ``history``: a state's values after each step, the last one being
    ``expected``: float32's scale is their largest, 16 bits' bound ``rounding_bound``."""
    if exact:
        assert actual.dtype == expected.dtype and actual.tobytes() == expected.tobytes(), what
        return
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, what
    a, e = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    if actual.dtype == np.float32:
        # float32's error is relative to the magnitudes the state went through, not to a value
        # that later cancelled down (m of a 3-element param: 0.0287 at a step, 0.0026 at the end)
        seen = [np.abs(np.asarray(h, np.float64)) for h in (history or [])] + [np.abs(e)]
        scale = max(max(float(np.max(x, initial=0.0)) for x in seen), 1e-30)
        assert np.max(np.abs(a - e)) <= 1e-6 * scale + drift, (what, scale_error(a, e), drift)
    else:
        bound = rounding_bound(history if history is not None else [e])
        assert np.all(np.abs(a - e) <= bound), (what, float(np.max(np.abs(a - e) / bound)))


def rounding_bound(history: list[np.ndarray]) -> np.ndarray:
    """How far apart two runs may hold a 16-bit state whose float32 inputs differ in the last bits
    (a clipping norm reduced in another order), given the state's values after each step.

    Each step rounds the state to 16 bits. When the runs' float32 values straddle a rounding
    boundary, they round one step apart: at most one ulp, and an ulp of x is at most 2^-7 |x| in
    bfloat16 (2^-10 in float16). That difference carries into the next step times beta <= 1 (or
    through a max), where the next rounding can add another: with m = 0.9 m + 0.1 g, one ulp at
    0.005 is 1.8 ulps at 0.0026 and may round to 2. So after T steps the runs differ by at most
    the sum over steps of 2^-7 |x_k|, plus each step's float32 noise of its inputs (1e-5 of
    that step's scale, weight decay's share of the params' drift included), times
    (1 - 2^-8)^-(T+1): each rounding error is at most 2^-8 of the value rounded, which is the
    stored value plus that error, and in the other run plus the difference carried in."""
    total = np.zeros_like(np.asarray(history[-1], np.float64))
    for x in history:
        x = np.abs(np.asarray(x, np.float64))
        total += 2.0**-7 * x + 1e-5 * float(np.max(x, initial=0.0))
    return total / (1.0 - 2.0**-8) ** (len(history) + 1)


def check_job(
    launcher: str, config: dict[str, Any], world: int, out: Path, done: subprocess.CompletedProcess[str]
) -> None:
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-6000:])
    ranks = [pickle.loads((out / f"rank{r}.pkl").read_bytes()) for r in range(world)]
    engine = (
        "MPI through mpi4py" if launcher == "mpi" else f"torch.distributed {config.get('backend', 'gloo')}"
    )
    assert all(r["communicator"].startswith(engine) and r["size"] == world for r in ranks)
    exact = same_bits_as_one_process(config)
    # every rank holds the same params, bit for bit
    for other in ranks[1:]:
        for a, b in zip(_flat(other["params"]), _flat(ranks[0]["params"]), strict=True):
            assert a.tobytes() == b.tobytes()
    ref = single_process(config, world)
    drift = compressed_state_drift(config)
    for i, (a, b) in enumerate(zip(_flat(ranks[0]["params"]), _flat(ref["params"]), strict=True)):
        _close(a, b, exact, f"param {i}", drift)
    if config.get("float64"):
        for a, b in zip(
            _flat(ranks[0]["params"]), _flat(float64_reference(config, ref["lrs"], ref["means"])), strict=True
        ):
            assert scale_error(a, b) <= 2e-6, scale_error(a, b)
    # the consolidated state dict is one process's, in layout and (to the tolerance) values
    state = pickle.loads((out / "state.pkl").read_bytes())
    assert state["param_groups"] == ref["state"]["param_groups"]
    assert state["state"].keys() == ref["state"]["state"].keys()
    for i, entry in ref["state"]["state"].items():
        assert state["state"][i].keys() == entry.keys()
        assert state["state"][i]["step"] == entry["step"]
        for key, value in entry.items():
            if key != "step":
                _close(
                    np.asarray(state["state"][i][key]),
                    np.asarray(value),
                    exact,
                    f"state {key} of param {i}",
                    history=[np.asarray(h[i][key]) for h in ref["history"]],
                )
    assert all(r["skipped"] == ref["skipped"] for r in ranks)
    if "last_grad_norm" in ref:
        assert all(
            abs(r["last_grad_norm"] - ref["last_grad_norm"]) <= 1e-6 * ref["last_grad_norm"] for r in ranks
        )
    # each rank holds its shard of the state: together, one process's; each about 1/world of it
    state_bytes = [r["memory"]["state"] + r["memory"]["absmax"] + r["memory"]["master"] for r in ranks]
    single = ref["memory"]["state"] + ref["memory"]["absmax"] + ref["memory"]["master"]
    assert sum(state_bytes) == single
    assert max(state_bytes) <= single / world * 1.5 + 4096, (state_bytes, single)
    assert all(
        r["state_dict_elsewhere"] and "consolidate_state_dict" in r["state_dict_elsewhere"]
        for r in ranks
        if r["rank"] != world - 1
    )
    if config.get("bad_step") is not None:
        _check_refusals(ranks, world)
    if config.get("resume_at") is not None:
        for r in ranks:  # stopped, saved, loaded (after a refused state dict), resumed: bit for bit
            for a, b in zip(_flat(r["resumed_params"]), _flat(r["params"]), strict=True):
                assert a.tobytes() == b.tobytes()
        refusals = [(out / f"resume_refused{r}.txt").read_text() for r in range(world)]
        assert len(set(refusals)) == 1 and f"rank {world - 1}" in refusals[0] and "lacks" in refusals[0], (
            refusals
        )


def _check_refusals(ranks: list[dict[str, Any]], world: int) -> None:
    expected = {
        "bad_shape": ("ValueError", "has shape"),
        "bad_count": ("ValueError", "gradient(s) for"),
        "bad_dtype": ("TypeError", "grad for"),
        "bad_lr": ("ValueError", "Invalid learning rate"),
    }
    assert_same_refusals(ranks, expected)
    assert all(r["unchanged_after_bad_input"] for r in ranks)


def _prepare(config: dict[str, Any], tmp_path: Path, seed: int) -> dict[str, Any]:
    config = dict(config, seed=seed)  # the test's seed (vk_seed), passed to every rank
    if config.get("rule") == "lion" and "lion" not in vk_adam.list_rules():
        pytest.skip("the Lion plugin is not installed (scripts/test.sh installs plugins/vk-adam-lion)")
    if config.get("load_single"):  # a state dict of one process's optimizer, a few steps in
        params = worker.make_params(config)
        opt = vk_adam.create(config["rule"], worker.param_groups(config, params), **config["options"])
        for t in range(config["load_single"]):
            opt.step(mean_grad(config, 1, t + 100))
        config["load"] = str(tmp_path / "single.pkl")
        Path(config["load"]).write_bytes(pickle.dumps(opt.state_dict()))
        opt.close()
    return config


@pytest.mark.exclusive  # needs the machine to itself (scripts/test.sh runs it alone)
@pytest.mark.slow  # multi-process
@pytest.mark.parametrize(
    ("world", "case"), [(2, "adamw-clip-groups"), (3, "adamw-bf16-sr-int8"), (4, "sgd-fp16-master-load")]
)
def test_torchrun_gloo_matches_one_process(tmp_path, vk_seed, world, case):
    launcher = "torch"
    config = _prepare(CASES[case], tmp_path, vk_seed)
    done, seconds = launch(launcher, world, config, tmp_path / "job")
    print(f"{world} ranks, {case}: {seconds:.1f} s")
    check_job(launcher, config, world, tmp_path / "job", done)


def _cuda_gpus() -> int:
    import torch

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


@pytest.mark.exclusive  # needs the machine to itself (scripts/test.sh runs it alone)
@pytest.mark.slow  # multi-process
@pytest.mark.skipif(
    _cuda_gpus() < 2,
    reason="the NCCL transport (CUDA staging tensors) needs torch with CUDA and one GPU per rank, "
    "2 at least: NCCL refuses two ranks on one GPU, and CI has no CUDA",
)
def test_torchrun_nccl_with_cuda_staging_matches_one_process(tmp_path, vk_seed):
    launcher = "torch"
    config = _prepare({**CASES["adamw-bf16-sr-int8"], "backend": "nccl"}, tmp_path, vk_seed)
    done, _ = launch(launcher, 2, config, tmp_path / "job")
    check_job(launcher, config, 2, tmp_path / "job", done)


@pytest.mark.exclusive  # needs the machine to itself (scripts/test.sh runs it alone)
@pytest.mark.slow  # multi-process
@needs_mpi
@pytest.mark.parametrize(
    ("world", "case"),
    [
        (2, "lion-plugin"),
        (3, "adam-amsgrad-clip"),
        (3, "adamw-tiny-empty-shard"),
        (4, "adamw-bf16-master-int8-resume"),
    ],
)
def test_mpirun_matches_one_process(tmp_path, vk_seed, world, case):
    launcher = "mpi"
    config = _prepare(CASES[case], tmp_path, vk_seed)
    done, seconds = launch(launcher, world, config, tmp_path / "job")
    print(f"{world} ranks, {case}: {seconds:.1f} s")
    check_job(launcher, config, world, tmp_path / "job", done)


@pytest.mark.exclusive  # needs the machine to itself (scripts/test.sh runs it alone)
@pytest.mark.slow  # multi-process
@needs_mpi
def test_a_checkpoint_of_3_ranks_loads_at_2(tmp_path, vk_seed):
    """Saved by 3 ranks (torchrun), loaded by 2 (mpirun): re-sharded, then as one process."""
    config = _prepare(
        {**CASES["adamw-bf16-master-int8-resume"], "resume_at": None, "bad_step": None}, tmp_path, vk_seed
    )
    done, _ = launch("torch", 3, config, tmp_path / "three")
    assert done.returncode == 0, done.stderr[-6000:]
    resumed = dict(config, load=str(tmp_path / "three" / "state.pkl"))
    done, _ = launch("mpi", 2, resumed, tmp_path / "two")
    check_job("mpi", resumed, 2, tmp_path / "two", done)


# -- a rank that fails ------------------------------------------------------------------------

#: AdamW, 4 steps; rank 1 raises (or hangs) after its second step.
FAILING = {"rule": "adamw", "groups": SHAPES, "options": {}, "steps": 4, "fail_rank": 1, "fail_step": 1}


@pytest.mark.exclusive  # needs the machine to itself (scripts/test.sh runs it alone)
@pytest.mark.slow  # multi-process
def test_torchrun_job_ends_when_a_rank_raises(tmp_path, vk_seed):
    """torchrun's agent stops every rank when one exits with an error (the others' next
    collective fails at once: gloo sees the connection close)."""
    config = _prepare(FAILING, tmp_path, vk_seed)
    done, seconds = launch("torch", 2, config, tmp_path / "job", timeout=120)
    assert done.returncode != 0
    assert "fails on purpose" in done.stdout + done.stderr
    assert not (tmp_path / "job" / "rank0.pkl").exists()  # rank 0 did not get through
    assert seconds < 90, seconds


@pytest.mark.exclusive  # needs the machine to itself (scripts/test.sh runs it alone)
@pytest.mark.slow  # multi-process
def test_a_rank_that_hangs_times_out_the_others(tmp_path, vk_seed):
    """A rank alive but gone from the collectives: gloo's timeout (init_process_group(timeout=))
    ends the others' wait with an error, and torchrun then ends the job."""
    config = _prepare(FAILING | {"hang": True}, tmp_path, vk_seed)
    done, seconds = launch("torch", 2, config, tmp_path / "job", timeout=200, gloo_timeout=10)
    assert done.returncode != 0
    assert pickle.loads((tmp_path / "job" / "rank1.pkl").read_bytes())["hanging"]
    assert "Timed out waiting 10000ms" in done.stdout + done.stderr
    assert not (tmp_path / "job" / "rank0.pkl").exists()
    assert 10 <= seconds < 150, seconds


@pytest.mark.exclusive  # needs the machine to itself (scripts/test.sh runs it alone)
@pytest.mark.slow  # multi-process
@needs_mpi
def test_mpirun_job_ends_when_a_rank_raises(tmp_path, vk_seed):
    """Under ``python -m mpi4py`` an uncaught exception calls MPI_Abort: mpirun ends every rank."""
    config = _prepare(FAILING, tmp_path, vk_seed)
    done, seconds = launch("mpi", 2, config, tmp_path / "job", timeout=120)
    assert done.returncode != 0
    assert "fails on purpose" in done.stdout + done.stderr
    assert not (tmp_path / "job" / "rank0.pkl").exists()
    assert seconds < 90, seconds


@pytest.mark.exclusive  # needs the machine to itself (scripts/test.sh runs it alone)
@pytest.mark.slow  # multi-process
@needs_mpi
def test_mpirun_timeout_ends_a_job_whose_rank_hangs(tmp_path, vk_seed):
    """MPI collectives have no timeout of their own: mpirun's ``--timeout`` (or
    ``MPIEXEC_TIMEOUT``) bounds the job instead."""
    config = _prepare(FAILING | {"hang": True}, tmp_path, vk_seed)
    done, seconds = launch("mpi", 2, config, tmp_path / "job", timeout=120, mpi_timeout=15)
    assert done.returncode != 0
    assert pickle.loads((tmp_path / "job" / "rank1.pkl").read_bytes())["hanging"]
    assert "time limit" in done.stdout + done.stderr
    assert not (tmp_path / "job" / "rank0.pkl").exists()
    assert 15 <= seconds < 90, seconds


# -- the example and the bench ------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.exclusive  # needs the machine to itself (scripts/test.sh runs it alone)
@pytest.mark.slow  # multi-process
def test_the_example_fine_tunes_on_two_ranks(tmp_path):
    port = str(_free_port())
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_addr",
        "127.0.0.1",
    ]
    cmd += [
        "--master_port",
        port,
        str(ROOT / "examples/zero1/train.py"),
        "--steps",
        "60",
        "--out",
        str(tmp_path),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=_env(), check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    summary = done.stdout.strip().splitlines()[-1]
    assert "params identical on every rank: True" in summary, summary
    first, last = (float(x) for x in summary.split("loss ")[1].split(" (")[0].split(" -> "))
    assert last < first / 3, summary
    # the saved state dict is one process's: a plain vk_adam.AdamW over the params loads it
    params = list(np.load(tmp_path / "params.npz").values())
    with vk_adam.AdamW([np.ascontiguousarray(p) for p in params], clip_grad_norm=1.0) as opt:
        opt.load_state_dict(pickle.loads((tmp_path / "optimizer.pkl").read_bytes()))
        assert opt.state_dict()["state"][0]["step"] == 60.0


@pytest.mark.exclusive  # needs the machine to itself (scripts/test.sh runs it alone)
@pytest.mark.slow  # multi-process
def test_bench_zero_reports_every_backend_and_the_shards_state(tmp_path):
    """Every row, NumPy params and device buffers (kp tensors on each rank's manager) on each
    vk-adam transport: a step time, half the state per rank, every phase, and how device buffers
    reached host memory."""
    cmd = [sys.executable, "-m", "vk_adam", "bench", "--cases", "zero", "--zero-elements", str(2**16)]
    cmd += ["--repeats", "2", "--warmup", "1", "--out", str(tmp_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=_env(), check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    rows = json.loads((tmp_path / "zero.json").read_text())["rows"]
    zero1 = ["vk-adam-zero1-gloo", "vk-adam-zero1-gloo-device"] + (
        ["vk-adam-zero1-mpi", "vk-adam-zero1-mpi-device"] if HAS_MPI else []
    )
    wanted = [*zero1, "torch-zero-cpu", "vk-adam-1-process"]
    for name in wanted:
        assert 0 < rows[name].get("step_ms", 0) < 60_000, (name, rows[name])
    single = rows["vk-adam-1-process"]["state_bytes_per_rank"][0]
    assert single == 2**16 * 8  # AdamW: two fp32 buffers
    for name in zero1:
        row = rows[name]
        assert row["params"] == ("device buffers" if name.endswith("-device") else "NumPy"), name
        assert row["state_bytes_per_rank"] == [single // 2] * 2
        assert row["shards"] == [[0, 2**15], [2**15, 2**16]]
        assert set(row["phases_ms"]) == {"agree", "staging", "reduce_scatter", "norm", "update", "all_gather"}
        assert all(0 <= ms < 60_000 for ms in row["phases_ms"].values()), (name, row["phases_ms"])
        assert row["phases_ms"]["update"] > 0 and row["phases_ms"]["reduce_scatter"] > 0, (name, row)
        assert sum(row["phases_ms"].values()) <= row["step_ms"] * 1.5 + 1, (name, row)
        if name.endswith("-device"):
            assert row["transport"] == rows[name.removesuffix("-device")]["transport"]
            assert row["devices"] == rows[name.removesuffix("-device")]["devices"]
            (how,) = row["device_staging"]
            assert how in ("host memory import", "mapped staging (host-visible kp tensors)"), how
        else:
            assert "device_staging" not in row
    assert rows["vk-adam-1-process"]["params"] == "NumPy"
    assert rows["torch-zero-cpu"]["params"] == "torch CPU tensors"
    assert sum(rows["torch-zero-cpu"]["state_bytes_per_rank"]) >= single
    table = (tmp_path / "zero.md").read_text()
    assert "| backend | params | transport |" in table
    assert "| vk-adam ZeRO-1 (gloo) | NumPy |" in table
    how = rows["vk-adam-zero1-gloo-device"]["device_staging"][0]
    assert f"| vk-adam ZeRO-1 (gloo) | device buffers: {how} |" in table
    if HAS_MPI:
        assert "| vk-adam ZeRO-1 (MPI) | device buffers: " in table


def test_bench_zero_rows_on_one_rank_and_a_failed_row_keeps_the_others(tmp_path):
    """In this process (a one-rank gloo group, fast): the NumPy and device-buffer rows of the
    zero bench's worker, the latter reporting how its kp tensors reached host memory; a row that
    raises is written as failed, and the rows after it still run."""
    import torch.distributed as dist

    from vk_adam._commands.bench import zero_worker

    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    config = {"elements": 3072, "tensors": 3, "warmup": 1, "repeats": 2}  # whole blocks: no padding

    def broken() -> dict[str, Any]:
        raise MemoryError("no room")

    with gloo_world_of_one():
        runs = [
            ("numpy", lambda: zero_worker.bench_vk_zero(config, None, 0, dist.barrier)),
            ("broken", broken),
            ("device", lambda: zero_worker.bench_vk_zero_device(config, None, 0, dist.barrier)),
        ]
        zero_worker._run(runs, 0, tmp_path)
    numpy_row, failed, device_row = (
        json.loads((tmp_path / f"{name}-rank0.json").read_text()) for name in ("numpy", "broken", "device")
    )
    assert failed == {"failed": "MemoryError: no room"}
    for row in (numpy_row, device_row):
        assert row["step_ms"] > 0 and row["shard"] == [0, 3072] and row["state_bytes"] == 3072 * 8, row
        assert set(row["phases_ms"]) == {"agree", "staging", "reduce_scatter", "norm", "update", "all_gather"}
    assert device_row["device"] == numpy_row["device"]
    assert device_row["device_staging"] in ("host memory import", "mapped staging (host-visible kp tensors)")
    assert "device_staging" not in numpy_row
