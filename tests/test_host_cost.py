"""benchmarks/host_cost.py on the test device: every figure it reports is there, and the ones
that bound each other do, sample by sample and so in their medians (each step's wall time holds
its GPU work, whose span holds the update dispatch)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_host_cost_reports_a_consistent_split():
    spec = importlib.util.spec_from_file_location("host_cost", ROOT / "benchmarks" / "host_cost.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    row = module.measure(1024, 12)
    floor = ("run_dispatch_us", "run_barrier_dispatch_us", "run_step_ops_us", "step_us", "step_legacy_ops_us")
    floor += ("probe_after_step_us", "probe_after_sleep_us", "probe_hot_us")
    for key in ("wall_us", "gpu_us", "gpu_all_ops_us", "host_us", "before_run_us", "after_run_us", *floor):
        assert isinstance(row[key], float) and row[key] > 0, key
    assert row["elements"] == 1024 and row["repeats"] == 12
    assert row["gpu_all_ops_us"] >= row["gpu_us"]  # every sample's span holds its dispatch
    assert row["wall_us"] >= row["gpu_all_ops_us"]
