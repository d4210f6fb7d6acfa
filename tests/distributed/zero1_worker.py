"""One rank of a ZeRO-1 job for tests/distributed/test_zero1.py, launched by torchrun (gloo) or
mpirun (mpi4py).

``python tests/distributed/zero1_worker.py torch|mpi CONFIG_JSON OUT_DIR``. The config (see ``CASES`` in
test_zero1.py) names the rule, options, param groups, steps and what to try on the way: bad
input on one rank (every rank must refuse it and change nothing), a NaN gradient, a schedule, a
checkpoint round trip in the middle, a state dict to load first. Each rank writes what it saw
to OUT_DIR/rank<r>.pkl and rank 0 the consolidated state dict; the test compares them with one
process's vk-adam optimizer stepped with the mean gradient, and with a float64 reference.

The params and gradients come from ``make_params`` / ``make_grads``, which the test calls too.

With ``"params": "kp"`` or ``"lora"`` in the config (tests/distributed/test_zero1_device.py), the params are
device buffers instead (``run_device``): kp tensors on the rank's device, or a LoRA adapter's flat
buffer (``make_adapter``), and the gradients reach the step as kp tensors, through
``opt.grad_buffer()`` (filled as an application's shader would leave it) or as NumPy arrays.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import sys
import time
from collections.abc import Callable
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
    bits on every path, and ZeRO-1 must equal one process bit for bit. With ``shared_scale``
    every rank draws the step's scale alike and quantizes to one quantum (float32 gradients of
    3 or 4 ranks whose scales differed would need more than float32's 24 bits to add up exactly).
    """
    rng = np.random.default_rng([config["seed"], 1, rank, step])
    dtype = DTYPES[config.get("dtype", "float32")]
    shared = config.get("shared_scale")
    scale = 10.0 ** (np.random.default_rng([config["seed"], 2, step]) if shared else rng).uniform(-3, 2)
    out = []
    for shapes in config["groups"]:
        for s in shapes:
            g = rng.standard_normal(s) * scale
            if config.get("exact_mean"):
                bits = 7 if dtype != np.float32 else 20  # fixed point, |g| < 2**bits ulps
                top = 8 * scale if shared else np.max(np.abs(g))  # shared: 8 sigma, every rank
                quantum = 2.0 ** (np.ceil(np.log2(top)) - bits)
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


def _record_refusals(
    job: Job, opt: Any, grads: Any, attempts: dict[str, Callable[[], Any]], seen: dict[str, Any]
) -> None:
    """Run each bad step (and one with a bad learning rate on one rank), recording every
    error as ``seen["bad_<name>"]`` for the test to compare across ranks."""
    for name, attempt in attempts.items():
        try:
            attempt()
            seen[f"bad_{name}"] = None
        except Exception as exc:  # recorded, and compared across ranks by the test
            seen[f"bad_{name}"] = f"{type(exc).__name__}: {exc}"
    saved = opt.param_groups[0]["lr"]
    if job.rank == min(1, job.size - 1):
        opt.param_groups[0]["lr"] = -1.0
    try:
        opt.step(grads)
        seen["bad_lr"] = None
    except Exception as exc:
        seen["bad_lr"] = f"{type(exc).__name__}: {exc}"
    opt.param_groups[0]["lr"] = saved


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
    _record_refusals(job, opt, grads, attempts, seen)
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


# -- device buffers: kp tensors and LoRA adapters (tests/distributed/test_zero1_device.py) ------


def make_adapter(config: dict[str, Any]) -> Any:
    """The LoRA adapter of a ``"params": "lora"`` config: the same on every rank (its seed)."""
    from vk_adam.lora import LoRAAdapter

    shape = config["lora"]
    return LoRAAdapter.create(
        layers=shape["layers"],
        in_features=shape["in_features"],
        rank=shape["rank"],
        rng=np.random.default_rng([config["seed"], 0]),
    )


def upload(manager: Any, array: np.ndarray, tensor: Any = None) -> Any:
    """``array`` (flattened, float32) in a device buffer: ``tensor``'s, or a new kp tensor's."""
    import kp

    if tensor is None:
        tensor = manager.tensor(np.ascontiguousarray(array, np.float32).reshape(-1))
    else:
        tensor.data()[:] = np.asarray(array, np.float32).reshape(-1)
    manager.sequence().eval(kp.OpTensorSyncDevice([tensor]))
    return tensor


