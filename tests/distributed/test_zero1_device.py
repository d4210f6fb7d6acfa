"""ZeRO-1 over device buffers: kp tensors on an application's manager and a LoRA adapter's flat
buffer, against one process's vk-adam optimizer over the same device buffers stepped with the
mean gradient.

One rank (this process, a one-rank gloo group): bit for bit one process, over host-memory
imports and over mapped staging, with gradients given as kp tensors, through ``grad_buffer()``
and as NumPy arrays; the refusals. Several ranks (``slow``): tests/distributed/zero1_worker.py's device mode
under torchrun (gloo) and mpirun, 2, 3 and 4 ranks, kp tensors and a LoRA adapter: every rank
ends with the same params, bit for bit; those are one process's bit for bit where the mean
gradient is the same bits (``exact_mean``, or random gradients added in rank order and no
clipping), else within 1e-6 of the tensor's scale (the clipping norm's order differs); the
consolidated state dict is one process's; bad input on one rank is
refused on every rank and changes nothing; a checkpoint resumes bit for bit and loads at
another world size. Seeds are printed.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")

import vk_adam
import vk_adam.distributed as vkd
from vk_adam import DeviceCapabilityError
from vk_adam._runtime import sharing
from vk_adam.lora import LoRAAdapter, update_lora_adapter
from vk_adam.schedules import CosineDecay

from ..conftest import assert_same_refusals, limit_allocations, random_grad
from . import zero1_worker as worker
from .test_zero1 import (
    _close,
    _prepare,
    compressed_state_drift,
    launch,
    mean_grad,
    needs_mpi,
    same_bits_as_one_process,
)

# -- one rank, in this process ----------------------------------------------------------------------


@pytest.fixture(params=["import", "mapped"])
def staging(request, monkeypatch):
    """Host-memory import (where the device has it), or mapped staging ($VK_ADAM_HOST_IMPORT=0)."""
    if request.param == "mapped":
        monkeypatch.setenv("VK_ADAM_HOST_IMPORT", "0")
    else:
        with vk_adam.open_device() as handle:
            if not getattr(sharing(handle.manager), "host_import", False):
                pytest.skip(f"{handle.info.name} cannot import host memory (VK_EXT_external_memory_host)")
    return request.param


def _upload(manager: Any, array: np.ndarray) -> Any:
    return worker.upload(manager, array)


def _download(manager: Any, tensors: list[Any]) -> list[np.ndarray]:
    return worker.download(manager, tensors)


def _same_state(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert ours["param_groups"] == theirs["param_groups"]
    assert ours["state"].keys() == theirs["state"].keys()
    for i, entry in theirs["state"].items():
        assert ours["state"][i].keys() == entry.keys()
        for key, value in entry.items():
            assert np.asarray(ours["state"][i][key]).tobytes() == np.asarray(value).tobytes(), (i, key)


def test_kp_tensors_on_one_rank_are_one_process_bit_for_bit(rng, one_rank, kp_manager, staging):
    """Two groups of kp tensors (one large enough for 8-bit state, one below it, as one process
    chooses per buffer) and a NumPy group; gradients as kp tensors, through grad_buffer() and as
    NumPy arrays; a non-finite gradient skipped; the state dict, and a load of it. (Clipping
    is not bit for bit: the host sums the global norm in float64, one process's device in
    float32; the several-rank cases check it to 1e-6 of scale.)"""
    mgr = kp_manager
    sizes = [[6300, 130], [17, 4099]]
    host_shape = (33, 7)
    start = [[rng.standard_normal(n).astype(np.float32) for n in group] for group in sizes]
    host_start = rng.standard_normal(host_shape).astype(np.float32)

    def groups(tensors: list[list[Any]], host: np.ndarray) -> list[dict[str, Any]]:
        return [{"params": tensors[0], "lr": 3e-3}, {"params": tensors[1]}, {"params": [host], "lr": 1e-2}]

    mine = [[_upload(mgr, a) for a in group] for group in start]
    theirs = [[_upload(mgr, a) for a in group] for group in start]
    my_host, their_host = host_start.copy(), host_start.copy()
    options = {"lr": 1e-2, "state_dtype": "int8-blockwise", "skip_nonfinite": True}
    opt = vkd.ZeroRedundancyOptimizer(groups(mine, my_host), "adamw", manager=mgr, **options)
    ref = vk_adam.create("adamw", groups(theirs, their_host), manager=mgr, **options)
    expected = "host memory import" if staging == "import" else "mapped staging"
    assert opt.device_staging is not None and opt.device_staging.startswith(expected)
    assert opt.param_buffer(0, 1) is mine[0][1] and opt.param_buffer(1, 0) is mine[1][0]
    flat_sizes = [n for group in sizes for n in group]
    for t in range(5):
        grads = [random_grad(rng, (n,)) for n in flat_sizes] + [random_grad(rng, host_shape)]
        if t == 4:  # skipped, on both; the kp gradients are kept, as one process keeps them
            grads[3][7] = np.inf
            given = [_upload(mgr, g) for g in grads[:-1]]
            assert opt.step([*given, grads[-1]]).skipped and ref.step(grads).skipped
            assert all(a.tobytes() == g.tobytes() for a, g in zip(_download(mgr, given), grads, strict=False))
            continue
        if t % 3 == 0:  # kp tensors: the step zeroes them, as one process's step does
            given = [_upload(mgr, g) for g in grads[:-1]]
            opt.step([*given, grads[-1]])
            assert not any(a.any() for a in _download(mgr, given))
        elif t % 3 == 1:  # written into the optimizer's gradient buffers on the device
            with pytest.raises(ValueError, match="without grads on NumPy params"):
                opt.step()  # a NumPy group has no gradient buffer
            k = 0
            for g, group in enumerate(sizes):
                for i in range(len(group)):
                    worker.upload(mgr, grads[k], opt.grad_buffer(g, i))
                    k += 1
            opt.step(
                [
                    *[opt.grad_buffer(g, i) for g, group in enumerate(sizes) for i in range(len(group))],
                    grads[-1],
                ]
            )
            assert not any(a.any() for a in _download(mgr, [opt.grad_buffer(0, 0), opt.grad_buffer(1, 1)]))
        else:
            opt.step(grads)
        ref.step(grads)
    ours = _download(mgr, [t for group in mine for t in group])
    expected_params = _download(mgr, [t for group in theirs for t in group])
    assert all(a.tobytes() == b.tobytes() for a, b in zip(ours, expected_params, strict=True))
    assert my_host.tobytes() == their_host.tobytes()
    opt.consolidate_state_dict()
    saved = opt.state_dict()
    _same_state(saved, ref.state_dict())
    assert saved["state"][0]["exp_avg"].dtype == np.uint8 and saved["state"][1]["exp_avg"].dtype == np.float32
    assert saved["state"][1]["exp_avg"].shape == (130,)
    # a fresh optimizer over the saved params loads the state and goes on as one process does
    again = [[_upload(mgr, a) for a in group] for group in (ours[:2], ours[2:])]
    fresh = vkd.ZeroRedundancyOptimizer(groups(again, my_host), "adamw", manager=mgr, **options)
    fresh.load_state_dict(saved)
    fresh.consolidate_state_dict()
    _same_state(fresh.state_dict(), saved)
    grads = [random_grad(rng, (n,)) for n in flat_sizes] + [random_grad(rng, host_shape)]
    fresh.step(grads)
    ref.step(grads)
    ours = _download(mgr, [t for group in again for t in group])
    expected_params = _download(mgr, [t for group in theirs for t in group])
    assert [a.tobytes() == b.tobytes() for a, b in zip(ours, expected_params, strict=True)] == [True] * 4
    assert my_host.tobytes() == their_host.tobytes()
    for o in (opt, fresh, ref):
        o.close()
    for tensor in [t for group in [*mine, *theirs, *again] for t in group]:
        tensor.destroy()


def test_step_without_grads_reads_the_grad_buffers(rng, one_rank, kp_manager):
    mgr = kp_manager
    start = rng.standard_normal(1000).astype(np.float32)
    param, other = _upload(mgr, start), _upload(mgr, start)
    opt = vkd.ZeroRedundancyOptimizer([param], "sgd", manager=mgr, lr=0.1, momentum=0.9, zero_grad=False)
    ref = vk_adam.SGD([other], manager=mgr, lr=0.1, momentum=0.9, zero_grad=False)
    with pytest.raises(ValueError, match=r"grad_buffer\(0, 0\), which was never taken"):
        opt.step()
    buffer = opt.grad_buffer()
    assert opt.grad_buffer(0, 0) is buffer and int(buffer.size()) == 1000
    grad = random_grad(rng, (1000,))
    worker.upload(mgr, grad, buffer)
    worker.upload(mgr, grad, ref.grad_buffer())
    for _ in range(2):  # zero_grad=False: the gradient stays for the next step
        opt.step()
        ref.step()
    assert _download(mgr, [param])[0].tobytes() == _download(mgr, [other])[0].tobytes()
    assert _download(mgr, [buffer])[0].tobytes() == grad.tobytes()
    with pytest.raises(IndexError, match="no such param"):
        opt.grad_buffer(0, 1)
    opt.close()
    ref.close()
    param.destroy()
    other.destroy()


def _adapter(rng_seed: int) -> LoRAAdapter:
    return LoRAAdapter.create(
        layers=2,
        in_features=48,
        rank=4,
        target_modules=("q_proj", "v_proj"),
        rng=np.random.default_rng(rng_seed),
    )


def test_a_lora_adapter_on_one_rank_is_one_process_bit_for_bit(rng, one_rank, kp_manager, staging):
    mgr = kp_manager
    seed = int(rng.integers(2**31))
    mine, theirs = _adapter(seed), _adapter(seed)
    opt = vkd.ZeroRedundancyOptimizer(mine, "adamw", manager=mgr, lr=1e-2, state_dtype="bfloat16")
    ref = theirs.optimizer("adamw", manager=mgr, lr=1e-2, state_dtype="bfloat16")
    assert opt.param_buffer() is mine.device_params
    sched, ref_sched = CosineDecay(opt, total_steps=6), CosineDecay(ref, total_steps=6)
    for t in range(3):
        grads = {key: random_grad(rng, shape) for key, (_, shape) in mine.slices().items()}
        if t == 1:  # the application's shaders write the gradient buffer
            flat = np.zeros_like(mine.flat_grads)
            for key, (offset, shape) in mine.slices().items():
                flat[offset : offset + shape[0] * shape[1]] = grads[key].reshape(-1)
            worker.upload(mgr, flat, opt.grad_buffer())
            worker.upload(mgr, flat, ref.grad_buffer())
            update_lora_adapter(mine, opt)
            update_lora_adapter(theirs, ref)
        else:
            update_lora_adapter(mine, opt, grads)
            update_lora_adapter(theirs, ref, grads)
        sched.step()
        ref_sched.step()
    mine.pull_params()
    theirs.pull_params()
    assert mine.flat_params.tobytes() == theirs.flat_params.tobytes()
    assert not np.array_equal(mine.flat_params, _adapter(seed).flat_params)
    opt.consolidate_state_dict()
    _same_state(opt.state_dict(), ref.state_dict())
    opt.close()
    ref.close()


def test_a_16_bit_lora_adapter_takes_the_host_path(rng, one_rank, kp_manager):
    seed = int(rng.integers(2**31))
    mine = LoRAAdapter.create(
        layers=1, in_features=32, rank=4, dtype="bfloat16", rng=np.random.default_rng(seed)
    )
    theirs = LoRAAdapter.create(
        layers=1, in_features=32, rank=4, dtype="bfloat16", rng=np.random.default_rng(seed)
    )
    with pytest.raises(ValueError, match="on-device adapters"):
        vkd.ZeroRedundancyOptimizer(mine, "adamw", manager=kp_manager)
    opt = vkd.ZeroRedundancyOptimizer(mine, "adamw", lr=1e-2, stochastic_rounding=True, seed=3)
    ref = theirs.optimizer("adamw", lr=1e-2, stochastic_rounding=True, seed=3)
    assert opt.device_staging is None
    for _ in range(2):
        grads = {
            key: random_grad(rng, shape).astype(mine.flat_params.dtype)
            for key, (_, shape) in mine.slices().items()
        }
        update_lora_adapter(mine, opt, grads)
        update_lora_adapter(theirs, ref, grads)
    assert mine.flat_params.tobytes() == theirs.flat_params.tobytes()
    with pytest.raises(TypeError, match="holds NumPy arrays"):
        opt.grad_buffer()
    opt.close()
    ref.close()


def test_what_device_params_refuse(rng, one_rank, kp_manager, monkeypatch):
    mgr = kp_manager
    param = _upload(mgr, rng.standard_normal(300).astype(np.float32))
    # kp tensors need the manager that made them, as in one process
    with pytest.raises(ValueError, match=r"pass the kp\.Manager that created them as manager="):
        vkd.ZeroRedundancyOptimizer([param], "adamw")
    with pytest.raises(TypeError, match=r"manager must be a kp\.Manager"):
        vkd.ZeroRedundancyOptimizer([param], "adamw", manager="gpu")
    with pytest.raises(TypeError, match="either NumPy arrays or kp tensors"):
        vkd.ZeroRedundancyOptimizer([param, np.zeros(3, np.float32)], "adamw", manager=mgr)
    with pytest.raises(ValueError, match="stochastic_rounding"):
        vkd.ZeroRedundancyOptimizer([param], "adamw", manager=mgr, stochastic_rounding=True)
    with monkeypatch.context() as m:  # a stock kp cannot copy byte ranges: said, not crashed
        m.setattr("vk_adam._runtime.collective_memory.region_copies_available", lambda: False)
        with pytest.raises(TypeError, match="needs vk-adam's patched kp"):
            vkd.ZeroRedundancyOptimizer([param], "adamw", manager=mgr)
    with monkeypatch.context() as m:  # every rank's gradients in one buffer: past one allocation
        limit_allocations(m, 1024)  # 256 float32; the gradients need 320 (300 padded)
        with pytest.raises(
            DeviceCapabilityError,
            match=r"ZeRO-1 on kp tensor params keeps every rank's gradients in one device buffer of "
            r"1280 bytes, more than .* \(maxMemoryAllocationSize: 1024 bytes\): pass the params as NumPy",
        ):
            vkd.ZeroRedundancyOptimizer([param], "adamw", manager=mgr)
    # never written: refused at the step, before anything changes, as one process refuses it
    unwritten = mgr.tensor(np.zeros(300, np.float32))
    opt = vkd.ZeroRedundancyOptimizer([unwritten], "adamw", manager=mgr)
    with pytest.raises(
        ValueError, match="param 0 of group 0 is a kp tensor whose device memory was never written"
    ):
        opt.step([np.ones(300, np.float32)])
    opt.close()
    opt = vkd.ZeroRedundancyOptimizer([param], "adamw", manager=mgr)
    before = _download(mgr, [param])[0]
    grad = mgr.tensor(np.ones(300, np.float32))  # never uploaded
    with pytest.raises(
        ValueError, match="grad for param 0 is a kp tensor whose device memory was never written"
    ):
        opt.step([grad])
    with pytest.raises(ValueError, match="has 299 elements; the param has 300"):
        opt.step([_upload(mgr, np.ones(299, np.float32))])
    with pytest.raises(ValueError, match="Invalid learning rate"):
        opt.param_groups[0]["lr"] = -1.0
        opt.step([np.ones(300, np.float32)])
    assert _download(mgr, [param])[0].tobytes() == before.tobytes()
    opt.close()
    for t in (param, unwritten, grad):
        t.destroy()


# -- several ranks ----------------------------------------------------------------------------------

SHAPES = [[(33, 7), (130,)], [(5, 4, 3), (300,)]]
BIG = [[(70, 90), (1000,), (17,)]]  # 6,300 elements: 8-bit state for the first only (per buffer)
LORA = {"layers": 2, "in_features": 64, "rank": 8}  # 4 modules, 4,096 elements: 8-bit state

CASES: dict[str, dict[str, Any]] = {
    # two groups with their own lr, global-norm clipping, a cosine schedule; random means
    "kp-adamw-clip-groups": {
        "params": "kp",
        "rule": "adamw",
        "groups": SHAPES,
        "group_lr": [3e-3, 1e-2],
        "options": {"lr": 3e-3, "clip_grad_norm": 1.0},
        "schedule": True,
        "steps": 4,
        "bad_step": 1,
        "resume_at": 2,
    },
    # 8-bit state where a buffer is large enough, a NaN step skipped: bit-exact
    "kp-int8-skip": {
        "params": "kp",
        "rule": "adamw",
        "groups": BIG,
        "options": {"lr": 1e-2, "state_dtype": "int8-blockwise", "skip_nonfinite": True},
        "exact_mean": True,
        "steps": 4,
        "nan_step": 1,
    },
    # SGD with Nesterov momentum, bf16 state, loaded from one process's state dict: bit-exact
    "kp-sgd-bf16-load": {
        "params": "kp",
        "rule": "sgd",
        "groups": SHAPES,
        "options": {"lr": 0.05, "momentum": 0.9, "nesterov": True, "state_dtype": "bfloat16"},
        "exact_mean": True,
        "steps": 3,
        "bad_step": 2,
        "load_single": 2,
    },
    # a LoRA adapter, 8-bit state, a checkpoint in the middle: bit-exact
    "lora-adamw-int8-resume": {
        "params": "lora",
        "lora": LORA,
        "rule": "adamw",
        "options": {"lr": 3e-3, "state_dtype": "int8-blockwise"},
        "exact_mean": True,
        "steps": 4,
        "bad_step": 0,
        "resume_at": 2,
    },
    # a plugin rule on a LoRA adapter: bit-exact
    "lora-lion": {
        "params": "lora",
        "lora": LORA,
        "rule": "lion",
        "options": {"lr": 1e-3, "weight_decay": 0.1},
        "exact_mean": True,
        "steps": 3,
        "bad_step": 1,
    },
    # 2 blocks for 3 ranks: the last rank owns nothing, yet copies every gradient and param
    "kp-tiny-empty-shard": {
        "params": "kp",
        "rule": "adamw",
        "groups": [[(10,), (3,)]],
        "options": {"lr": 1e-2},
        "exact_mean": True,
        "steps": 3,
        "bad_step": 1,
    },
    # AMSGrad with L2 decay, bf16 state, a schedule: random means
    "lora-adam-amsgrad": {
        "params": "lora",
        "lora": LORA,
        "rule": "adam",
        "options": {"lr": 1e-2, "amsgrad": True, "weight_decay": 0.01, "state_dtype": "bfloat16"},
        "schedule": True,
        "steps": 3,
    },
}


def _device_config(case: str, tmp_path: Path, manager: Any, seed: int) -> dict[str, Any]:
    config = dict(CASES[case])
    if config["params"] == "lora":  # the gradients' shape: the adapter's flat buffer
        config["groups"] = [[(worker.make_adapter({**config, "seed": 0}).flat_params.size,)]]
    # one scale and quantum for every rank's float32 gradients: their sum is exact at 3 and 4 ranks
    config = _prepare({**config, "load_single": None, "shared_scale": True}, tmp_path, seed)
    if CASES[case].get("load_single"):  # one process's state dict (over kp tensors), a few steps in
        config["load_single"] = CASES[case]["load_single"]
        ref = Reference(config, manager)
        for t in range(config["load_single"]):
            ref.step(mean_grad(config, 1, t + 100))
        config["load"] = str(tmp_path / "single.pkl")
        Path(config["load"]).write_bytes(pickle.dumps(ref.opt.state_dict()))
        ref.close()
    return config


class Reference:
    """One process's optimizer over the same device buffers (kp tensors, or the adapter's)."""

    def __init__(self, config: dict[str, Any], manager: Any) -> None:
        self.config, self.manager = config, manager
        options = config.get("options", {})
        if config["params"] == "lora":
            self.adapter: LoRAAdapter | None = worker.make_adapter(config)
            self.opt = self.adapter.optimizer(config["rule"], manager=manager, **options)
            self.tensors = [self.adapter.device_params]
        else:
            self.adapter = None
            tensors = [[worker.upload(manager, p) for p in group] for group in worker.make_params(config)]
            self.opt = vk_adam.create(
                config["rule"], worker.param_groups(config, tensors), manager=manager, **options
            )
            self.tensors = [t for group in tensors for t in group]
        steps = config["steps"] + 2
        self.history: list[dict[int, dict[str, Any]]] = []
        self.sched = (
            CosineDecay(self.opt, warmup_steps=1, total_steps=steps) if config.get("schedule") else None
        )

    def step(self, grads: list[np.ndarray]) -> bool:
        skipped = self.opt.step([g.reshape(-1) for g in grads]).skipped
        if self.sched is not None:
            self.sched.step()
        self.history.append(self.opt.state_dict()["state"])  # for rounding_bound
        return bool(skipped)

    def params(self) -> list[np.ndarray]:
        return _download(self.manager, self.tensors)

    def close(self) -> None:
        self.opt.close()
        if self.adapter is None:
            for tensor in self.tensors:
                tensor.destroy()


def check_device_job(
    config: dict[str, Any], world: int, out: Path, done: Any, manager: Any, staging: str
) -> None:
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-6000:])
    ranks = [pickle.loads((out / f"rank{r}.pkl").read_bytes()) for r in range(world)]
    assert all(r["size"] == world and r["staging"].startswith(staging) for r in ranks), ranks[0]["staging"]
    flat = [[p.reshape(-1) for group in r["params"] for p in group] for r in ranks]
    for other in flat[1:]:  # every rank holds the same params, bit for bit
        assert all(a.tobytes() == b.tobytes() for a, b in zip(other, flat[0], strict=True))
    if config["params"] == "lora":  # and the adapter's pull_params() reads them back
        assert all(r["pulled"].tobytes() == f[0].tobytes() for r, f in zip(ranks, flat, strict=True))
    ref = Reference(config, manager)
    if config.get("load"):
        ref.opt.load_state_dict(pickle.loads(Path(config["load"]).read_bytes()))
    skipped = [ref.step(mean_grad(config, world, t)) for t in range(config["steps"])]
    exact = same_bits_as_one_process(config)
    drift = compressed_state_drift(config)
    for i, (a, b) in enumerate(zip(flat[0], ref.params(), strict=True)):
        _close(a, b, exact, f"param {i}", drift)
    state, expected = pickle.loads((out / "state.pkl").read_bytes()), ref.opt.state_dict()
    assert state["param_groups"] == expected["param_groups"]
    assert state["state"].keys() == expected["state"].keys()
    for i, entry in expected["state"].items():
        assert state["state"][i].keys() == entry.keys()
        for key, value in entry.items():
            if key != "step":
                mine, history = np.asarray(state["state"][i][key]), [h[i][key] for h in ref.history]
                _close(mine, np.asarray(value), exact, f"state {key} of {i}", history=history)
    assert all(r["skipped"] == skipped for r in ranks)
    if ref.opt.clip_grad_norm is not None:
        norm = ref.opt.last_grad_norm()
        assert all(abs(r["last_grad_norm"] - norm) <= 1e-6 * norm for r in ranks)
    assert all(z in (True, None) for r in ranks for z in r.get("zeroed", []))  # kp grads cleared
    # each rank holds its shard of the state: together one process's, with each buffer's padding
    state_bytes = [r["memory"]["state"] + r["memory"]["absmax"] for r in ranks]
    single = ref.opt.memory_bytes()
    assert (
        single["state"] + single["absmax"]
        <= sum(state_bytes)
        <= (single["state"] + single["absmax"]) * 1.1 + 8192
    )
    ref.close()
    if config.get("bad_step") is not None:
        expected_errors = {
            "bad_size": ("ValueError", "elements; the param has"),
            "bad_count": ("ValueError", "gradient(s) for"),
            "bad_unwritten": ("ValueError", "never written"),
            "bad_lr": ("ValueError", "Invalid learning rate"),
        }
        assert_same_refusals(ranks, expected_errors)
        assert all(r["unchanged_after_bad_input"] and r["grads_kept_after_bad_input"] for r in ranks)
    if config.get("resume_at") is not None:  # stopped, saved, loaded, resumed: bit for bit
        for r, f in zip(ranks, flat, strict=True):
            resumed = [p.reshape(-1) for group in r["resumed_params"] for p in group]
            assert all(a.tobytes() == b.tobytes() for a, b in zip(resumed, f, strict=True))


RUNS = [(world, kind) for world in (2, 3, 4) for kind in ("kp", "lora")]
#: (launcher, world, params) -> case: each launcher runs kp tensors and an adapter at 2, 3 and 4 ranks
PLAN = {
    ("torch", 2, "kp"): "kp-adamw-clip-groups",
    ("torch", 3, "kp"): "kp-int8-skip",
    ("torch", 4, "kp"): "kp-sgd-bf16-load",
    ("torch", 2, "lora"): "lora-adamw-int8-resume",
    ("torch", 3, "lora"): "lora-lion",
    ("torch", 4, "lora"): "lora-adam-amsgrad",
    ("mpi", 2, "kp"): "kp-int8-skip",
    ("mpi", 3, "kp"): "kp-sgd-bf16-load",
    ("mpi", 4, "kp"): "kp-adamw-clip-groups",
    ("mpi", 2, "lora"): "lora-adam-amsgrad",
    ("mpi", 3, "lora"): "lora-adamw-int8-resume",
    ("mpi", 4, "lora"): "lora-lion",
}


def _run_case(
    launcher: str,
    world: int,
    case: str,
    tmp_path: Path,
    manager: Any,
    staging: str,
    seed: int,
    *,
    host_mirror: bool = False,
) -> None:
    """``case`` on ``world`` ranks, checked against one process; ``host_mirror``: the ranks run
    the collectives-on-Vulkan-buffers path over gloo with the host mirror standing in for CUDA
    (test_zero1_vulkan_collectives.py)."""
    config = _device_config(case, tmp_path, manager, seed)
    if host_mirror:
        config["host_mirror"] = True  # zero1_worker.run_device calls stand_in_for_cuda itself
    done, seconds = launch(launcher, world, config, tmp_path / "job")
    print(f"{launcher}, {world} ranks, {case}: {seconds:.1f} s")
    check_device_job(config, world, tmp_path / "job", done, manager, staging)


@pytest.mark.exclusive  # needs the machine to itself (scripts/test.sh runs it alone)
@pytest.mark.slow  # multi-process
@pytest.mark.parametrize(("world", "kind"), RUNS)
def test_torchrun_gloo_over_device_buffers_matches_one_process(tmp_path, kp_manager, world, kind, vk_seed):
    _run_case("torch", world, PLAN["torch", world, kind], tmp_path, kp_manager, "host memory import", vk_seed)


@pytest.mark.exclusive  # needs the machine to itself (scripts/test.sh runs it alone)
@pytest.mark.slow  # multi-process
@needs_mpi
@pytest.mark.parametrize(("world", "kind"), RUNS)
def test_mpirun_over_device_buffers_matches_one_process(tmp_path, kp_manager, world, kind, vk_seed):
    _run_case("mpi", world, PLAN["mpi", world, kind], tmp_path, kp_manager, "host memory import", vk_seed)


@pytest.mark.exclusive  # needs the machine to itself (scripts/test.sh runs it alone)
@pytest.mark.slow  # multi-process
@needs_mpi
@pytest.mark.parametrize("case", ["kp-adamw-clip-groups", "kp-tiny-empty-shard"])
def test_mapped_staging_over_mpirun_matches_one_process(tmp_path, kp_manager, monkeypatch, case, vk_seed):
    """Where the device cannot import host memory (here: $VK_ADAM_HOST_IMPORT=0), the host
    buffers are host-visible kp tensors' mapped memory: the same results."""
    monkeypatch.setenv("VK_ADAM_HOST_IMPORT", "0")
    _run_case("mpi", 3, case, tmp_path, kp_manager, "mapped staging", vk_seed)


