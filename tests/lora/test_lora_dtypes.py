"""LoRA adapters in float16 and bfloat16: training, PEFT files and checkpoints keep their dtype,
and the optimizer's compressed state (bfloat16, 8-bit blockwise, stochastic rounding) survives a
checkpoint bit for bit."""

from __future__ import annotations

import json
import struct
import warnings
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from vk_adam.lora import (
    CheckpointError,
    LoRAAdapter,
    PeftFormatError,
    load_checkpoint,
    save_checkpoint,
    update_lora_adapter,
)

from ..conftest import random_grad

BF16 = np.dtype(ml_dtypes.bfloat16)
HALF = ("float16", "bfloat16")


def make(dtype: Any, seed: int = 3) -> LoRAAdapter:
    """q and v of two layers, 5120 elements: enough for 8-bit state (4096 and up), with
    alignment padding inside the quantization blocks (A is 8 x 90, B 60 x 8)."""
    return LoRAAdapter.create(
        layers=2, in_features=90, out_features=60, rank=8, dtype=dtype, rng=np.random.default_rng(seed)
    )


def bits(array: np.ndarray) -> np.ndarray:
    """The bit patterns of an array of 16- or 32-bit values (NaN-safe, exact comparison)."""
    return np.ascontiguousarray(array).view(np.uint16 if array.dtype.itemsize == 2 else np.uint32)


def header(path: Path) -> dict[str, Any]:
    """The tensor entries of a safetensors file's JSON header (its metadata left out)."""
    data = path.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    parsed: dict[str, Any] = json.loads(data[8 : 8 + size])
    parsed.pop("__metadata__", None)
    return parsed


def fill_grads(adapter: LoRAAdapter, rng: np.random.Generator) -> None:
    for m in adapter.modules:
        adapter.grad(m.path, "A")[...] = random_grad(rng, m.a_shape)
        adapter.grad(m.path, "B")[...] = random_grad(rng, m.b_shape)


# -- the adapter ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", HALF)
def test_training_changes_weights_and_keeps_the_dtype(rng, dtype):
    adapter = make(dtype)
    np_dtype = np.dtype(np.float16) if dtype == "float16" else BF16
    assert adapter.dtype == dtype and f"dtype={dtype}" in repr(adapter)
    assert adapter.flat_params.dtype == adapter.flat_grads.dtype == np_dtype
    path = adapter.modules[0].path
    assert adapter.weight(path, "A").dtype == adapter.grad(path, "B").dtype == np_dtype
    assert all(v.dtype == np_dtype for v in adapter.named_tensors().values())
    assert (
        np.all(adapter.weight(path, "B") == 0)
        and np.abs(adapter.weight(path, "A").astype(np.float32)).max() > 0
    )
    before = adapter.flat_params.copy()
    with adapter.optimizer("adamw", lr=1e-2) as opt:
        for _ in range(2):  # gradients written into the views
            fill_grads(adapter, rng)
            update_lora_adapter(adapter, opt)
        grads = {k: random_grad(rng, v.shape).astype(np_dtype) for k, v in adapter.named_tensors().items()}
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the adapter's own dtype converts nothing
            update_lora_adapter(adapter, opt, grads)
        as_f32 = {k: v.astype(np.float32) for k, v in grads.items()}
        with pytest.warns(UserWarning, match=f"converting to {dtype}"):
            update_lora_adapter(adapter, opt, as_f32)
    assert adapter.flat_params.dtype == np_dtype and adapter.flat_grads.dtype == np_dtype
    for offset, shape in adapter.slices().values():  # every tensor, most of its weights
        end = offset + shape[0] * shape[1]
        assert np.mean(bits(adapter.flat_params[offset:end]) != bits(before[offset:end])) > 0.5
    assert np.all(np.isfinite(adapter.flat_params.astype(np.float32)))
    delta = adapter.delta(path)
    assert delta.dtype == np.float32 and np.abs(delta).max() > 0


def test_torch_gradients_convert_to_the_adapter_dtype(rng):
    torch = pytest.importorskip("torch")
    adapter, twin = make("bfloat16"), make("bfloat16")
    with adapter.optimizer("adamw", lr=1e-2) as opt, twin.optimizer("adamw", lr=1e-2) as twin_opt:
        grads = {k: torch.randn(v.shape, dtype=torch.float32) for k, v in adapter.named_tensors().items()}
        as_bf16 = {k: v.to(torch.bfloat16) for k, v in grads.items()}
        with pytest.warns(UserWarning, match=r"torch\.float32; converting to bfloat16"):
            update_lora_adapter(adapter, opt, grads)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            update_lora_adapter(twin, twin_opt, as_bf16)  # same bits, no conversion
    np.testing.assert_array_equal(bits(adapter.flat_params), bits(twin.flat_params))