def download(manager: Any, tensors: list[Any]) -> list[np.ndarray]:
    import kp

    manager.sequence().eval(kp.OpTensorSyncLocal(list(tensors)))
    return [t.data().copy() for t in tensors]


class DeviceJob:
    """One rank's device params (kp tensors or a LoRA adapter's buffer) and how it feeds them."""

    def __init__(self, config: dict[str, Any], manager: Any) -> None:
        self.config, self.manager, self.kind = config, manager, config["params"]
        if self.kind == "lora":
            self.adapter = make_adapter(config)
            self.shapes = [[self.adapter.flat_params.shape]]
        else:
            self.adapter = None
            self.shapes = [[tuple(s) for s in group] for group in config["groups"]]
            self.tensors = [[upload(manager, p) for p in group] for group in make_params(config)]

    def build(self, job: Job) -> tuple[Any, Any]:
        import vk_adam.distributed as vkd
        from vk_adam.schedules import CosineDecay

        config = self.config
        if self.adapter is not None:
            params: Any = self.adapter
        else:
            params = param_groups(config, self.tensors)
        opt = vkd.ZeroRedundancyOptimizer(
            params, config["rule"], comm=job.comm, manager=self.manager, **config.get("options", {})
        )
        sched = (
            CosineDecay(opt, warmup_steps=1, total_steps=config["steps"] + 2)
            if config.get("schedule")
            else None
        )
        return opt, sched

    def preset(self, params: list[list[np.ndarray]]) -> None:
        """Start from ``params`` (before ``build``): a checkpoint's."""
        if self.adapter is not None:
            self.adapter.flat_params[:] = params[0][0].reshape(-1)
            return
        for tensors, values in zip(self.tensors, params, strict=True):
            for tensor, value in zip(tensors, values, strict=True):
                upload(self.manager, value, tensor)

    def param_tensors(self, opt: Any) -> list[Any]:
        return [opt.param_buffer(g, i) for g, group in enumerate(self.shapes) for i in range(len(group))]

    def params(self, opt: Any) -> list[list[np.ndarray]]:
        """The params as the rank's device holds them, per group, shaped as the config's."""
        flat = iter(download(self.manager, self.param_tensors(opt)))
        return [[next(flat).reshape(s) for s in group] for group in self.shapes]

    def step(self, opt: Any, grads: list[np.ndarray], t: int, seen: dict[str, Any]) -> Any:
        """Step with ``grads`` (NumPy), passed as kp tensors (t % 3 == 0), through the gradient
        buffers (1; the adapter's through ``update_lora_adapter``) or as NumPy arrays (2)."""
        way = t % 3
        if way == 1:
            for k, (g, i) in enumerate(
                (g, i) for g, group in enumerate(self.shapes) for i in range(len(group))
            ):
                upload(self.manager, grads[k], opt.grad_buffer(g, i))
            if self.adapter is not None:
                from vk_adam.lora import update_lora_adapter

                return update_lora_adapter(self.adapter, opt)
            return opt.step()
        if way == 2:
            return opt.step(grads)
        tensors = [upload(self.manager, g) for g in grads]
        handle = opt.step(tensors)
        zeroed = all(not a.any() for a in download(self.manager, tensors))
        seen.setdefault("zeroed", []).append(zeroed if not handle.skipped else None)
        return handle


def _try_bad_device_inputs(
    job: Job, dev: DeviceJob, opt: Any, grads: list[np.ndarray], seen: dict[str, Any]
) -> None:
    """Bad input on one rank: every rank raises the same error; nothing changes."""
    last = job.size - 1
    before = _digest(dev.params(opt))
    tensors = [upload(dev.manager, g) for g in grads]
    unwritten = dev.manager.tensor(np.zeros(grads[0].size, np.float32))  # never uploaded
    wrong = upload(dev.manager, np.zeros(grads[0].size + 3, np.float32))
    attempts = {
        "size": lambda: opt.step(
            [wrong if (i == 0 and job.rank == last) else g for i, g in enumerate(tensors)]
        ),
        "count": lambda: opt.step(tensors[:-1] if job.rank == 0 else tensors),
        "unwritten": lambda: opt.step(
            [unwritten if (i == 0 and job.rank == 0) else g for i, g in enumerate(tensors)]
        ),
    }
    _record_refusals(job, opt, grads, attempts, seen)
    seen["unchanged_after_bad_input"] = _digest(dev.params(opt)) == before
    seen["grads_kept_after_bad_input"] = all(
        a.tobytes() == np.asarray(g, np.float32).reshape(-1).tobytes()
        for a, g in zip(download(dev.manager, tensors), grads, strict=True)
    )
    for t in [*tensors, unwritten, wrong]:
        t.destroy()


