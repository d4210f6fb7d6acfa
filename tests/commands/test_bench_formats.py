"""`vk-adam bench --cases formats`: every storage format's row times the GPU (params and gradient
on the device, the update dispatch alone), at sizes lavapipe runs quickly. Timings are not
asserted (benchmarks measure); the plumbing is: every config ran, on device-held params, with the
bytes a step moves by format, and the table says how it timed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from vk_adam import _formats as fmt
from vk_adam._commands.bench.formats import CONFIGS, FormatConfig, bytes_per_element, run_formats_bench

#: 2^16 elements: over the 8-bit threshold (fmt.INT8_MIN_ELEMENTS), so int8 rows hold 8-bit state.
N = 2**16


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("formats")
    table = run_formats_bench(0, True, 10.0, repeats=2, warmup=1, out=out, quiet=True, sizes=(N,))
    return table, json.loads((out / "formats.json").read_text()), (out / "formats.md").read_text(), out


def test_every_param_and_state_format_has_a_timed_row(report):
    _, data, _, _ = report
    rows = {r["config"]: r for r in data["rows"] if r["backend"] == "vk-adam"}
    assert set(rows) == {c.label for c in CONFIGS}
    assert {c.param_dtype for c in CONFIGS} == {"float32", "float16", "bfloat16"}
    assert {c.state_dtype for c in CONFIGS} == {"float32", "bfloat16", "int8-blockwise"}
    assert {(c.param_dtype != "float32", c.stochastic_rounding) for c in CONFIGS} >= {
        (True, True),
        (True, False),
    }
    for cfg in CONFIGS:
        row = rows[cfg.label]
        assert "note" not in row, row
        assert row["elements"] == N
        assert row["gpu_ms"] > 0 and row["GBps"] > 0
        assert row["copy_fraction"] == pytest.approx(row["GBps"] / 10.0)
        assert row["bytes_per_element"] == bytes_per_element(cfg)


def test_every_row_holds_its_params_on_the_device(report):
    _, data, _, _ = report
    for row in (r for r in data["rows"] if r["backend"] == "vk-adam"):
        cfg = next(c for c in CONFIGS if c.label == row["config"])
        expected = (
            "device (kp tensor)" if cfg.param_dtype == "float32" else "device (NumPy, device_params=True)"
        )
        assert row["params"] == expected, row


def test_resident_bytes_follow_the_format(report):
    _, data, _, _ = report
    rows = {r["config"]: r for r in data["rows"] if r["backend"] == "vk-adam"}
    assert rows["fp32 params, fp32 state"]["resident_bytes_per_param"] == pytest.approx(16.0)
    assert rows["bf16 params (SR), bf16 state"]["resident_bytes_per_param"] == pytest.approx(8.0)
    assert rows["bf16 params (SR), int8 state"]["resident_bytes_per_param"] == pytest.approx(
        6.0 + 8.0 / fmt.BLOCK, rel=1e-3
    )
    assert rows["bf16 params + master, int8 state"]["resident_bytes_per_param"] == pytest.approx(
        10.0 + 8.0 / fmt.BLOCK, rel=1e-3
    )


def test_bytes_moved_per_element():
    """Gradient read (not zeroed), param read + written, master read + written, each state
    read + written (8-bit: one byte and its share of the block's fp32 absmax)."""
    int8 = 2.0 + 8.0 / fmt.BLOCK
    assert bytes_per_element(FormatConfig("", "float32", False, "float32")) == 28.0
    assert bytes_per_element(FormatConfig("", "bfloat16", True, "bfloat16")) == 14.0
    assert bytes_per_element(FormatConfig("", "bfloat16", True, "int8-blockwise")) == 6.0 + 2 * int8
    assert bytes_per_element(FormatConfig("", "float16", False, "int8-blockwise")) == 14.0 + 2 * int8


def test_the_table_says_what_it_timed(report):
    table, _, md, _ = report
    assert md.strip() == table.strip()
    assert "the update dispatch alone" in table
    assert "kp tensors" in table and "device_params=True" in table
    for cfg in CONFIGS:
        assert f"| {N:,} | {cfg.label} |" in table


def test_the_bench_draws_its_rows(report):
    *_, out = report
    assert (out / "formats.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_saved_report_renders_again(report, tmp_path):
    """`vk-adam bench --render formats.json --out DIR`: the same table, and the plot, from the
    saved report alone (no device)."""
    _, _, md, out = report
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "vk_adam",
            "bench",
            "--render",
            str(out / "formats.json"),
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "formats.md").read_text() == md
    assert (tmp_path / "formats.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert md.strip() in result.stdout
