"""Issue 9, items 1-6: checkpoints verified to the last byte and loaded all-or-nothing, and
LoRA updates that check every gradient before writing any.

Each ``test_item_N_*`` is the regression test of item N. The property tests at the end flip
every byte of a small checkpoint (and fuzz its metadata behind a recomputed checksum) and
assert that each load is refused with CheckpointError, leaving params, optimizer state, step
and RNG bit-identical, or gives exactly the result of loading the intact file.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vk_adam._errors import OptimizerClosedError
from vk_adam.lora import (
    CheckpointError,
    LoRAAdapter,
    load_checkpoint,
    save_checkpoint,
    update_lora_adapter,
)

from ..conftest import module_seed, random_grad

# -- helpers -------------------------------------------------------------------------------------


def small_adapter(seed: int, **kwargs: Any) -> LoRAAdapter:
    """Two modules (q, v of one layer), rank 2: four tensors, a checkpoint of a few KiB."""
    options: dict[str, Any] = {"layers": 1, "in_features": 8, "out_features": 6, "rank": 2}
    options.update(kwargs)
    return LoRAAdapter.create(rng=np.random.default_rng(seed), **options)


def fill_grads(adapter: LoRAAdapter, rng: np.random.Generator) -> None:
    for m in adapter.modules:
        adapter.grad(m.path, "A")[...] = random_grad(rng, m.a_shape)
        adapter.grad(m.path, "B")[...] = random_grad(rng, m.b_shape)


def train(adapter: LoRAAdapter, opt: Any, rng: np.random.Generator, steps: int) -> None:
    for _ in range(steps):
        fill_grads(adapter, rng)
        update_lora_adapter(adapter, opt)


def snapshot(adapter: LoRAAdapter, opt: Any, rng: np.random.Generator | None) -> dict[str, Any]:
    """Everything a load may change, as bytes (bit-identical comparison, NaN included)."""
    sd = opt.state_dict()
    state = {
        index: {
            name: float(value) if name == "step" else np.asarray(value).tobytes()
            for name, value in entry.items()
        }
        for index, entry in sd["state"].items()
    }
    return {
        "params": adapter.flat_params.tobytes(),
        "grads": adapter.flat_grads.tobytes(),
        "state": state,
        "groups": [{k: v for k, v in g.items() if k != "params"} for g in sd["param_groups"]],
        "rng": rng.bit_generator.state if rng is not None else None,
    }


def read_checkpoint(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A checkpoint's vk_adam metadata (parsed) and its tensors."""
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        meta = json.loads(f.metadata()["vk_adam"])
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    return meta, tensors


CHECKSUM_KEY = "vk_adam_sha256"  # the documented scheme: see vk_adam/lora/checkpoint_format.py, "checkpoints"


def write_signed(path: Path, meta: Any, tensors: dict[str, np.ndarray], raw_meta: str | None = None) -> None:
    """Write a checkpoint as a careless tool (or a bug) would: edited content behind a checksum
    that matches it. Signed both ways (the whole-file checksum, and the tensor digest that
    format 1 kept in its metadata) so the same edit also reaches the loader of the old format.
    """
    from safetensors.numpy import save

    if isinstance(meta, dict) and "sha256" in meta:
        h = hashlib.sha256()
        for key in sorted(tensors):
            h.update(key.encode())
            h.update(np.ascontiguousarray(tensors[key]).tobytes())
        meta = {**meta, "sha256": h.hexdigest()}
    text = raw_meta if raw_meta is not None else json.dumps(meta)
    data = save(tensors, metadata={"vk_adam": text, CHECKSUM_KEY: "0" * 64})
    marker = f'"{CHECKSUM_KEY}":"'.encode()
    at = data.index(marker) + len(marker)
    digest = hashlib.sha256(data[:at] + b"0" * 64 + data[at + 64 :]).hexdigest().encode()
    path.write_bytes(data[:at] + digest + data[at + 64 :])


def assert_refused_unchanged(
    path: Path, adapter: LoRAAdapter, opt: Any, rng: np.random.Generator | None, match: str | None = None
) -> None:
    before = snapshot(adapter, opt, rng)
    with pytest.raises(CheckpointError, match=match):
        load_checkpoint(path, adapter, opt, rng=rng)
    assert snapshot(adapter, opt, rng) == before


