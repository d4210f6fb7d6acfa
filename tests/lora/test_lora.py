"""LoRA adapters: one dispatch per group per step, PEFT files, checkpoints, torch state."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import vk_adam
import vk_adam._optim.optimizer as optimizer_module
from vk_adam._rules.builtin import ADAMW
from vk_adam._runtime._kp import kp_module
from vk_adam.lora import (
    CheckpointError,
    LoRAAdapter,
    PeftFormatError,
    export_torch_adamw_state,
    import_torch_adamw_state,
    load_checkpoint,
    save_checkpoint,
    update_lora_adapter,
)

from ..conftest import random_grad, scale_error

QKVO = ("q_proj", "k_proj", "v_proj", "o_proj")


def adapter_256(rng) -> LoRAAdapter:
    """q,k,v,o of 32 layers: 128 modules, 256 tensors (small features to keep lavapipe fast)."""
    return LoRAAdapter.create(
        layers=32, in_features=48, out_features=40, rank=4, target_modules=QKVO, rng=rng
    )


def fill_grads(adapter: LoRAAdapter, rng) -> None:
    for m in adapter.modules:
        adapter.grad(m.path, "A")[...] = random_grad(rng, m.a_shape)
        adapter.grad(m.path, "B")[...] = random_grad(rng, m.b_shape)


@pytest.fixture
def dispatch_counter(monkeypatch):
    kp = kp_module()
    count = {"update": 0}

    class CountingDispatch(kp.OpAlgoDispatch):
        def __init__(self, *args):
            count["update"] += 1
            super().__init__(*args)

    monkeypatch.setattr(kp, "OpAlgoDispatch", CountingDispatch)
    return count


def test_256_tensor_adapter_is_one_dispatch_per_step(rng, dispatch_counter):
    adapter = adapter_256(rng)
    assert adapter.tensor_count == 256
    with adapter.optimizer("adamw", lr=1e-3) as opt:
        assert opt.dispatches_per_step() == 1
        for _ in range(3):
            fill_grads(adapter, rng)
            before = dispatch_counter["update"]
            update_lora_adapter(adapter, opt)
            assert dispatch_counter["update"] - before == 1


def test_256_separate_arrays_in_two_groups_are_two_dispatches(rng, dispatch_counter):
    tensors = [rng.standard_normal((4, 48)).astype(np.float32) for _ in range(256)]
    groups = [{"params": tensors[:128]}, {"params": tensors[128:], "lr": 1e-2}]
    with vk_adam.AdamW(groups) as opt:
        before = dispatch_counter["update"]
        opt.step([random_grad(rng, t.shape) for t in tensors])
        assert dispatch_counter["update"] - before == 2 == opt.dispatches_per_step()


def test_flat_lora_update_equals_per_tensor_updates(rng):
    adapter = adapter_256(rng)
    adapter.flat_params[...] = rng.standard_normal(adapter.flat_params.size).astype(np.float32)
    per_tensor = {k: v.copy() for k, v in adapter.named_tensors().items()}
    refs = {k: v.astype(np.float64) for k, v in per_tensor.items()}
    states = {
        k: {"exp_avg": np.zeros(v.shape), "exp_avg_sq": np.zeros(v.shape)} for k, v in per_tensor.items()
    }
    hyper = {**ADAMW.defaults, "lr": 1e-2}
    keys = list(per_tensor)
    with (
        adapter.optimizer("adamw", lr=1e-2) as flat_opt,
        vk_adam.AdamW(list(per_tensor.values()), lr=1e-2) as opt,
    ):
        for t in range(1, 6):
            grads = {k: random_grad(rng, v.shape) for k, v in per_tensor.items()}
            update_lora_adapter(adapter, flat_opt, grads)
            opt.step([grads[k] for k in keys])
            for k in keys:
                ADAMW.reference(refs[k], grads[k].astype(np.float64), states[k], hyper, t)
    named = adapter.named_tensors()
    for k in keys:
        np.testing.assert_array_equal(named[k], per_tensor[k])  # elementwise math: bit-identical
        assert scale_error(named[k], refs[k]) <= 2e-6


def test_lora_init_and_scale(rng):
    a = LoRAAdapter.create(layers=2, in_features=100, out_features=30, rank=8, alpha=16, rng=rng)
    assert a.scale == 2.0
    assert LoRAAdapter.create(layers=1, in_features=4, rank=4, alpha=8, use_rslora=True).scale == 4.0
    for m in a.modules:
        assert m.a_shape == (8, 100) and m.b_shape == (30, 8)
        assert np.all(a.weight(m.path, "B") == 0)
        w = a.weight(m.path, "A")
        assert np.abs(w).max() <= 1 / np.sqrt(100) and w.std() > 0.3 / np.sqrt(100)
    offsets = [o for o, _ in a.slices().values()]
    assert all(o % 64 == 0 for o in offsets)
    assert [m.path for m in a.modules][:2] == [
        "model.layers.0.self_attn.q_proj",
        "model.layers.0.self_attn.v_proj",
    ]


def test_update_rejects_bad_gradients_without_changes(rng):
    adapter = LoRAAdapter.create(layers=1, in_features=8, rank=2, rng=rng)
    with adapter.optimizer("adamw") as opt:
        before = adapter.flat_params.copy()
        key = next(iter(adapter.named_tensors()))
        with pytest.raises(ValueError, match="unknown LoRA tensors"):
            update_lora_adapter(adapter, opt, {"nope": np.zeros(3)})
        # the message names the expected key form, and the key meant when only the prefix is missing
        short = key.removeprefix("base_model.model.")
        with pytest.raises(ValueError) as refused:
            update_lora_adapter(adapter, opt, {short: np.zeros(3)})
        message = str(refused.value)
        assert "'base_model.model.<module path>.lora_A.weight' or '...lora_B.weight'" in message
        assert f"such as {next(iter(adapter.slices()))!r}" in message and f"did you mean {key!r}?" in message
        with pytest.raises(ValueError, match="has shape"):
            update_lora_adapter(adapter, opt, {key: np.zeros((3, 3))})
        np.testing.assert_array_equal(adapter.flat_params, before)


def test_peft_round_trip(rng, tmp_path):
    adapter = LoRAAdapter.create(
        layers=3,
        in_features=16,
        out_features=24,
        rank=4,
        alpha=8,
        target_modules=("q_proj", "v_proj", "dense"),
        rng=rng,
    )
    adapter.flat_params[...] = rng.standard_normal(adapter.flat_params.size).astype(np.float32)
    adapter.save_peft(tmp_path / "a")
    config = json.loads((tmp_path / "a" / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["r"] == 4 and config["lora_alpha"] == 8
    assert config["target_modules"] == ["q_proj", "v_proj", "dense"]
    from safetensors.numpy import load_file

    keys = set(load_file(str(tmp_path / "a" / "adapter_model.safetensors")))
    assert "base_model.model.model.layers.2.self_attn.dense.lora_B.weight" in keys and len(keys) == 18
    loaded = LoRAAdapter.load_peft(tmp_path / "a")
    assert loaded.same_layout(adapter)
    for k, v in adapter.named_tensors().items():
        np.testing.assert_array_equal(loaded.named_tensors()[k], v)


def write_peft_like_another_writer(folder: Path, rng, r=4) -> dict[str, np.ndarray]:
    """What PEFT's save_pretrained writes for a GPT-2-like model with c_attn targets."""
    from safetensors.numpy import save_file

    folder.mkdir()
    tensors = {}
    for layer in range(2):
        base = f"base_model.model.transformer.h.{layer}.attn.c_attn"
        tensors[f"{base}.lora_A.weight"] = rng.standard_normal((r, 32)).astype(np.float32)
        tensors[f"{base}.lora_B.weight"] = rng.standard_normal((96, r)).astype(np.float32)
    save_file(tensors, str(folder / "adapter_model.safetensors"), metadata={"format": "pt"})
    (folder / "adapter_config.json").write_text(
        json.dumps(
            {
                "alpha_pattern": {},
                "auto_mapping": None,
                "base_model_name_or_path": "gpt2",
                "bias": "none",
                "fan_in_fan_out": True,
                "inference_mode": True,
                "init_lora_weights": True,
                "layers_pattern": None,
                "layers_to_transform": None,
                "lora_alpha": 32,
                "lora_dropout": 0.1,
                "modules_to_save": None,
                "peft_type": "LORA",
                "r": r,
                "rank_pattern": {},
                "revision": None,
                "target_modules": ["c_attn"],
                "task_type": "CAUSAL_LM",
                "use_rslora": False,
            }
        )
    )
    return tensors


