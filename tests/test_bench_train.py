"""`vk-adam bench --cases train`: whole training steps of the demo model, resident Vulkan loop
against torch (timings are not asserted: benchmarks measure, tests check the plumbing)."""

from __future__ import annotations

import json

from vk_adam.cli import main


def test_train_bench_writes_a_table_of_training_steps(tmp_path, capsys):
    assert (
        main(["bench", "--cases", "train", "--steps-per-batch", "3", "--out", str(tmp_path), "--quiet"]) == 0
    )
    rows = json.loads((tmp_path / "train.json").read_text())
    ours = rows[0]
    assert ours["backend"] == "vk-adam resident" and ours["steps_per_submission"] == 3
    assert ours["ms_per_step"] > 0 and 0 < ours["update_share"] < 1
    assert any(r["backend"].startswith("torch cpu") and r["vk_adam_speedup"] > 0 for r in rows[1:])
    assert "| vk-adam resident |" in (tmp_path / "train.md").read_text()
    assert "Update share" in capsys.readouterr().out