def setup_saved(tmp_path: Path, seed: int, steps: int = 2, **opt_kwargs: Any) -> tuple[Any, ...]:
    """An adapter trained ``steps`` steps and saved with its RNG, then trained one step more (so
    that a load that changes anything is visible). Returns adapter, opt, data rng, path."""
    adapter = small_adapter(seed)
    data = np.random.default_rng(seed + 1)
    opt = adapter.optimizer("adamw", **({"lr": 1e-2} | opt_kwargs))
    train(adapter, opt, data, steps)
    path = save_checkpoint(tmp_path / "c.safetensors", adapter, opt, rng=data)
    train(adapter, opt, data, 1)
    return adapter, opt, data, path


@pytest.fixture
def seed(vk_seed: int) -> int:
    """This test's seed (tests/conftest.py: derived from VK_ADAM_TEST_SEED and the test's id)."""
    return vk_seed


# -- item 1: the checksum covers the metadata -------------------------------------------------------


def test_item_1_edited_step_or_lr_is_refused(tmp_path, seed):
    adapter = small_adapter(seed)
    data = np.random.default_rng(seed + 1)
    with adapter.optimizer("adamw", lr=0.01) as opt:
        train(adapter, opt, data, 1)
        path = save_checkpoint(tmp_path / "c.safetensors", adapter, opt, rng=data)
        good = path.read_bytes()
        train(adapter, opt, data, 1)
        edits = [(b'\\"step\\": 1,', b'\\"step\\": 9,'), (b'\\"lr\\": 0.01,', b'\\"lr\\": 0.09,')]
        both = good
        for old, new in edits:
            assert good.count(old) == 1  # the edit the issue made, byte for byte
            path.write_bytes(good.replace(old, new))
            assert_refused_unchanged(path, adapter, opt, data, match="checksum")
            both = both.replace(old, new)
        path.write_bytes(both)
        assert_refused_unchanged(path, adapter, opt, data, match="checksum")
        path.write_bytes(good)  # the intact file still loads, at step 1 with lr 0.01
        assert load_checkpoint(path, adapter, opt, rng=data).step == 1
        assert opt.param_groups[0]["lr"] == 0.01
        assert opt.state_dict()["state"][0]["step"] == 1


# -- item 2: no half-applied loads ----------------------------------------------------------------


def test_item_2_unknown_rng_or_wrong_shape_changes_nothing(tmp_path, seed):
    adapter, opt, data, path = setup_saved(tmp_path, seed)
    with opt:
        meta, tensors = read_checkpoint(path)
        assert opt.state_dict()["state"][0]["step"] == 3 and meta["step"] == 2
        # The issue's case: an unknown bit generator, after params and state were overwritten.
        write_signed(path, {**meta, "rng": {**meta["rng"], "bit_generator": "PCG65"}}, tensors)
        assert_refused_unchanged(path, adapter, opt, data, match="PCG65")
        # A state for another bit generator than the one passed.
        other = np.random.MT19937(seed).state
        other["state"]["key"] = other["state"]["key"].tolist()
        write_signed(path, {**meta, "rng": other}, tensors)
        assert_refused_unchanged(path, adapter, opt, data, match="MT19937")
        # A malformed state of the right generator.
        write_signed(path, {**meta, "rng": {**meta["rng"], "state": {"state": -1}}}, tensors)
        assert_refused_unchanged(path, adapter, opt, data, match="RNG state")
        # A param tensor of the wrong shape (the issue's NumPy broadcast error), a state tensor
        # of the wrong shape, of the wrong dtype, and a missing one.
        key = next(k for k in tensors if k.startswith("param/") and k.endswith("lora_A.weight"))
        state_key = next(k for k in tensors if k.startswith("state/exp_avg_sq/"))
        bad_tensors: list[dict[str, np.ndarray]] = [
            {**tensors, key: np.ascontiguousarray(tensors[key].T)},
            {**tensors, state_key: tensors[state_key].reshape(-1)},
            {**tensors, state_key: tensors[state_key].astype(np.float64)},
            {k: v for k, v in tensors.items() if k != state_key},
            {**tensors, "param/extra.weight": tensors[key]},
        ]
        for edited in bad_tensors:
            write_signed(path, meta, edited)
            assert_refused_unchanged(path, adapter, opt, data)
        write_signed(path, meta, tensors)  # the same file re-signed unchanged loads
        expected_rng = meta["rng"]
        assert load_checkpoint(path, adapter, opt, rng=data).step == 2
        assert data.bit_generator.state == expected_rng
        assert opt.state_dict()["state"][0]["step"] == 2