@pytest.mark.exclusive  # needs the machine to itself (scripts/test.sh runs it alone)
@pytest.mark.slow  # multi-process
def test_a_rank_that_owns_nothing_still_moves_the_device_buffers(tmp_path, kp_manager, vk_seed):
    _run_case("torch", 3, "kp-tiny-empty-shard", tmp_path, kp_manager, "host memory import", vk_seed)


@pytest.mark.exclusive  # needs the machine to itself (scripts/test.sh runs it alone)
@pytest.mark.slow  # multi-process
@needs_mpi
def test_a_device_checkpoint_of_3_ranks_loads_at_2(tmp_path, kp_manager, vk_seed):
    """Saved by 3 ranks over kp tensors (torchrun), loaded by 2 (mpirun): re-sharded."""
    config = _device_config("kp-int8-skip", tmp_path, kp_manager, vk_seed)
    done, _ = launch("torch", 3, config, tmp_path / "three")
    assert done.returncode == 0, done.stderr[-6000:]
    resumed = dict(config, load=str(tmp_path / "three" / "state.pkl"))
    done, _ = launch("mpi", 2, resumed, tmp_path / "two")
    check_device_job(resumed, 2, tmp_path / "two", done, kp_manager, "host memory import")


def test_step_without_grads_on_numpy_params_is_refused_as_in_one_process(rng, one_rank):
    p = rng.standard_normal(64).astype(np.float32)
    kept = p.copy()
    with vkd.ZeroRedundancyOptimizer([p], "adamw") as opt:
        with pytest.raises(ValueError, match=r"step\(\) without grads on NumPy params: pass"):
            opt.step()
    assert p.tobytes() == kept.tobytes()
