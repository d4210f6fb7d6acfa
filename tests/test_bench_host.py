"""`vk-adam bench --cases host`: AdamW on NumPy params beside torch CPU and torch CUDA with copies,
arrays reused and fresh each step (timings are not asserted: benchmarks measure, tests check the
plumbing and that the timed steps ran)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math

import pytest

from vk_adam import select_device
from vk_adam._commands.bench import host
from vk_adam.cli import main

SIZES = (2**12, 2**14)


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _positive(x: object) -> bool:
    return isinstance(x, float) and math.isfinite(x) and x > 0


def test_host_bench_runs_every_row_at_tiny_sizes(tmp_path, capsys):
    argv = ["bench", "--cases", "host", "--host-sizes", "2^12,2^14", "--repeats", "3", "--warmup", "1"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "host.json").read_text())
    assert "partial" not in report
    meta = report["meta"]
    assert meta["sizes"] == list(SIZES) and meta["skipped_sizes"] == {}
    assert (meta["repeats"], meta["warmup"]) == (3, 1) and "--host-sizes 2^12,2^14" in meta["command"]
    rows = {(r["elements"], r["arrays"], r["backend"]): r for r in report["rows"]}
    assert set(rows) == {(n, a, b) for n in SIZES for a in ("reused", "fresh") for b in host.LABELS}
    torch_here = host.torch_available()
    for n in SIZES:
        for arrays in ("reused", "fresh"):
            vk = rows[(n, arrays, "vk-adam")]
            assert _positive(vk["ms"]) and _positive(vk["min_ms"]) and vk["timed_steps"] == 3
            # the timed steps ran: the param moved, and the optimizer counted every step
            assert vk["param_max_change"] > 0 and vk["optimizer_steps"] == 4
            if arrays == "fresh":  # a new array each step, made while the previous one lived
                assert vk["distinct_grad_addresses"] >= 2
            cpu = rows[(n, arrays, "torch-cpu")]
            if torch_here:
                assert _positive(cpu["ms"]) and cpu["param_max_change"] > 0
                assert cpu["impl"] in ("foreach", "fused") and _positive(cpu["vk_adam_speedup"])
                assert cpu["impl"] == rows[(n, "reused", "torch-cpu")]["impl"]
            else:
                assert cpu["skipped"] == "torch is not installed"
            cuda = rows[(n, arrays, "torch-cuda")]
            if _cuda():
                assert _positive(cuda["ms"]) and cuda["param_max_change"] > 0
            else:
                assert "ms" not in cuda and cuda["skipped"]
        (ticks,) = [y for y in report["yardsticks"] if y["elements"] == n]
        assert _positive(ticks["copyto_ms"])
        assert _positive(ticks.get("pinned_h2d_ms", 1.0)) == _positive(ticks.get("pageable_h2d_ms", 1.0))
    if torch_here:
        assert set(rows[(SIZES[0], "reused", "torch-cpu")]["impls_ms"]) == {"foreach", "fused"}
    table = (tmp_path / "host.md").read_text()
    assert "| fp32 elements | grad arrays | vk-adam, NumPy params | torch CPU AdamW |" in table
    assert "| 2^12 (0.0156 MiB) | reused |" in table and "| 2^14 (0.0625 MiB) | fresh |" in table
    assert "vk-adam's speed-up" in table and table.strip() in out
    if not _cuda():
        assert "no CUDA" in table
    # a progress line per row as it ends, then where the files went
    assert (
        "host 2^12 vk-adam, NumPy params, reused arrays: " in out and "host 2^14 yardsticks: copyto " in out
    )
    assert f"wrote {tmp_path / 'host.json'}, {tmp_path / 'host.md'}" in out


def _args(tmp_path, sizes: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(host_sizes=sizes, repeats=2, warmup=0, out=str(tmp_path), quiet=True)


@pytest.mark.parametrize(("software", "sizes"), [(True, (2**20, 2**24)), (False, host.SIZES)])
def test_default_sizes_and_what_a_software_device_leaves_out(tmp_path, monkeypatch, software, sizes):
    ran = []
    monkeypatch.setattr(host, "_measure", lambda job, *_: ran.append(job[0]) or {"ms": 2.0})
    kind = ("cpu", "llvmpipe") if software else ("discrete", "Some GPU")
    info = dataclasses.replace(select_device(), device_type=kind[0], name=kind[1])
    table = host.run_host_bench(_args(tmp_path), info)
    assert tuple(dict.fromkeys(ran)) == sizes and len(ran) == len(sizes) * len(host.JOBS)
    skipped = json.loads((tmp_path / "host.json").read_text())["meta"]["skipped_sizes"]
    assert list(skipped) == (["2^26"] if software else [])
    assert ("* 2^26 not run: a software Vulkan device" in table) is software
    assert "| 2^20 (4 MiB) | fresh | 2.000 | 2.000 | 2.000 |" in table
    assert "| 2^20 (4 MiB) | reused | 1.00x | 1.00x |" in table  # the speed-ups


def test_host_sizes_parse_and_refuse_nonsense(tmp_path, capsys):
    assert host.parse_sizes("2^12, 4096,2**3") == (4096, 4096, 8)
    assert main(["bench", "--cases", "host", "--host-sizes", "0", "--out", str(tmp_path)]) == 2
    assert "--host-sizes" in capsys.readouterr().err