def test_item_2_rng_passed_to_a_checkpoint_without_one_is_refused(tmp_path, seed):
    adapter = small_adapter(seed)
    data = np.random.default_rng(seed + 1)
    with adapter.optimizer("adamw") as opt:
        train(adapter, opt, data, 1)
        path = save_checkpoint(tmp_path / "c.safetensors", adapter, opt)  # no rng=
        train(adapter, opt, data, 1)
        assert_refused_unchanged(path, adapter, opt, data, match="no RNG state")
        assert load_checkpoint(path, adapter, opt).rng_state is None


# -- item 3: malformed metadata raises the checkpoint error -----------------------------------------


def metadata_cases(meta: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Name -> edited metadata; every one must be refused with CheckpointError."""
    hyper = meta["hyperparameters"]
    without = {k: {kk: vv for kk, vv in meta.items() if kk != k} for k in ("rule", "step", "modules")}
    return {
        "not an object": [meta],  # type: ignore[dict-item]
        "no rule": without["rule"],
        "no step": without["step"],
        "no modules": without["modules"],
        "format 1": {**meta, "format": "vk-adam-checkpoint/1", "sha256": ""},
        "format 3": {**meta, "format": "vk-adam-checkpoint/3"},
        "step inf": {**meta, "step": float("inf")},  # int(inf): OverflowError
        "step nan": {**meta, "step": float("nan")},
        "step 1e300": {**meta, "step": 10**300},
        "step three": {**meta, "step": "three"},
        "step -1": {**meta, "step": -1},
        "step 1.5": {**meta, "step": 1.5},
        "step true": {**meta, "step": True},
        "step 0 with state": {**meta, "step": 0},
        "lr three": {**meta, "hyperparameters": {**hyper, "lr": "three"}},
        "lr -1": {**meta, "hyperparameters": {**hyper, "lr": -1.0}},
        "lr 1e400": {**meta, "hyperparameters": {**hyper, "lr": 10**400}},
        "betas one": {**meta, "hyperparameters": {**hyper, "betas": [0.9]}},
        "betas text": {**meta, "hyperparameters": {**hyper, "betas": "0.9,0.99"}},
        "amsgrad on": {**meta, "hyperparameters": {**hyper, "amsgrad": True}},
        "amsgrad 1": {**meta, "hyperparameters": {**hyper, "amsgrad": 1}},
        "unknown hyper": {**meta, "hyperparameters": {**hyper, "momentum": 0.9}},
        "hyper list": {**meta, "hyperparameters": [1]},
        "modules 5": {**meta, "modules": 5},
        "modules rank true": {**meta, "modules": [[m[0], m[1], m[2], True] for m in meta["modules"]]},
        "modules reordered": {**meta, "modules": meta["modules"][::-1]},
        "adapter missing": {**meta, "adapter": None},
        "rank 3": {**meta, "adapter": {**meta["adapter"], "r": 3}},
        "extra list": {**meta, "extra": [1]},
        "rng text": {**meta, "rng": "PCG64"},
        "rng no name": {**meta, "rng": {"state": meta["rng"]["state"]}},
        "rule sgd": {**meta, "rule": "sgd"},
    }


def test_item_3_malformed_metadata_raises_checkpoint_error(tmp_path, seed):
    adapter, opt, data, path = setup_saved(tmp_path, seed)
    with opt:
        meta, tensors = read_checkpoint(path)
        failures = []
        for name, edited in metadata_cases(meta).items():
            write_signed(path, edited, tensors)
            try:
                assert_refused_unchanged(path, adapter, opt, data)
            except (Exception, pytest.fail.Exception) as exc:  # collect every case, report all at once
                failures.append(f"{name}: {type(exc).__name__}: {exc}")
        for name, raw in {"invalid JSON": '{"format": ', "JSON number": "3", "empty": ""}.items():
            write_signed(path, meta, tensors, raw_meta=raw)
            try:
                assert_refused_unchanged(path, adapter, opt, data)
            except (Exception, pytest.fail.Exception) as exc:
                failures.append(f"{name}: {type(exc).__name__}: {exc}")
        assert not failures, "\n".join(failures)


def test_item_3_format_1_files_are_refused_with_a_clear_message(tmp_path, seed):
    adapter, opt, data, path = setup_saved(tmp_path, seed)
    with opt:
        meta, tensors = read_checkpoint(path)
        from safetensors.numpy import save

        # A format-1 file as the previous vk-adam wrote it: no whole-file checksum.
        old_meta = {**meta, "format": "vk-adam-checkpoint/1", "sha256": "0" * 64}
        path.write_bytes(save(tensors, metadata={"vk_adam": json.dumps(old_meta)}))
        assert_refused_unchanged(path, adapter, opt, data, match="vk-adam-checkpoint/1.*cannot be verified")
        path.write_bytes(save(tensors, metadata={"other": "x"}))
        assert_refused_unchanged(path, adapter, opt, data, match="no vk-adam checksum")
        for content in (b"", b"\x01", b"\xff" * 8 + b"{}", os.urandom(64)):
            path.write_bytes(content)
            assert_refused_unchanged(path, adapter, opt, data, match="truncated|checksum")
        path.unlink()
        assert_refused_unchanged(path, adapter, opt, data, match="not found")
        path.mkdir()
        assert_refused_unchanged(path, adapter, opt, data, match="cannot be read")


# -- item 4: the LoRA scale settings are checked ----------------------------------------------------


def test_item_4_other_alpha_or_rslora_is_refused(tmp_path, seed):
    adapter = small_adapter(seed, alpha=16.0)
    data = np.random.default_rng(seed + 1)
    with adapter.optimizer("adamw") as opt:
        train(adapter, opt, data, 1)
        path = save_checkpoint(tmp_path / "c.safetensors", adapter, opt, rng=data)
    for kwargs, match in (
        ({"alpha": 32.0}, "lora_alpha=16.0"),
        ({"alpha": 16.0 * (1 + 2**-40)}, "lora_alpha=16.0"),  # not rounded away
        ({"use_rslora": True}, "use_rslora=False"),
    ):
        other = small_adapter(seed, **kwargs)
        assert other.modules == adapter.modules and other.scale != adapter.scale
        with other.optimizer("adamw") as other_opt:
            train(other, other_opt, np.random.default_rng(seed + 2), 1)
            assert_refused_unchanged(path, other, other_opt, data, match=match)
    same = small_adapter(seed + 3, alpha=16.0)  # other weights, same settings: loads
    with same.optimizer("adamw") as same_opt:
        load_checkpoint(path, same, same_opt)
        np.testing.assert_array_equal(same.flat_params, adapter.flat_params)


# -- item 5: temp files of a killed save do not stay ------------------------------------------------

KILLED_SAVE = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np
    from vk_adam.lora import LoRAAdapter, save_checkpoint, update_lora_adapter

    path, seed = sys.argv[1], int(sys.argv[2])
    adapter = LoRAAdapter.create(layers=1, in_features=8, out_features=6, rank=2,
                                 rng=np.random.default_rng(seed))
    with adapter.optimizer("adamw") as opt:
        save_checkpoint(path, adapter, opt)
        adapter.flat_grads[...] = np.random.default_rng(seed).standard_normal(adapter.flat_grads.size)
        update_lora_adapter(adapter, opt)
        # SIGKILL once the new file's bytes are written, before the rename: the worst moment.
        os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)
        save_checkpoint(path, adapter, opt)
    """
)


