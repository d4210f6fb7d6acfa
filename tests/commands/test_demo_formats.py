"""`vk-adam demo` with storage formats (--param-dtype, --state-dtype, --stochastic-rounding): the
demo's own task trained in each format against float32, and the flags end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vk_adam._commands.demo import train_vk
from vk_adam._commands.demo.config import DemoConfig
from vk_adam._commands.demo.model import fresh_run, make_dataset, teacher
from vk_adam._formats import INT8_MIN_ELEMENTS
from vk_adam.cli import main
from vk_adam.lora import LoRAAdapter

# Each format's final loss over float32's (params and state), on the demo's default model (4
# layers x q,v at dim 64, rank 8: 8192 LoRA elements, so int8-blockwise state really is 8-bit)
# and its 300 steps on the host path, same initial weights and batches. Measured on lavapipe
# over seeds 0-4 (seed 0 first, then the range over the five):
#   bfloat16 state                          1.0075  (1.0030 .. 1.0127)
#   int8-blockwise state                    0.9956  (0.9915 .. 0.9999)
#   bfloat16 params, fp32 master            1.0047  (1.0017 .. 1.0047)
#   bfloat16 params, fp32 master,
#     int8 state                            1.0093  (0.9922 .. 1.0093)
#   bfloat16 params, stochastic rounding,
#     int8 state                            1.0311  (1.0308 .. 1.0373)
#   (bfloat16 params, stochastic rounding, fp32 state: 1.0383, 1.0239 .. 1.0434; float16 params
#   with a master: 1.0004, 0.9994 .. 1.0004)
# The worst is 4.3% above float32; the bound leaves about three times that.
FINAL_LOSS_FACTOR = 1.15
# The final losses sit near the noise floor (the target noise's MSE on the last batch, ~9e-6), which
# hides how much of the fit a format loses; the loss *above* that floor shows it. Its ratio to
# float32's, measured likewise: bfloat16 state 1.06 .. 1.08, int8 state 0.94 .. 1.00, bfloat16
# params with a master 1.03 .. 1.09 (with int8 state 0.95 .. 1.17), stochastic rounding with int8
# state 1.25 .. 1.66 (seed 0: 1.32; with fp32 state 1.29 .. 1.60).
EXCESS_FACTOR = 2.5

CONFIGS: dict[str, dict[str, Any]] = {
    "float32": {},
    "bfloat16 state": {"state_dtype": "bfloat16"},
    "int8 state": {"state_dtype": "int8-blockwise"},
    "bfloat16 params (master)": {"param_dtype": "bfloat16"},
    "bfloat16 params (stochastic rounding), int8 state": {
        "param_dtype": "bfloat16",
        "state_dtype": "int8-blockwise",
        "stochastic_rounding": True,
    },
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[list[float], dict[str, Any]]]:
    out = tmp_path_factory.mktemp("formats")
    result = {}
    for name, formats in CONFIGS.items():
        cfg = DemoConfig(**formats)  # the demo's defaults otherwise: same model, weights, batches
        _, losses, info = train_vk(cfg, out, device=None, checkpoint_every=0, resume=False, progress=False)
        result[name] = (losses, info)
    return result


def noise_floor(cfg: DemoConfig) -> float:
    """The loss the exact (planted) weights have on the last batch: the target noise alone."""
    _, model, _ = fresh_run(cfg)
    x, y = make_dataset(cfg, model)
    return float(np.mean((teacher(model, x[-1]) - y[-1].astype(np.float64)) ** 2))


def test_every_format_trains_about_as_far_as_float32(runs):
    floor = noise_floor(DemoConfig())
    ref = runs["float32"][0][-1]
    rows = []
    for name, (losses, _) in runs.items():
        ratio, excess = losses[-1] / ref, (losses[-1] - floor) / (ref - floor)
        rows.append(f"{name:52s} final {losses[-1]:.4e}  ratio {ratio:.4f}  above the floor {excess:.2f}")
    print("\n".join(rows))  # pytest -s shows the table
    for name, (losses, _) in runs.items():
        assert losses[-1] < losses[0] / 100, name
        assert 1 / FINAL_LOSS_FACTOR <= losses[-1] / ref <= FINAL_LOSS_FACTOR, rows
        assert 0 < (losses[-1] - floor) / (ref - floor) <= EXCESS_FACTOR, rows


def test_the_formats_hold_less_state(runs):
    base = runs["float32"][1]
    assert base["elements"] >= INT8_MIN_ELEMENTS  # else int8-blockwise would keep fp32 state
    memory = {name: info["memory_bytes"] for name, (_, info) in runs.items()}
    assert memory["bfloat16 state"]["state"] == base["memory_bytes"]["state"] // 2
    assert memory["int8 state"]["state"] == base["memory_bytes"]["state"] // 4
    assert memory["int8 state"]["absmax"] > 0
    master = memory["bfloat16 params (master)"]
    assert master["param"] == base["memory_bytes"]["param"] // 2 and master["master"] > 0
    rounded = memory["bfloat16 params (stochastic rounding), int8 state"]
    assert rounded["master"] == 0 and rounded["state"] < base["memory_bytes"]["state"]
    # resident optimizer memory per param (param, grad, master, state, block scales; not the
    # fixed status and quantization-table buffers): the bound for bf16 + int8 is 6.1
    resident = sum(rounded[k] for k in ("param", "grad", "master", "state", "absmax"))
    assert resident / base["elements"] <= 6.1
    assert base["bytes_per_param"] == base["memory_bytes"]["total"] / base["elements"]


def test_cli_formats_end_to_end(tmp_path, capsys):
    """16-bit params without --host switch to the host path (one line, and summary.json says so);
    the formats, memory and the loss-curve figure land in the outputs."""
    args = ["demo", "--steps", "20", "--quiet", "--out", str(tmp_path), "--param-dtype", "bfloat16"]
    assert main([*args, "--state-dtype", "int8-blockwise", "--stochastic-rounding"]) == 0
    printed = capsys.readouterr().out
    assert "--param-dtype bfloat16 runs on the host path" in printed
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["path"] == "host" and summary["switched_to_host_path"] is True
    assert (summary["param_dtype"], summary["state_dtype"]) == ("bfloat16", "int8-blockwise")
    assert summary["stochastic_rounding"] is True and summary["config"]["stochastic_rounding"] is True
    assert summary["memory_bytes"]["master"] == 0 and summary["memory_bytes"]["state"] > 0
    assert summary["bytes_per_param"] == summary["memory_bytes"]["total"] / summary["elements"]
    assert summary["config"]["param_dtype"] == "bfloat16" and summary["switch_reason"]
    assert LoRAAdapter.load_peft(tmp_path / "adapter").dtype == "bfloat16"
    assert "max_relative_gap_vs_float64_reference" in summary and len(summary["losses"]) == 20
    assert (tmp_path / "loss_curve.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_state_dtype_on_the_resident_path(tmp_path):
    args = ["--steps", "10", "--quiet", "--no-compare", "--checkpoint-every", "5"]
    assert main(["demo", *args, "--out", str(tmp_path / "int8"), "--state-dtype", "int8-blockwise"]) == 0
    assert main(["demo", *args, "--out", str(tmp_path / "fp32"), "--checkpoint-every", "0"]) == 0
    assert (tmp_path / "int8" / "checkpoint.safetensors").exists()
    int8, fp32 = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("int8", "fp32"))
    assert int8["path"] == "resident" and int8["switched_to_host_path"] is False
    assert int8["state_dtype"] == "int8-blockwise"
    assert int8["memory_bytes"]["state"] == fp32["memory_bytes"]["state"] // 4
    assert int8["losses"][-1] < int8["losses"][0]


def test_cli_refuses_stochastic_rounding_of_float32_params(tmp_path):
    """The optimizer's ValueError, as the CLI's one-line error: exit 2, no traceback."""
    cmd = [sys.executable, "-m", "vk_adam", "demo", "--host", "--steps", "2", "--quiet"]
    done = subprocess.run(
        [*cmd, "--stochastic-rounding", "--out", str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("vk-adam: error: stochastic_rounding=True")
    assert "float32" in done.stderr and "Traceback" not in done.stderr
    assert not Path(tmp_path / "summary.json").exists()


def test_a_run_in_16_bit_formats_resumes_bit_for_bit(tmp_path, monkeypatch):
    """Checkpoints keep bfloat16 weights, 8-bit state and the rounding seed: a run stopped after
    step 20 (last checkpoint at 15) and resumed ends exactly where an uninterrupted one does."""
    import vk_adam._commands.demo.run as demo

    cfg = DemoConfig(steps=40, param_dtype="bfloat16", state_dtype="int8-blockwise", stochastic_rounding=True)
    run: dict[str, Any] = {"device": None, "checkpoint_every": 15, "progress": False}
    (tmp_path / "full").mkdir()
    (tmp_path / "stopped").mkdir()
    full_adapter, full, _ = train_vk(cfg, tmp_path / "full", resume=False, **run)

    def stop_after_20(*_args: Any) -> Any:
        seen = []

        def bar(loss: float | None) -> None:
            seen.append(loss)
            if len(seen) == 20:
                raise KeyboardInterrupt

        return bar

    with monkeypatch.context() as patch:
        patch.setattr(demo, "progress_bar", stop_after_20)
        with pytest.raises(KeyboardInterrupt):
            train_vk(cfg, tmp_path / "stopped", resume=False, **run)
    adapter, resumed, info = train_vk(cfg, tmp_path / "stopped", resume=True, **run)
    assert info["resumed_from_step"] == 15 and resumed == full
    assert adapter.dtype == "bfloat16"
    np.testing.assert_array_equal(
        adapter.flat_params.view(np.uint16), full_adapter.flat_params.view(np.uint16)
    )
