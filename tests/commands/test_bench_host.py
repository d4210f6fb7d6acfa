"""`vk-adam bench --cases host`: AdamW on NumPy params (import and staging paths, params held on
the device with device_params=True) beside torch CPU (defaults, fused) and torch CUDA with copies
(pageable, pinned), arrays reused and fresh each step (timings are not asserted: benchmarks
measure, tests check the plumbing, that the timed steps ran, that the device_params row computed
the default row's params and that fresh arrays died inside them)."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import re
from typing import Any

import numpy as np
import pytest

import vk_adam
from vk_adam import select_device
from vk_adam._commands.bench import host, host_peers
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
    # the rows by key, with their labels, and what vk-adam's speed-ups are over
    assert report["labels"] == host.LABELS and report["speedup_over"] == list(host.LABELS)[1:]
    rows = {(r["elements"], r["arrays"], r["backend"]): r for r in report["rows"]}
    assert set(rows) == {(n, a, b) for n in SIZES for b, a in host.JOBS if b != "yardsticks"}
    assert (SIZES[0], "fresh", "torch-cuda-pinned") not in rows  # reused arrays only
    torch_here = host.torch_available()
    for n in SIZES:
        for arrays in ("reused", "fresh"):
            for backend in ("vk-adam", "vk-adam-device-params", "vk-adam-staging"):
                vk = rows[(n, arrays, backend)]
                assert _positive(vk["ms"]) and _positive(vk["min_ms"]) and vk["timed_steps"] == 3
                # the timed steps ran: the param moved, and the optimizer counted every step
                assert vk["param_max_change"] > 0 and vk["optimizer_steps"] == 4
                # imports on where the device has them (the row says), never on the staging path
                assert vk["host_import"] in ((False,) if backend == "vk-adam-staging" else (True, False))
                assert vk["device_params"] is (backend == "vk-adam-device-params")
            # the device held the param and copied it out each step: the default row's bytes
            plain, held = rows[(n, arrays, "vk-adam")], rows[(n, arrays, "vk-adam-device-params")]
            assert held["param_sha256"] == plain["param_sha256"] != _sha256(host_peers.Grads(n, arrays).param)
            assert rows[(n, arrays, "vk-adam-staging")]["param_sha256"] == plain["param_sha256"]
            assert _positive(rows[(n, arrays, "vk-adam-staging")]["vk_adam_speedup"])
            assert _positive(held["vk_adam_speedup"])
            for backend in ("torch-cpu", "torch-cpu-fused"):
                cpu = rows[(n, arrays, backend)]
                if not torch_here:
                    assert cpu["skipped"] == "torch is not installed"
                elif "ms" in cpu or backend == "torch-cpu":
                    assert _positive(cpu["ms"]) and cpu["param_max_change"] > 0
                    assert _positive(cpu["vk_adam_speedup"])
                else:  # a torch without fused CPU AdamW says so
                    assert cpu["skipped"].startswith("fused CPU AdamW unavailable")
            for backend in ("torch-cuda", "torch-cuda-pinned")[: 2 if arrays == "reused" else 1]:
                cuda = rows[(n, arrays, backend)]
                if _cuda():
                    assert _positive(cuda["ms"]) and cuda["param_max_change"] > 0
                    # the pinned row against the device_params row (the same semantics)
                    assert backend == "torch-cuda" or _positive(cuda["device_params_speedup"])
                else:
                    assert "ms" not in cuda and cuda["skipped"]
            if arrays == "fresh":  # a new array each step, made while the previous one lived,
                for r in (r for k, r in rows.items() if k[:2] == (n, arrays) and "ms" in r):
                    assert r["distinct_grad_addresses"] >= 2
                    # and the previous one died inside every timed step
                    assert r["previous_grads_freed_in_step"] == 3
        (ticks,) = [y for y in report["yardsticks"] if y["elements"] == n]
        assert _positive(ticks["copyto_ms"])
        assert _positive(ticks.get("pinned_h2d_ms", 1.0)) == _positive(ticks.get("pageable_h2d_ms", 1.0))
    table = (tmp_path / "host.md").read_text()
    assert f"| fp32 elements | grad arrays | {' | '.join(host.LABELS.values())} |" in table
    assert "| 2^12 (0.0156 MiB) | reused |" in table and "| 2^14 (0.0625 MiB) | fresh |" in table
    assert "vk-adam's speed-up" in table and "| vs torch CPU AdamW (defaults) |" in table
    assert "* torch CUDA fused AdamW, pinned host copies: reused arrays only" in table
    assert "vk-adam, device_params=True against torch CUDA fused AdamW, pinned host copies" in table
    for n, label in zip(SIZES, ("2^12 (0.0156 MiB)", "2^14 (0.0625 MiB)"), strict=True):
        line = re.search(rf"^\* {re.escape(label)}: device_params vs torch CUDA pinned: (.+)$", table, re.M)
        assert line is not None, table
        ratio = rows[(n, "reused", "torch-cuda-pinned")].get("device_params_speedup")
        assert line[1] == (f"{ratio:.2f}x" if ratio else "no CUDA" if torch_here else "no torch")
    assert "| fp32 elements | one copy to the GPU, pinned |" in table and table.strip() in out
    assert ("no CUDA" in table) is not _cuda()
    # a progress line per row as it ends, then where the files went
    assert "host 2^12 vk-adam, NumPy params, reused arrays: " in out
    assert "host 2^14 vk-adam, device_params=True, fresh arrays: " in out
    assert "host 2^12 vk-adam, staging path (VK_ADAM_HOST_IMPORT=0), fresh arrays: " in out
    assert "host 2^14 yardsticks: copyto " in out
    assert f"wrote {tmp_path / 'host.json'}, {tmp_path / 'host.md'}" in out


def test_vk_rows_set_the_import_switch_only_while_the_optimizer_is_made(monkeypatch):
    monkeypatch.setenv("VK_ADAM_HOST_IMPORT", "1")
    row = host_peers.bench_vk(2**17, "fresh", select_device().index, 0, 2, host_import=False)
    assert row["host_import"] is False and os.environ["VK_ADAM_HOST_IMPORT"] == "1"
    monkeypatch.delenv("VK_ADAM_HOST_IMPORT")
    row = host_peers.bench_vk(2**17, "reused", select_device().index, 0, 2, host_import=True)
    assert row["host_import"] in (True, False)  # the device's (VK_EXT_external_memory_host)
    assert "VK_ADAM_HOST_IMPORT" not in os.environ


def _sha256(a: np.ndarray) -> str:
    return hashlib.sha256(a.data).hexdigest()


@pytest.mark.parametrize("arrays", ["reused", "fresh"])
def test_the_device_params_row_steps_the_default_rows_params_bit_for_bit(
    monkeypatch: pytest.MonkeyPatch, arrays: str
) -> None:
    """The device_params row makes its optimizer with device_params=True, and after the timed
    steps its NumPy param (copied out of the device each step) is the default row's, byte for byte."""
    made: list[host_peers.Grads] = []
    options: list[dict[str, Any]] = []

    class Recorded(host_peers.Grads):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    class RecordedAdamW(vk_adam.AdamW):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            options.append(kwargs)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(host_peers, "Grads", Recorded)
    monkeypatch.setattr(vk_adam, "AdamW", RecordedAdamW)
    device = select_device().index
    plain = host_peers.bench_vk(2**14, arrays, device, 1, 3)
    held = host_peers.bench_vk(2**14, arrays, device, 1, 3, device_params=True)
    assert [o["device_params"] for o in options] == [False, True]
    start = host_peers.Grads(2**14, arrays).param
    assert not np.array_equal(made[0].param, start)  # the steps moved the param
    assert np.array_equal(made[1].param.view(np.uint32), made[0].param.view(np.uint32))
    assert held["param_sha256"] == plain["param_sha256"] == _sha256(made[1].param)
    assert held["optimizer_steps"] == plain["optimizer_steps"] == 4
    assert held["param_max_change"] == plain["param_max_change"] > 0


