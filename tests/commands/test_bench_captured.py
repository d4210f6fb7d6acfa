"""`vk-adam bench`: captured steps (``capturable=True``) beside push-constant ones, one recording
of N steps replayed, and torch's CUDA graph beside them (timings are not asserted: benchmarks
measure, tests check the plumbing: the keys are there and sane, every evaluation of a recording
was that many steps on the device's count, the table says what was skipped)."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vk_adam._commands.bench.cases import Case
from vk_adam._commands.bench.measure import captured_figures
from vk_adam._commands.bench.report import build_report, format_table
from vk_adam._commands.bench.timing import Result
from vk_adam._optim import Optimizer
from vk_adam._runtime import Runtime, host_view, kp_features
from vk_adam.cli import main

needs_region_copies = pytest.mark.skipif(
    "region copies" not in kp_features().patches, reason="capturable=True needs vk-adam's kp (region copies)"
)

#: The keys the plain vk-adam row gains, each a positive float.
TIMES = (
    "captured_gpu_ms",
    "captured_push_gpu_ms",
    "clock_cost_ratio",
    "replay_ms",
    "replay_over_captured_gpu",
    "replay_single_ms",
)


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _positive(x: object) -> bool:
    return isinstance(x, float) and math.isfinite(x) and x > 0


@needs_region_copies
def test_every_evaluation_of_the_recording_is_its_steps_on_the_device_count(rng: np.random.Generator) -> None:
    """``captured_figures`` on two optimizers over the same params: its figures are positive,
    and the capturable optimizer's count (its state dict) is every step it reports having run,
    each evaluation of the N-step recording N of them; the push-constant one took its own."""
    rt = Runtime()
    params = [rt.buffer(rng.standard_normal(3000, dtype=np.float32))]
    rt.run([rt.upload_op(params)])
    kw = {"manager": rt.manager, "zero_grad": False, "lr": 1e-4}
    plain = Optimizer(params, "adamw", profile=True, **kw)
    captured = Optimizer(params, "adamw", capturable=True, **kw)
    try:
        grads = [opt.grad_buffer(0, 0) for opt in (plain, captured)]
        values = rng.standard_normal(3000, dtype=np.float32)
        for g in grads:
            host_view(g)[:] = values
        rt.run([rt.upload_op(grads)])
        args = argparse.Namespace(warmup=2, repeats=5, steps_per_batch=4)
        figures = captured_figures(rt, plain, captured, args)
        for key in TIMES:
            assert _positive(figures[key]), key
        assert figures["replay_steps"] == 4
        # warmup + repeats timed pairs, (3 evaluations + 1 warm-up) x 4 replayed, 5 + 2 one-step
        # evaluations, one closing step
        assert figures["captured_steps_run"] == 2 + 5 + 4 * 4 + 5 + 2 + 1
        assert figures["captured_steps_counted"] == figures["captured_steps_run"]
        assert captured.state_dict()["state"][0]["step"] == figures["captured_steps_run"]
        assert plain.state_dict()["state"][0]["step"] == 2 + 5
        assert plain.profile and not captured.profile  # as they were
    finally:
        captured.close()
        plain.close()
        rt.free_buffer(params[0])
        rt.close()


@needs_region_copies
def test_the_bench_reports_captured_steps_and_says_where_torch_graphs_were_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "--cases", "tiny", "--repeats", "3", "--warmup", "1", "--steps-per-batch", "4"]
    assert main([*argv, "--out", str(tmp_path), "--quiet"]) == 0
    report = json.loads((tmp_path / "bench.json").read_text())
    ours = report["cases"]["tiny-1k"]["results"]["vk-adam"]
    for key in TIMES:
        assert _positive(ours[key]), key
    assert ours["replay_steps"] == 4 and "captured_note" not in ours
    assert ours["captured_steps_counted"] == ours["captured_steps_run"]
    assert ours["gpu_ms"] > 0 and ours["pipelined_ms"] > 0  # the step table's own figures stay
    table = (tmp_path / "bench.md").read_text()
    assert "## Captured steps and replay" in table and "replay ms/step (N)" in table
    (row,) = [line for line in table.splitlines() if line.startswith("| tiny-1k") and "(4)" in line]
    assert row.count("|") == 12  # 11 columns
    assert table in capsys.readouterr().out
    if _cuda():
        torch_row = report["cases"]["tiny-1k"]["results"]["torch-cuda-fused"]
        assert _positive(torch_row["graph_replay_ms"]) and _positive(torch_row["graph_gpu_ms"])
        assert _positive(torch_row["peer_over_vk_adam_replay"]["graph_replay_ms"])
    else:
        assert "torch columns: skipped, CUDA is not available on this machine." in table


def _report(ours: dict[str, Any], torch: Result | None) -> dict[str, Any]:
    case = Case("single-2^20", "single", (2**20,), "one tensor")
    results = [Result(case.name, "vk-adam", gpu_ms=0.01, sync_wall_ms=0.04, pipelined_ms=0.02, extra=ours)]
    if torch is not None:
        results.append(torch)
    meta: dict[str, Any] = {
        "device": "NVIDIA H200",
        "driver": "x",
        "date": "today",
        "vulkan_copy_GBps": 4000.0,
        "eval_prerecorded_ms": 0.03,
        "eval_async_submit_ms": 0.01,
        "eval_await_ms": 0.02,
    }
    if torch is not None:
        meta["cuda_device"] = "NVIDIA H200"
    return build_report([case], results, meta)


def test_the_replay_ratios_put_torch_over_vk_adams_replay() -> None:
    ours: dict[str, Any] = {
        "captured_gpu_ms": 0.011,
        "captured_push_gpu_ms": 0.010,
        "clock_cost_ratio": 1.1,
        "replay_steps": 100,
        "replay_ms": 0.0125,
        "replay_over_captured_gpu": 0.0125 / 0.011,
        "replay_single_ms": 0.04,
    }
    torch = Result(
        "single-2^20",
        "torch-cuda-fused",
        gpu_ms=0.09,
        sync_wall_ms=0.11,
        pipelined_ms=0.025,
        extra={"graph_replay_ms": 0.05, "graph_gpu_ms": 0.045},
    )
    report = _report(ours, torch)
    ratios = report["cases"]["single-2^20"]["results"]["torch-cuda-fused"]["peer_over_vk_adam_replay"]
    assert ratios == pytest.approx({"pipelined_ms": 2.0, "graph_replay_ms": 4.0})
    table = format_table(report)
    row = [line for line in table.splitlines() if line.startswith("| single-2^20") and "(100)" in line]
    assert row == [
        "| single-2^20 (1 t, 1.0M) | 0.01 | 0.011 | 1.100x | 0.0125 (100) | 1.136x | 0.04 | 0.025 | "
        "0.05 (0.045) | 2.000x | 4.000x |"
    ]
    assert "CUDA is not available" not in table


def test_a_report_without_captured_figures_has_no_captured_table_and_a_failure_is_a_note() -> None:
    """A bench.json from before captured steps re-renders as it was; a kp that cannot run them
    leaves a note in the table's row."""
    assert "Captured steps" not in format_table(_report({}, None))
    table = format_table(_report({"captured_note": "no captured steps: DeviceCapabilityError: ..."}, None))
    assert "## Captured steps and replay" in table
    assert "| - | - no captured steps: DeviceCapabilityError: ... |" in table
    assert "torch columns: skipped, CUDA is not available on this machine." in table


@pytest.mark.skipif(not _cuda(), reason="torch's CUDA graph needs CUDA")
def test_torchs_graph_replays_are_steps() -> None:
    """torch's fused capturable AdamW captured in a CUDA graph: every replay is one step."""
    import torch

    from vk_adam._commands.bench.peer_steps import cuda_graph_figures

    params = [torch.randn(4096, device="cuda").requires_grad_() for _ in range(3)]
    for p in params:
        p.grad = torch.randn_like(p)
    figures = cuda_graph_figures(params, 1.0, steps=5, repeats=3, warmup=2)
    assert _positive(figures["graph_replay_ms"]) and _positive(figures["graph_gpu_ms"])
    assert figures["graph_steps_run"] == 3 + 2 + 3 * 5 == figures["graph_steps_counted"]
