"""`vk-adam bench --cases train`: whole training steps of the demo model, resident Vulkan loop
against torch (timings are not asserted: benchmarks measure, tests check the plumbing)."""

from __future__ import annotations

import json

import pytest

from vk_adam.cli import main


def test_train_bench_writes_a_table_of_training_steps(tmp_path, capsys):
    assert (
        main(["bench", "--cases", "train", "--steps-per-batch", "3", "--out", str(tmp_path), "--quiet"]) == 0
    )
    rows = json.loads((tmp_path / "train.json").read_text())
    ours = rows[0]
    assert ours["backend"] == "vk-adam resident" and ours["steps_per_submission"] == 3
    assert ours["ms_per_step"] > 0 and 0 < ours["update_share"] < 1
    assert 0 < ours["eval_ms_per_step"] < ours["ms_per_step"]
    assert ours["app_dispatches_per_step"] == 2 and ours["app_barriers_per_step"] == 2
    assert any(r["backend"].startswith("torch cpu") and r["vk_adam_speedup"] > 0 for r in rows[1:])
    table = (tmp_path / "train.md").read_text()
    assert "| vk-adam resident |" in table
    # The CUDA graph peer: measured where CUDA is, else a row that says why not.
    (graph,) = [r for r in rows if r["backend"].startswith("torch CUDA graph")]
    try:
        import torch

        cuda = torch.cuda.is_available()
    except ImportError:
        cuda = False
    if cuda:
        assert graph["ms_per_step"] > 0 and graph["vk_adam_speedup"] > 0
    else:
        assert graph["skipped"] in ("CUDA is not available", "torch is not installed")
        assert f"| {graph['backend']} | skipped: {graph['skipped']} |" in table
    assert "Update share" in capsys.readouterr().out


def test_the_graphed_torch_step_computes_the_eager_step():
    """What the CUDA graph captures (the batch picked on the device, clipping, fused AdamW),
    run eagerly on the CPU, gives the losses of the eager torch trainer, and wraps around the
    data set."""
    pytest.importorskip("torch")
    from vk_adam._commands.demo.config import DemoConfig
    from vk_adam._commands.demo.torch_peer import torch_graph_trainer, torch_trainer

    cfg = DemoConfig(layers=2, dim=16, rank=2, steps=5, batch=8)
    eager, graphed = torch_trainer(cfg, "cpu", fused=True), torch_graph_trainer(cfg, "cpu")
    want = [float(eager(step).item()) for step in range(cfg.steps)]
    got = [float(graphed().item()) for _ in range(cfg.steps + 1)]
    assert got[: cfg.steps] == want and got[-1] != got[0]  # step 6 is batch 0 again, later weights