def orphans(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_item_5_orphaned_temp_files_are_removed_by_the_next_load_or_save(tmp_path, seed):
    path = tmp_path / "c.safetensors"
    run = subprocess.run(
        [sys.executable, "-c", KILLED_SAVE, str(path), str(seed)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == -signal.SIGKILL, run.stderr
    left = orphans(tmp_path)
    assert len(left) == 1 and left[0].name.startswith(".c.safetensors.")
    assert left[0].stat().st_size > path.stat().st_size  # a full (step-1) file, beside the step-0 one
    # Files that are not temp files of this checkpoint are left alone.
    keep = [
        tmp_path / ".c.safetensors.bak.k2j4h6g8.tmp",  # a temp file of checkpoint c.safetensors.bak
        tmp_path / "c.safetensors.tmp",
        tmp_path / ".d.safetensors.k2j4h6g8.tmp",
    ]
    for p in keep:
        p.write_bytes(b"x")
    adapter = small_adapter(seed)
    with adapter.optimizer("adamw") as opt:
        assert load_checkpoint(path, adapter, opt).step == 0  # the last complete save
        assert orphans(tmp_path) == sorted(keep)
        stale = tmp_path / ".c.safetensors.a1b2c3d4.tmp"
        stale.write_bytes(os.urandom(4096))  # another killed save, found by the next save
        save_checkpoint(path, adapter, opt)
        assert orphans(tmp_path) == sorted(keep)
        # A corrupted checkpoint is refused, and its stale temp files still go.
        stale.write_bytes(b"x")
        path.write_bytes(path.read_bytes()[:-1])
        with pytest.raises(CheckpointError):
            load_checkpoint(path, adapter, opt)
        assert orphans(tmp_path) == sorted(keep)


def test_item_5_a_failed_save_removes_its_temp_file_and_keeps_the_checkpoint(tmp_path, seed, monkeypatch):
    adapter = small_adapter(seed)
    with adapter.optimizer("adamw") as opt:
        path = save_checkpoint(tmp_path / "c.safetensors", adapter, opt)
        good = path.read_bytes()
        train(adapter, opt, np.random.default_rng(seed), 1)

        def full_disk(*args: Any) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(os, "replace", full_disk)
        with pytest.raises(OSError, match="No space"):
            save_checkpoint(path, adapter, opt)
    assert path.read_bytes() == good
    assert orphans(tmp_path) == []


# -- item 6: update_lora_adapter checks every gradient before writing any -----------------------------


def bad_gradients(shape: tuple[int, int], rng: np.random.Generator) -> dict[str, tuple[Any, type]]:
    """Name -> (gradient, the error it must raise)."""
    good = random_grad(rng, shape)
    requires = torch.from_numpy(good.copy()).requires_grad_(True)
    return {
        "strings": (np.full(shape, "x"), TypeError),
        "int64": (rng.integers(-5, 5, shape), TypeError),
        "int32": (rng.integers(-5, 5, shape).astype(np.int32), TypeError),
        "bool": (good > 0, TypeError),
        "complex": (good.astype(np.complex64), TypeError),
        "object": (good.astype(object), TypeError),
        "torch int64": (torch.ones(shape, dtype=torch.int64), TypeError),
        "torch requires grad": (requires, TypeError),
        "ragged list": ([[1.0, 2.0], [3.0]], TypeError),
        "wrong shape": (random_grad(rng, shape[::-1]), ValueError),
        "torch wrong shape": (torch.zeros(shape[::-1]), ValueError),
        "scalar": (1.0, ValueError),
    }


def test_item_6_a_bad_gradient_at_any_key_writes_nothing(seed):
    rng = np.random.default_rng(seed)
    adapter, twin = small_adapter(seed), small_adapter(seed)
    keys = list(adapter.slices())
    with adapter.optimizer("adamw", lr=1e-2) as opt, twin.optimizer("adamw", lr=1e-2) as twin_opt:
        fill_grads(adapter, rng)
        twin.flat_grads[...] = adapter.flat_grads  # gradients written through adapter.grad()
        before = adapter.flat_grads.copy()
        failures = []
        for position in (0, len(keys) - 1):  # the bad one first, and after all the good ones
            shape = adapter.slices()[keys[position]][1]
            for name, (bad, error) in bad_gradients(shape, rng).items():
                grads = {k: random_grad(rng, adapter.slices()[k][1]) for k in keys}
                grads[keys[position]] = bad
                try:
                    with pytest.raises(error, match="gradient for"):
                        update_lora_adapter(adapter, opt, grads)
                    np.testing.assert_array_equal(adapter.flat_grads, before)
                except (Exception, pytest.fail.Exception) as exc:
                    failures.append(f"{name} at key {position}: {type(exc).__name__}: {exc}")
        assert not failures, "\n".join(failures)
        # No stale gradient from the refused calls reaches the next update.
        update_lora_adapter(adapter, opt)
        update_lora_adapter(twin, twin_opt)
        np.testing.assert_array_equal(adapter.flat_params, twin.flat_params)
        assert opt.state_dict()["state"][0]["step"] == 1


def test_item_6_int64_is_refused_like_step_refuses_it(seed):
    rng = np.random.default_rng(seed)
    adapter = small_adapter(seed)
    key, (_, shape) = next(iter(adapter.slices().items()))
    grad = rng.integers(-3, 3, shape)
    with adapter.optimizer("adamw") as opt:
        with pytest.raises(TypeError, match="int64"):
            update_lora_adapter(adapter, opt, {key: grad})
        with pytest.raises(TypeError, match="int64"):
            opt.step([np.zeros(adapter.flat_params.shape, np.int64)])  # the rule it follows
        assert not adapter.flat_grads.any()


def test_item_6_closed_optimizer_or_refused_step_writes_nothing(seed):
    rng = np.random.default_rng(seed)
    adapter = small_adapter(seed)
    grads = {k: random_grad(rng, shape) for k, (_, shape) in adapter.slices().items()}
    fill_grads(adapter, rng)
    before = adapter.flat_grads.copy()
    opt = adapter.optimizer("adamw")
    # step() itself refuses (a schedule set an invalid learning rate): the gradients written
    # for it are taken back.
    opt.param_groups[0]["lr"] = -1.0
    with pytest.raises(ValueError, match="learning rate"):
        update_lora_adapter(adapter, opt, grads)
    np.testing.assert_array_equal(adapter.flat_grads, before)
    opt.close()
    with pytest.raises(OptimizerClosedError):
        update_lora_adapter(adapter, opt, grads)
    np.testing.assert_array_equal(adapter.flat_grads, before)
    with pytest.raises(OptimizerClosedError):
        update_lora_adapter(adapter, opt, {"unknown": 1})  # closed is reported first


def test_item_6_other_float_dtypes_convert_with_a_warning(seed):
    """bfloat16 (torch) and float64/float16 (NumPy) are converted as Optimizer.step converts:
    the update equals the one with the float32 values of the same gradients."""
    rng = np.random.default_rng(seed)
    adapter, twin = small_adapter(seed), small_adapter(seed)
    slices = adapter.slices()
    keys = list(slices)
    makers: list[Callable[[np.ndarray], Any]] = [
        lambda g: torch.from_numpy(g).to(torch.bfloat16),
        lambda g: g.astype(np.float64),
        lambda g: g.astype(np.float16),
        lambda g: torch.from_numpy(g),  # float32 tensor: no warning needed
    ]
    grads = {k: makers[i % len(makers)](random_grad(rng, slices[k][1])) for i, k in enumerate(keys)}
    as_f32 = {
        k: (v.float().numpy() if isinstance(v, torch.Tensor) else v.astype(np.float32))
        for k, v in grads.items()
    }
    with adapter.optimizer("adamw", lr=1e-2) as opt, twin.optimizer("adamw", lr=1e-2) as twin_opt:
        with pytest.warns(UserWarning, match="converting to float32") as caught:
            update_lora_adapter(adapter, opt, grads)
        assert {str(w.message).split(" is ")[1].split(";")[0] for w in caught} == {
            "torch.bfloat16",
            "float64",
            "float16",
        }
        update_lora_adapter(twin, twin_opt, as_f32)
        np.testing.assert_array_equal(adapter.flat_params, twin.flat_params)


# -- properties: every byte of a checkpoint verified --------------------------------------------------


class Saved:
    """A small checkpoint, the state that loading it gives, and a different state to load it into."""

    def __init__(self, folder: Path, seed: int) -> None:
        self.adapter = small_adapter(seed, target_modules=("q_proj",))
        self.rng = np.random.default_rng(seed + 1)
        self.opt = self.adapter.optimizer("adamw", lr=1e-2, amsgrad=True)
        train(self.adapter, self.opt, self.rng, 2)
        self.path = folder / "c.safetensors"
        self.good = save_checkpoint(self.path, self.adapter, self.opt, rng=self.rng).read_bytes()
        self.loaded = snapshot(self.adapter, self.opt, self.rng)
        train(self.adapter, self.opt, self.rng, 1)  # the state every load starts from
        self.pre_path = save_checkpoint(folder / "pre.safetensors", self.adapter, self.opt, rng=self.rng)
        self.pre = snapshot(self.adapter, self.opt, self.rng)
        assert self.pre != self.loaded

    def try_load(self, content: bytes) -> str:
        """Load ``content``; assert refuse-and-unchanged or the intact file's result."""
        self.path.write_bytes(content)
        try:
            load_checkpoint(self.path, self.adapter, self.opt, rng=self.rng)
        except CheckpointError:
            assert snapshot(self.adapter, self.opt, self.rng) == self.pre
            return "refused"
        # Any exception other than CheckpointError fails the test where it is raised.
        assert snapshot(self.adapter, self.opt, self.rng) == self.loaded
        load_checkpoint(self.pre_path, self.adapter, self.opt, rng=self.rng)  # back to the start
        return "identical"


@pytest.fixture(scope="module")
def saved(request, tmp_path_factory):
    s = Saved(tmp_path_factory.mktemp("flips"), module_seed(request))
    yield s
    s.opt.close()


def property_settings(examples: int) -> settings:
    slow = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]
    return settings(max_examples=examples, deadline=None, suppress_health_check=slow)


@property_settings(4)
@given(data=st.data())
def test_every_byte_flipped_is_refused_or_identical(saved, data):
    """Each byte position of the file in turn, XORed with a mask hypothesis draws for it (a zero
    drawn becomes a single bit, so hypothesis' first, all-zero draw flips one bit per byte)."""
    good = saved.good
    masks = data.draw(st.binary(min_size=len(good), max_size=len(good)), label="masks")
    outcomes = {"refused": 0, "identical": 0}
    for position in range(len(good)):
        flipped = bytearray(good)
        flipped[position] ^= masks[position] or 1 << (position % 8)
        outcomes[saved.try_load(bytes(flipped))] += 1
    assert outcomes["refused"] + outcomes["identical"] == len(good)
    assert saved.try_load(good) == "identical"  # and the intact file loads


edits = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(1, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 10**6), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, 10**6), st.integers(0, 255)),
    st.tuples(st.just("delete"), st.integers(0, 10**6), st.just(0)),
)


