"""One rank of a ZeRO-1 job for tests/test_zero1.py, launched by torchrun (gloo) or mpirun (mpi4py).

``python tests/zero1_worker.py torch|mpi CONFIG_JSON OUT_DIR``. The config (see ``CASES`` in
test_zero1.py) names the rule, options, param groups, steps and what to try on the way: bad
input on one rank (every rank must refuse it and change nothing), a NaN gradient, a schedule, a
checkpoint round trip in the middle, a state dict to load first. Each rank writes what it saw
to OUT_DIR/rank<r>.pkl and rank 0 the consolidated state dict; the test compares them with one
process's vk-adam optimizer stepped with the mean gradient, and with a float64 reference.

The params and gradients come from ``make_params`` / ``make_grads``, which the test calls too.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}


def make_params(config: dict[str, Any]) -> list[list[np.ndarray]]:
    """The initial params of each group: the same on every rank (from the config's seed)."""
    rng = np.random.default_rng([config["seed"], 0])
    dtype = DTYPES[config.get("dtype", "float32")]
    return [[rng.standard_normal(s).astype(dtype) for s in shapes] for shapes in config["groups"]]


def make_grads(config: dict[str, Any], rank: int, step: int) -> list[np.ndarray]:
    """Rank ``rank``'s gradients at ``step`` (0-based), every param in order. Their scale changes
    from step to step (1e-3 .. 1e2). With ``exact_mean`` they are dyadic with few significant
    bits, so a float32 sum over up to 4 ranks is exact in any order: the mean is then the same
    bits on every path, and ZeRO-1 must equal one process bit for bit."""
    rng = np.random.default_rng([config["seed"], 1, rank, step])
    dtype = DTYPES[config.get("dtype", "float32")]
    scale = 10.0 ** rng.uniform(-3, 2)
    out = []
    for shapes in config["groups"]:
        for s in shapes:
            g = rng.standard_normal(s) * scale
            if config.get("exact_mean"):
                bits = 7 if dtype != np.float32 else 20  # fixed point, |g| < 2**bits ulps
                quantum = 2.0 ** (np.ceil(np.log2(np.max(np.abs(g)))) - bits)
                g = np.round(g / quantum) * quantum
            out.append(g.astype(dtype))
    return out


def param_groups(config: dict[str, Any], params: list[list[np.ndarray]]) -> list[dict[str, Any]]:
    lrs = config.get("group_lr", [])
    return [{"params": p, **({"lr": lrs[i]} if i < len(lrs) else {})} for i, p in enumerate(params)]


def _digest(params: list[list[np.ndarray]]) -> str:
    h = hashlib.sha256()
    for group in params:
        for p in group:
            h.update(p.tobytes())
    return h.hexdigest()


class Job:
    """The communicator's launcher side: rank, size, a barrier, and the optimizer's comm."""

    def __init__(self, launcher: str, backend: str = "gloo") -> None:
        if launcher == "torch":
            import os

            import torch
            import torch.distributed as dist

            if backend == "nccl":  # one GPU per rank, as NCCL needs
                torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
            dist.init_process_group(
                backend, timeout=timedelta(seconds=float(sys.argv[4]) if len(sys.argv) > 4 else 60)
            )
            self.rank, self.size, self.comm, self.barrier = (
                dist.get_rank(),
                dist.get_world_size(),
                None,
                dist.barrier,
            )
        else:
            from mpi4py import MPI

            world = MPI.COMM_WORLD
            self.rank, self.size, self.comm, self.barrier = (
                world.Get_rank(),
                world.Get_size(),
                world,
                world.Barrier,
            )
        self.launcher = launcher

    def close(self) -> None:
        """End the process group as torch asks: one left to the interpreter's exit can abort the
        process there (``terminate called without an active exception``, seen once in CI)."""
        if self.launcher == "torch":
            import torch.distributed as dist

            dist.destroy_process_group()


def _try_bad_inputs(job: Job, opt: Any, params: Any, grads: list[np.ndarray], seen: dict[str, Any]) -> None:
    """Bad input on one rank: every rank must raise the same error, and nothing may change."""
    last = job.size - 1
    before = _digest(params)
    attempts = {
        "shape": lambda: opt.step(
            [np.zeros((3, 3), g.dtype) if (i == 1 and job.rank == last) else g for i, g in enumerate(grads)]
        ),
        "count": lambda: opt.step(grads[:-1] if job.rank == 0 else grads),
        "dtype": lambda: opt.step([g.astype(np.int32) if job.rank == last else g for g in grads]),
    }
    for name, attempt in attempts.items():
        try:
            attempt()
            seen[f"bad_{name}"] = None
        except Exception as exc:  # recorded, and compared across ranks by the test
            seen[f"bad_{name}"] = f"{type(exc).__name__}: {exc}"
    saved = opt.param_groups[0]["lr"]
    if job.rank == min(1, last):
        opt.param_groups[0]["lr"] = -1.0
    try:
        opt.step(grads)
        seen["bad_lr"] = None
    except Exception as exc:
        seen["bad_lr"] = f"{type(exc).__name__}: {exc}"
    opt.param_groups[0]["lr"] = saved
    seen["unchanged_after_bad_input"] = _digest(params) == before


def run(launcher: str, config: dict[str, Any], out: Path) -> None:
    import vk_adam.distributed as vkd
    from vk_adam.schedules import CosineDecay

    job = Job(launcher, config.get("backend", "gloo"))
    rank = job.rank
    seen: dict[str, Any] = {"rank": rank, "size": job.size}

    def build(params: list[list[np.ndarray]]) -> tuple[Any, Any]:
        opt = vkd.ZeroRedundancyOptimizer(
            param_groups(config, params), config["rule"], comm=job.comm, **config.get("options", {})
        )
        sched = (
            CosineDecay(opt, warmup_steps=1, total_steps=config["steps"] + 2)
            if config.get("schedule")
            else None
        )
        return opt, sched

    params = make_params(config)
    opt, sched = build(params)
    seen["communicator"], seen["shard"] = opt.communicator, opt.shard
    seen["memory"] = opt.memory_bytes()
    if config.get("load"):
        state = pickle.loads(Path(config["load"]).read_bytes())
        opt.load_state_dict(state)
    skipped = []
    for t in range(config["steps"]):
        grads = make_grads(config, rank, t)
        if t == config.get("bad_step"):
            _try_bad_inputs(job, opt, params, grads, seen)
        if t == config.get("nan_step") and rank == 0:
            grads[0].reshape(-1)[0] = np.nan
        skipped.append(opt.step(grads).skipped)
        if config.get("fail_rank") == rank and t == config.get("fail_step"):
            if config.get("hang"):  # alive, but gone from the collectives
                seen["hanging"] = True
                (out / f"rank{rank}.pkl").write_bytes(pickle.dumps(seen))
                time.sleep(300)
            raise RuntimeError(f"rank {rank} fails on purpose after step {t}")
        if sched is not None:
            sched.step()
    seen["skipped"] = skipped
    seen["params"] = params
    seen["timings"] = opt.last_timings
    if opt.clip_grad_norm is not None:
        seen["last_grad_norm"] = opt.last_grad_norm()
    to = job.size - 1  # not rank 0: any rank can hold the consolidated state
    opt.consolidate_state_dict(to=to)
    if rank == to:
        (out / "state.pkl").write_bytes(pickle.dumps(opt.state_dict()))
    else:
        try:
            opt.state_dict()
            seen["state_dict_elsewhere"] = None
        except RuntimeError as exc:
            seen["state_dict_elsewhere"] = str(exc)
    if config.get("resume_at") is not None:
        seen["resumed_params"] = _resume(job, config, build, out)
    opt.close()
    (out / f"rank{rank}.pkl").write_bytes(pickle.dumps(seen))
    job.close()


def _resume(job: Job, config: dict[str, Any], build: Any, out: Path) -> list[list[np.ndarray]]:
    """The same run, stopped after ``resume_at`` steps: consolidated, saved, loaded into a new
    optimizer (after a refused, corrupted state dict on one rank), and run to the end."""
    k = config["resume_at"]
    params = make_params(config)
    opt, sched = build(params)
    for t in range(k):
        opt.step(
            make_grads(config, job.rank, t) if t != config.get("nan_step") else _nan(config, job.rank, t)
        )
        if sched is not None:
            sched.step()
    opt.consolidate_state_dict(to=0)
    path = out / "resume.pkl"
    if job.rank == 0:
        path.write_bytes(pickle.dumps((opt.state_dict(), sched.state_dict() if sched else None)))
    job.barrier()
    opt.close()
    state, sched_state = pickle.loads(path.read_bytes())
    fresh, fresh_sched = build(params)
    if fresh_sched is not None:
        fresh_sched.load_state_dict(sched_state)
    corrupted = dict(state, state={**state["state"], 0: {"step": 1.0}}) if job.rank == job.size - 1 else state
    try:
        fresh.load_state_dict(corrupted)
    except ValueError as exc:
        (out / f"resume_refused{job.rank}.txt").write_text(str(exc))
    fresh.load_state_dict(state)
    for t in range(k, config["steps"]):
        grads = make_grads(config, job.rank, t) if t != config.get("nan_step") else _nan(config, job.rank, t)
        fresh.step(grads)
        if fresh_sched is not None:
            fresh_sched.step()
    fresh.close()
    return params


def _nan(config: dict[str, Any], rank: int, t: int) -> list[np.ndarray]:
    grads = make_grads(config, rank, t)
    if rank == 0:
        grads[0].reshape(-1)[0] = np.nan
    return grads


if __name__ == "__main__":
    run(sys.argv[1], json.loads(sys.argv[2]), Path(sys.argv[3]))