def test_bad_dtype_and_on_device_16_bit_adapters_are_refused(kp_manager):
    for bad in ("float64", np.float64, "int8", "fp16", None, object()):
        with pytest.raises(ValueError, match=r"'float32', 'float16', 'bfloat16'"):
            make(bad)
    assert make(np.float16).dtype == "float16" and make(BF16).dtype == "bfloat16"
    assert make(np.dtype(np.float32)).dtype == "float32"
    with pytest.raises(ValueError, match=r"on-device adapters \(manager=\) are float32.*manager=None"):
        make("bfloat16").optimizer("adamw", manager=kp_manager)


# -- PEFT files -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("dtype", "code"), [("float16", "F16"), ("bfloat16", "BF16"), ("float32", "F32")])
def test_peft_round_trip_keeps_dtype_and_bits(rng, tmp_path, dtype, code):
    adapter = make(dtype)
    for value in adapter.named_tensors().values():
        value[...] = rng.standard_normal(value.shape).astype(value.dtype)
    adapter.save_peft(tmp_path / "a")
    found = header(tmp_path / "a" / "adapter_model.safetensors")
    assert {v["dtype"] for v in found.values()} == {code}
    loaded = LoRAAdapter.load_peft(tmp_path / "a")
    assert loaded.dtype == dtype and loaded.same_layout(adapter)
    for key, value in adapter.named_tensors().items():
        np.testing.assert_array_equal(bits(loaded.named_tensors()[key]), bits(value))
    as_f32 = LoRAAdapter.load_peft(tmp_path / "a", dtype="float32")
    assert as_f32.dtype == "float32"
    for key, value in adapter.named_tensors().items():
        np.testing.assert_array_equal(as_f32.named_tensors()[key], value.astype(np.float32))


def write_torch_peft(folder: Path, tensors: dict[str, Any]) -> None:
    from safetensors.torch import save_file

    folder.mkdir()
    save_file(tensors, str(folder / "adapter_model.safetensors"), metadata={"format": "pt"})
    config = {"peft_type": "LORA", "r": 4, "lora_alpha": 8, "target_modules": ["q_proj"]}
    (folder / "adapter_config.json").write_text(json.dumps(config))


def test_bf16_file_written_by_torch_loads_as_bfloat16(tmp_path):
    torch = pytest.importorskip("torch")
    generator = torch.Generator().manual_seed(0)
    base = "base_model.model.model.layers.0.self_attn.q_proj"
    tensors = {
        f"{base}.lora_A.weight": torch.randn(4, 32, generator=generator).to(torch.bfloat16),
        f"{base}.lora_B.weight": torch.randn(24, 4, generator=generator).to(torch.bfloat16),
    }
    write_torch_peft(tmp_path / "t", tensors)
    adapter = LoRAAdapter.load_peft(tmp_path / "t")
    assert adapter.dtype == "bfloat16" and adapter.rank == 4 and adapter.scale == 2.0
    for key, value in tensors.items():
        expected = value.view(torch.int16).numpy().view(np.uint16)
        np.testing.assert_array_equal(bits(adapter.named_tensors()[key]), expected)
    # mixed dtypes load as float32 (holding both exactly); integers are refused
    mixed = {**tensors, f"{base}.lora_B.weight": tensors[f"{base}.lora_B.weight"].to(torch.float16)}
    write_torch_peft(tmp_path / "m", mixed)
    loaded = LoRAAdapter.load_peft(tmp_path / "m")
    assert loaded.dtype == "float32"
    for key, value in mixed.items():
        np.testing.assert_array_equal(loaded.named_tensors()[key], value.float().numpy())
    write_torch_peft(
        tmp_path / "i", {**tensors, f"{base}.lora_A.weight": torch.zeros(4, 32, dtype=torch.int32)}
    )
    with pytest.raises(PeftFormatError, match=r"lora_A\.weight is int32"):
        LoRAAdapter.load_peft(tmp_path / "i")


# -- checkpoints ----------------------------------------------------------------------------------

CASES = [
    ("bfloat16", "int8-blockwise", False),
    ("float16", "bfloat16", True),
    ("bfloat16", "bfloat16", True),
    ("float32", "int8-blockwise", False),
]


def run(
    dtype: str,
    storage: dict[str, Any],
    folder: Path,
    steps: int,
    ckpt_at: int | None = None,
    resume: bool = False,
) -> tuple[LoRAAdapter, dict[str, Any] | None]:
    """Train ``steps`` steps on the same data; save at ``ckpt_at`` (returning the state dict
    saved), or resume from the saved checkpoint with an optimizer of another seed."""
    adapter = make(dtype)
    data = np.random.default_rng(5)
    saved = None
    options = {**storage, "seed": 0 if resume else storage["seed"]}
    with adapter.optimizer("adamw", lr=1e-2, **options) as opt:
        start = load_checkpoint(folder / "c.safetensors", adapter, opt, rng=data).step if resume else 0
        if resume:  # the rounding stream's seed came back with the state
            assert opt.state_dict()["param_groups"][0]["seed"] == storage["seed"]
        for step in range(start, steps):
            fill_grads(adapter, data)
            update_lora_adapter(adapter, opt)
            if ckpt_at == step + 1:
                save_checkpoint(folder / "c.safetensors", adapter, opt, rng=data)
                saved = opt.state_dict()
                saved["params"] = adapter.flat_params.copy()
    return adapter, saved