@property_settings(150)
@given(changes=st.lists(edits, min_size=1, max_size=4))
def test_random_edits_are_refused_or_identical(saved, changes):
    content = bytearray(saved.good)
    for kind, where, value in changes:
        at = where % (len(content) + 1)
        if kind == "flip" and at < len(content):
            content[at] ^= value
        elif kind == "truncate":
            del content[at:]
        elif kind == "insert":
            content.insert(at, value)
        elif kind == "delete" and at < len(content):
            del content[at]
    result = saved.try_load(bytes(content))
    assert result == "refused" or bytes(content) == saved.good


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def replace_at(tree: Any, route: list[int], value: Any) -> Any:
    """``tree`` with the node that ``route`` picks (indices modulo each level's size) replaced."""
    if not route or not isinstance(tree, (dict, list)) or not tree:
        return value
    if isinstance(tree, dict):
        key = sorted(tree)[route[0] % len(tree)]
        return {**tree, key: replace_at(tree[key], route[1:], value)}
    index = route[0] % len(tree)
    return [*tree[:index], replace_at(tree[index], route[1:], value), *tree[index + 1 :]]


@property_settings(150)
@given(route=st.lists(st.integers(0, 50), max_size=4), value=json_values)
def test_metadata_fuzzed_behind_a_valid_checksum_is_refused_or_loads(saved, route, value):
    """Whatever a field of the metadata becomes, the only error is CheckpointError, and a
    refused load changes nothing (an accepted one may load other, valid, values)."""
    meta, tensors = read_checkpoint(saved.pre_path)
    path = saved.path
    write_signed(path, replace_at(meta, route, value), tensors)
    try:
        load_checkpoint(path, saved.adapter, saved.opt, rng=saved.rng)
    except CheckpointError:
        assert snapshot(saved.adapter, saved.opt, saved.rng) == saved.pre
        return
    load_checkpoint(saved.pre_path, saved.adapter, saved.opt, rng=saved.rng)
    assert snapshot(saved.adapter, saved.opt, saved.rng) == saved.pre