def test_peft_file_from_another_writer_loads(rng, tmp_path):
    tensors = write_peft_like_another_writer(tmp_path / "gpt2", rng)
    adapter = LoRAAdapter.load_peft(tmp_path / "gpt2")
    assert adapter.rank == 4 and adapter.scale == 8.0 and adapter.tensor_count == 4
    for k, v in tensors.items():
        np.testing.assert_array_equal(adapter.named_tensors()[k], v)
    with adapter.optimizer("adamw") as opt:
        update_lora_adapter(adapter, opt, {k: random_grad(rng, v.shape) for k, v in tensors.items()})


def test_peft_errors_name_the_keys(rng, tmp_path):
    from safetensors.numpy import load_file, save_file

    write_peft_like_another_writer(tmp_path / "x", rng)
    weights = tmp_path / "x" / "adapter_model.safetensors"
    tensors = load_file(str(weights))
    broken = dict(tensors)
    del broken["base_model.model.transformer.h.1.attn.c_attn.lora_B.weight"]
    save_file(broken, str(weights))
    with pytest.raises(PeftFormatError, match=r"missing keys.*h\.1\.attn\.c_attn\.lora_B\.weight"):
        LoRAAdapter.load_peft(tmp_path / "x")
    save_file({**tensors, "base_model.model.lm_head.weight": np.zeros((2, 2), np.float32)}, str(weights))
    with pytest.raises(PeftFormatError, match=r"unknown keys.*lm_head\.weight"):
        LoRAAdapter.load_peft(tmp_path / "x")
    wrong = dict(tensors)
    wrong["base_model.model.transformer.h.0.attn.c_attn.lora_A.weight"] = np.zeros((5, 32), np.float32)
    save_file(wrong, str(weights))
    with pytest.raises(PeftFormatError, match=r"h\.0\.attn\.c_attn: lora_A \(5, 32\) must be \[r=4, in\]"):
        LoRAAdapter.load_peft(tmp_path / "x")
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(PeftFormatError, match="unreadable"):
        LoRAAdapter.load_peft(tmp_path / "x")