@pytest.mark.parametrize(("dtype", "state_dtype", "stochastic"), CASES)
def test_checkpoint_is_bit_exact_and_resume_is_bit_identical(tmp_path, dtype, state_dtype, stochastic):
    storage = {"state_dtype": state_dtype, "stochastic_rounding": stochastic, "seed": 1234}
    full, _ = run(dtype, storage, tmp_path, 7)
    _, saved = run(dtype, storage, tmp_path, 5, ckpt_at=3)  # "killed" after step 5
    assert saved is not None
    found = header(tmp_path / "c.safetensors")
    # the state as the optimizer stores it: state/<name>/<key>, absmax/<name>, param/<key>
    kinds = {}
    for key, entry in found.items():
        kinds[key.split("/")[1] if key.startswith("state/") else key.split("/")[0]] = entry["dtype"]
    expected_state = {"float32": "F32", "bfloat16": "BF16", "int8-blockwise": "U8"}[state_dtype]
    assert kinds["exp_avg"] == kinds["exp_avg_sq"] == expected_state
    assert ("master_param" in kinds) == (dtype != "float32" and not stochastic)
    assert ("absmax" in kinds) == (state_dtype == "int8-blockwise")

    # loaded into a fresh optimizer (another seed): every stored bit is back
    adapter = make(dtype, seed=9)
    with adapter.optimizer("adamw", lr=1e-2, **{**storage, "seed": 0}) as opt:
        load_checkpoint(tmp_path / "c.safetensors", adapter, opt)
        sd = opt.state_dict()
        np.testing.assert_array_equal(bits(adapter.flat_params), bits(saved["params"]))
    assert sd["param_groups"][0]["seed"] == 1234 and sd["param_groups"][0]["state_dtype"] == state_dtype
    entry, saved_entry = sd["state"][0], saved["state"][0]
    assert set(entry) == set(saved_entry) and entry["step"] == saved_entry["step"] == 3.0
    for name, value in saved_entry.items():
        if name != "step":
            assert entry[name].dtype == value.dtype, name
            assert entry[name].tobytes() == value.tobytes(), name

    resumed, _ = run(dtype, storage, tmp_path, 7, resume=True)
    np.testing.assert_array_equal(bits(resumed.flat_params), bits(full.flat_params))
    if stochastic:  # the seed matters: another one gives other params
        other, _ = run(dtype, {**storage, "seed": 99}, tmp_path, 7)
        assert not np.array_equal(bits(other.flat_params), bits(full.flat_params))


def snapshot(adapter: LoRAAdapter, opt: Any) -> tuple[bytes, Any]:
    sd = opt.state_dict()
    state = {i: {k: np.asarray(v).tobytes() for k, v in e.items()} for i, e in sd["state"].items()}
    return adapter.flat_params.tobytes(), (state, sd["param_groups"])


def test_mismatched_dtype_or_storage_is_refused_and_float32_state_converts(rng, tmp_path):
    adapter = make("bfloat16")
    with adapter.optimizer("adamw", lr=1e-2, state_dtype="int8-blockwise", seed=5) as opt:
        fill_grads(adapter, rng)
        update_lora_adapter(adapter, opt)
        path = save_checkpoint(tmp_path / "c.safetensors", adapter, opt)
    refusals = [
        ("float16", {"state_dtype": "int8-blockwise"}, r"holds a bfloat16 adapter; this adapter is float16"),
        ("float32", {"state_dtype": "int8-blockwise"}, r"holds a bfloat16 adapter"),
        (
            "bfloat16",
            {"state_dtype": "bfloat16"},
            r"int8-blockwise optimizer state.*state_dtype='int8-blockwise'",
        ),
        ("bfloat16", {"state_dtype": "float32"}, r"int8-blockwise optimizer state"),
        (
            "bfloat16",
            {"state_dtype": "int8-blockwise", "stochastic_rounding": True},
            "stochastic_rounding=False",
        ),
    ]
    for dtype, storage, match in refusals:
        other = make(dtype, seed=8)
        with other.optimizer("adamw", lr=1e-2, **storage) as other_opt:
            fill_grads(other, rng)
            update_lora_adapter(other, other_opt)
            before = snapshot(other, other_opt)
            with pytest.raises(CheckpointError, match=match):
                load_checkpoint(path, other, other_opt)
            assert snapshot(other, other_opt) == before

    # float32 state (of a float32 adapter) loads into a compressed optimizer, converted
    f32 = make("float32")
    with f32.optimizer("adamw", lr=1e-2) as f32_opt:
        fill_grads(f32, rng)
        update_lora_adapter(f32, f32_opt)
        expected = f32_opt.state_dict()["state"][0]
        path = save_checkpoint(tmp_path / "f32.safetensors", f32, f32_opt)
    target = make("float32", seed=8)
    with target.optimizer("adamw", lr=1e-2, state_dtype="bfloat16") as target_opt:
        load_checkpoint(path, target, target_opt)
        entry = target_opt.state_dict()["state"][0]
        assert entry["exp_avg"].dtype == BF16
        np.testing.assert_array_equal(bits(entry["exp_avg"]), bits(expected["exp_avg"].astype(BF16)))
        np.testing.assert_array_equal(target.flat_params, f32.flat_params)