def _flat_grads(config: dict[str, Any], rank: int, t: int) -> list[np.ndarray]:
    grads = make_grads(config, rank, t)
    if t == config.get("nan_step") and rank == 0:
        grads[0].reshape(-1)[0] = np.nan
    return grads


def run_device(launcher: str, config: dict[str, Any], out: Path) -> None:
    import vk_adam

    if config.get("host_mirror"):  # the stand-in for CUDA over gloo, as in the test's process
        from vk_adam._runtime import stand_in_for_cuda

        stand_in_for_cuda(True)
    job = Job(launcher, config.get("backend", "gloo"))
    rank = job.rank
    seen: dict[str, Any] = {"rank": rank, "size": job.size}
    handle = vk_adam.open_device()
    dev = DeviceJob(config, handle.manager)
    opt, sched = dev.build(job)
    seen["communicator"], seen["shard"], seen["staging"] = opt.communicator, opt.shard, opt.device_staging
    if config.get("load"):
        opt.load_state_dict(pickle.loads(Path(config["load"]).read_bytes()))
    skipped = []
    for t in range(config["steps"]):
        grads = _flat_grads(config, rank, t)
        if t == config.get("bad_step"):
            _try_bad_device_inputs(job, dev, opt, grads, seen)
        skipped.append(dev.step(opt, grads, t, seen).skipped)
        if sched is not None:
            sched.step()
    seen["skipped"], seen["params"], seen["memory"] = skipped, dev.params(opt), opt.memory_bytes()
    if dev.adapter is not None:  # the adapter's own way back to the host
        dev.adapter.pull_params()
        seen["pulled"] = dev.adapter.flat_params.copy()
    if opt.clip_grad_norm is not None:
        seen["last_grad_norm"] = opt.last_grad_norm()
    to = job.size - 1
    opt.consolidate_state_dict(to=to)
    if rank == to:
        (out / "state.pkl").write_bytes(pickle.dumps(opt.state_dict()))
    opt.close()
    if config.get("resume_at") is not None:
        seen["resumed_params"] = _resume_device(job, config, handle.manager, out)
    (out / f"rank{rank}.pkl").write_bytes(pickle.dumps(seen))
    handle.close()
    job.close()


def _resume_device(job: Job, config: dict[str, Any], manager: Any, out: Path) -> list[list[np.ndarray]]:
    """Stopped after ``resume_at`` steps, consolidated, saved, loaded into a new optimizer over
    new device buffers holding the saved params, and run to the end."""
    k = config["resume_at"]
    dev = DeviceJob(config, manager)
    opt, sched = dev.build(job)
    seen: dict[str, Any] = {}
    for t in range(k):
        dev.step(opt, _flat_grads(config, job.rank, t), t, seen)
        if sched is not None:
            sched.step()
    opt.consolidate_state_dict(to=0)
    path = out / "resume.pkl"
    if job.rank == 0:
        saved = (opt.state_dict(), sched.state_dict() if sched else None, dev.params(opt))
        path.write_bytes(pickle.dumps(saved))
    job.barrier()
    opt.close()
    state, sched_state, params = pickle.loads(path.read_bytes())
    fresh = DeviceJob(config, manager)
    fresh.preset(params)
    opt, sched = fresh.build(job)
    if sched is not None:
        sched.load_state_dict(sched_state)
    opt.load_state_dict(state)
    for t in range(k, config["steps"]):
        fresh.step(opt, _flat_grads(config, job.rank, t), t, seen)
        if sched is not None:
            sched.step()
    result = fresh.params(opt)
    opt.close()
    return result


if __name__ == "__main__":
    config = json.loads(sys.argv[2])
    (run_device if config.get("params") else run)(sys.argv[1], config, Path(sys.argv[3]))