def test_checkpoint_resume_is_bit_identical_and_keyed_by_name(rng, tmp_path):
    def run(steps, ckpt_at=None, resume_from=None):
        adapter = LoRAAdapter.create(layers=4, in_features=24, rank=4, rng=np.random.default_rng(7))
        data = np.random.default_rng(11)
        with adapter.optimizer("adamw", lr=1e-2, amsgrad=True) as opt:
            start = load_checkpoint(resume_from, adapter, opt, rng=data).step if resume_from else 0
            for step in range(start, steps):
                for m in adapter.modules:
                    adapter.grad(m.path, "A")[...] = data.standard_normal(m.a_shape)
                    adapter.grad(m.path, "B")[...] = data.standard_normal(m.b_shape)
                update_lora_adapter(adapter, opt)
                if ckpt_at == step + 1:
                    save_checkpoint(tmp_path / "c.safetensors", adapter, opt, rng=data)
        return adapter

    full = run(12)
    run(7, ckpt_at=5)  # "killed" after step 7, last checkpoint at step 5
    resumed = run(12, resume_from=tmp_path / "c.safetensors")
    np.testing.assert_array_equal(full.flat_params, resumed.flat_params)
    from safetensors import safe_open

    with safe_open(str(tmp_path / "c.safetensors"), framework="numpy") as f:
        keys = set(f.keys())
    assert "state/exp_avg/base_model.model.model.layers.3.self_attn.v_proj.lora_B.weight" in keys
    assert "state/max_exp_avg_sq/base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight" in keys