def test_step_0_checkpoint_of_a_16_bit_adapter_seeds_the_master_copy(rng, tmp_path):
    """Before any step the file holds no optimizer state: the loaded weights are the master
    copy's, and training goes on exactly as from the saved adapter."""
    saved = make("bfloat16", seed=1)
    with saved.optimizer("adamw", lr=1e-2) as opt:
        path = save_checkpoint(tmp_path / "c.safetensors", saved, opt)
        grads = {k: random_grad(rng, v.shape).astype(BF16) for k, v in saved.named_tensors().items()}
        update_lora_adapter(saved, opt, grads)
    other = make("bfloat16", seed=2)
    with other.optimizer("adamw", lr=1e-2) as opt:
        load_checkpoint(path, other, opt)
        update_lora_adapter(other, opt, grads)
    np.testing.assert_array_equal(bits(other.flat_params), bits(saved.flat_params))


def test_a_refused_optimizer_load_puts_the_weights_back(rng, tmp_path, monkeypatch):
    adapter = make("float16")
    with adapter.optimizer("adamw", lr=1e-2) as opt:
        fill_grads(adapter, rng)
        update_lora_adapter(adapter, opt)
        path = save_checkpoint(tmp_path / "c.safetensors", adapter, opt)
        fill_grads(adapter, rng)
        update_lora_adapter(adapter, opt)
        before = snapshot(adapter, opt)

        def refuse(state_dict: Any) -> None:
            raise ValueError("refused")

        monkeypatch.setattr(opt, "load_state_dict", refuse)
        with pytest.raises(CheckpointError, match="refused its state"):
            load_checkpoint(path, adapter, opt)
        monkeypatch.undo()
        assert snapshot(adapter, opt) == before


def test_checkpoints_without_dtype_or_storage_load_as_float32(rng, tmp_path):
    """Files written before 16-bit adapters (no ``dtype``/``storage`` metadata) are float32."""
    from safetensors.numpy import save

    from vk_adam.lora.checkpoint_format import CHECKSUM_KEY, _seal

    adapter = make("float32")
    with adapter.optimizer("adamw", lr=1e-2) as opt:
        fill_grads(adapter, rng)
        update_lora_adapter(adapter, opt)
        path = save_checkpoint(tmp_path / "c.safetensors", adapter, opt)
        expected = snapshot(adapter, opt)
        from safetensors import safe_open

        with safe_open(str(path), framework="numpy") as f:
            meta = json.loads(f.metadata()["vk_adam"])
            tensors = {k: f.get_tensor(k) for k in f.keys()}
        assert meta.pop("dtype") == "float32" and meta.pop("storage")["state_dtype"] == "float32"
        old = save(tensors, metadata={"vk_adam": json.dumps(meta), CHECKSUM_KEY: "0" * 64})
        path.write_bytes(_seal(old))
        fill_grads(adapter, rng)
        update_lora_adapter(adapter, opt)
        load_checkpoint(path, adapter, opt)
        assert snapshot(adapter, opt) == expected


def test_torch_export_decodes_compressed_state(rng):
    pytest.importorskip("torch")
    from vk_adam.lora import export_torch_adamw_state

    adapter = make("float32")
    with adapter.optimizer("adamw", lr=1e-2, state_dtype="int8-blockwise") as opt:
        fill_grads(adapter, rng)
        update_lora_adapter(adapter, opt)
        exported = export_torch_adamw_state(adapter, opt)
        decoded = opt.state_dict(float32=True)["state"][0]["exp_avg"]
    offset, shape = next(iter(adapter.slices().values()))
    first = exported["state"][0]["exp_avg"].numpy()
    assert first.dtype == np.float32 and first.shape == shape
    np.testing.assert_array_equal(first.reshape(-1), decoded[offset : offset + first.size])