def test_fresh_grads_drop_the_previous_array_in_release_only():
    grads = host_peers.Grads(1024, "fresh")
    first = grads.current
    grads.next()  # the new array is made while the previous one lives
    assert grads.previous is first and grads.current is not first
    del first
    grads.release()
    assert grads.previous is None and grads.freed == [True]
    reused = host_peers.Grads(1024, "reused")
    kept = reused.current
    reused.next()
    reused.release()
    assert reused.current is kept and reused.freed == []


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
    # every row on reused arrays; the pinned CUDA row not on fresh ones
    assert "| 2^20 (4 MiB) | reused |" + " 2.000 |" * len(host.LABELS) in table
    assert "| 2^20 (4 MiB) | fresh | 2.000 | 2.000 | 2.000 | 2.000 | 2.000 | 2.000 | n/a | 2.000 |" in table
    assert "| 2^20 (4 MiB) | reused |" + " 1.00x |" * (len(host.LABELS) - 1) in table  # the speed-ups
    assert "| 2^20 (4 MiB) | fresh | 1.00x | 1.00x | 1.00x | 1.00x | 1.00x |  | 1.00x |" in table
    # the device_params row against torch's pinned row, per size
    assert "* 2^20 (4 MiB): device_params vs torch CUDA pinned: 1.00x" in table


def test_host_sizes_parse_and_refuse_nonsense(tmp_path, capsys):
    assert host.parse_sizes("2^12, 4096,2**3") == (4096, 4096, 8)
    assert main(["bench", "--cases", "host", "--host-sizes", "0", "--out", str(tmp_path)]) == 2
    assert "--host-sizes" in capsys.readouterr().err