def test_bad_checkpoints_are_refused_and_nothing_changes(rng, tmp_path):
    adapter = LoRAAdapter.create(layers=2, in_features=16, rank=2, rng=rng)
    with adapter.optimizer("adamw", lr=1e-2) as opt:
        fill_grads(adapter, rng)
        update_lora_adapter(adapter, opt)
        path = save_checkpoint(tmp_path / "c.safetensors", adapter, opt)
        good = path.read_bytes()
        fill_grads(adapter, rng)
        update_lora_adapter(adapter, opt)
        params, sd = adapter.flat_params.copy(), opt.state_dict()
        path.write_bytes(good[: len(good) // 2])  # truncated
        with pytest.raises(CheckpointError, match="truncated or corrupted"):
            load_checkpoint(path, adapter, opt)
        corrupted = bytearray(good)
        corrupted[-5] ^= 0xFF
        path.write_bytes(bytes(corrupted))
        with pytest.raises(CheckpointError, match="checksum mismatch"):
            load_checkpoint(path, adapter, opt)
        np.testing.assert_array_equal(adapter.flat_params, params)
        assert opt.state_dict()["state"][0]["step"] == sd["state"][0]["step"] == 2
    other = LoRAAdapter.create(layers=3, in_features=16, rank=2, rng=rng)
    path.write_bytes(good)
    with other.optimizer("adamw") as opt2:
        with pytest.raises(CheckpointError, match="different adapter layout"):
            load_checkpoint(path, other, opt2)
    with other.optimizer("sgd") as opt3:
        with pytest.raises(CheckpointError, match="rule 'adamw'"):
            load_checkpoint(path, other, opt3)


def test_failed_save_keeps_the_previous_checkpoint(rng, tmp_path, monkeypatch):
    adapter = LoRAAdapter.create(layers=1, in_features=8, rank=2, rng=rng)
    with adapter.optimizer("adamw") as opt:
        path = save_checkpoint(tmp_path / "c.safetensors", adapter, opt)
        good = path.read_bytes()

        def crash(*args):
            raise OSError("disk full")

        monkeypatch.setattr(os, "fsync", crash)
        fill_grads(adapter, rng)
        update_lora_adapter(adapter, opt)
        with pytest.raises(OSError, match="disk full"):
            save_checkpoint(path, adapter, opt)
    assert path.read_bytes() == good
    assert [p.name for p in tmp_path.iterdir()] == ["c.safetensors"]  # no temp file left behind


def test_torch_adamw_state_round_trip(rng):
    torch = pytest.importorskip("torch")
    adapter = LoRAAdapter.create(layers=2, in_features=12, rank=3, rng=rng)
    with adapter.optimizer("adamw", lr=1e-2) as opt:
        for _ in range(3):
            fill_grads(adapter, rng)
            update_lora_adapter(adapter, opt)
        exported = export_torch_adamw_state(adapter, opt)
        # continue in torch
        tparams = [torch.tensor(v.copy(), requires_grad=True) for v in adapter.named_tensors().values()]
        topt = torch.optim.AdamW(tparams, lr=1e-2)
        topt.load_state_dict(exported)
        grads = {k: random_grad(rng, v.shape) for k, v in adapter.named_tensors().items()}
        for tp, g in zip(tparams, grads.values(), strict=False):
            tp.grad = torch.from_numpy(g.copy())
        topt.step()
        update_lora_adapter(adapter, opt, grads)
        for tp, v in zip(tparams, adapter.named_tensors().values(), strict=False):
            assert scale_error(v, tp.detach().numpy()) <= 1e-5
        # and back from torch
        other = LoRAAdapter.create(layers=2, in_features=12, rank=3, rng=rng)
        with other.optimizer("adamw", lr=1e-2) as opt2:
            import_torch_adamw_state(other, opt2, topt.state_dict())
            sd = opt2.state_dict()["state"][0]
            assert sd["step"] == 4.0
            first = next(iter(other.slices().values()))
            np.testing.assert_allclose(
                sd["exp_avg"][first[0] : first[0] + first[1][0] * first[1][1]],
                topt.state_dict()["state"][0]["exp_avg"].numpy().reshape(-1),
            )


@pytest.mark.exclusive  # needs the machine to itself (scripts/test.sh runs it alone)
@pytest.mark.slow  # three demo processes, one killed
def test_killed_demo_resumes_bit_for_bit(tmp_path):
    args = [
        "--steps",
        "150",
        "--layers",
        "2",
        "--dim",
        "32",
        "--checkpoint-every",
        "10",
        "--no-compare",
        "--quiet",
    ]
    cmd = [sys.executable, "-m", "vk_adam", "demo", *args]
    subprocess.run([*cmd, "--out", str(tmp_path / "full")], check=True, capture_output=True)
    killed = subprocess.Popen(
        [*cmd, "--out", str(tmp_path / "killed")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    ckpt = tmp_path / "killed" / "checkpoint.safetensors"
    deadline = time.monotonic() + 60
    while not ckpt.exists() and time.monotonic() < deadline and killed.poll() is None:
        time.sleep(0.005)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert ckpt.exists(), "the demo wrote no checkpoint before it was killed"
    assert not (tmp_path / "killed" / "summary.json").exists(), "killed too late: the run had finished"
    subprocess.run([*cmd, "--out", str(tmp_path / "killed"), "--resume"], check=True, capture_output=True)
    from safetensors.numpy import load_file

    full = load_file(str(tmp_path / "full" / "adapter" / "adapter_model.safetensors"))
    resumed = load_file(str(tmp_path / "killed" / "adapter" / "adapter_model.safetensors"))
    assert full.keys() == resumed.keys()
    for k in full:
        np.testing.assert_array_equal(full[k], resumed[k])
    summary = json.loads((tmp_path / "killed" / "summary.json").read_text())
    assert summary["resumed_from_step"] >= 10
    assert summary["losses"] == json.loads((tmp_path / "full" / "summary.json").read_text())["losses"]


def test_demo_outputs(tmp_path):
    from vk_adam.cli import main

    vk_adam.AdamW([np.zeros(8, np.float32)]).close()  # a device that cannot run AdamW refuses it here
    assert (
        main(["demo", "--steps", "300", "--layers", "2", "--dim", "32", "--out", str(tmp_path), "--quiet"])
        == 0
    )
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["loss_reduction"] >= 100
    assert summary["max_relative_gap_vs_float64_reference"] < 1e-2
    assert summary["dispatches_per_step"] == 1
    assert (tmp_path / "loss_curve.png").read_bytes()[:4] == b"\x89PNG"
    assert LoRAAdapter.load_peft(tmp_path / "adapter").tensor_count == 8


_ = optimizer_module


def test_device_resident_adapter_takes_gradients_written_on_the_device(rng, kp_manager, tmp_path):
    """The application's shaders write the flat gradient buffer; no host copy per step."""
    host = LoRAAdapter.create(
        layers=4, in_features=32, rank=4, target_modules=QKVO, rng=np.random.default_rng(5)
    )
    dev = LoRAAdapter.create(
        layers=4, in_features=32, rank=4, target_modules=QKVO, rng=np.random.default_rng(5)
    )
    kp = kp_module()
    with (
        host.optimizer("adamw", lr=1e-2) as hopt,
        dev.optimizer("adamw", lr=1e-2, manager=kp_manager) as dopt,
    ):
        assert dopt.dispatches_per_step() == 1
        for _ in range(4):
            fill_grads(host, rng)
            grad_buffer = dopt.grad_buffer()
            grad_buffer.data()[:] = host.flat_grads  # stands in for the application's shader write
            kp_manager.sequence().eval(kp.OpTensorSyncDevice([grad_buffer]))
            update_lora_adapter(host, hopt)
            update_lora_adapter(dev, dopt)
        dev.pull_params()
        np.testing.assert_array_equal(dev.flat_params, host.flat_params)
        save_checkpoint(tmp_path / "c.safetensors", dev, dopt)
        dev.flat_params[...] = 0
        dev.push_params()
        load_checkpoint(tmp_path / "c.safetensors", dev, dopt)  # restores the device copy too
        dev.pull_params()
        np.testing.assert_array_equal(dev.flat_params, host.flat_params)
