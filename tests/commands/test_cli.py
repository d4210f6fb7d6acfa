"""The vk-adam command: info, rules, bench (demo is covered in test_lora.py)."""

from __future__ import annotations

import argparse
import json

import pytest

from vk_adam.cli import main


def test_info_prints_devices_driver_and_choice(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "driver:" in out and "using [" in out


def test_rules_lists_every_rule_with_its_distribution(capsys):
    assert main(["rules"]) == 0
    out = capsys.readouterr().out
    for name in ("adam", "adamw", "sgd", "lion"):
        assert f"\n{name} " in f"\n{out}"
    assert "from vk-adam-lion" in out and "lr=" in out


def test_rules_blocked_and_json(capsys):
    assert main(["rules", "--json", "--block", "lion"]) == 0
    data = json.loads(capsys.readouterr().out)
    names = {r["rule"] for r in data["rules"]}
    assert {"adam", "adamw", "sgd"} <= names and "lion" not in names


def test_bench_writes_table_json_and_plot(tmp_path, capsys):
    assert (
        main(
            ["bench", "--cases", "tiny", "--repeats", "3", "--warmup", "1", "--out", str(tmp_path), "--quiet"]
        )
        == 0
    )
    report = json.loads((tmp_path / "bench.json").read_text())
    results = report["cases"]["tiny-1k"]["results"]
    assert results["vk-adam"]["gpu_ms"] > 0 and results["vk-adam"]["dispatches"] == 1
    assert results["numpy-f64"]["sync_wall_ms"] > 0
    assert "sync_wall_ms" in results["torch-cpu-fused"]["peer_over_vk_adam"]
    assert (tmp_path / "bench.png").read_bytes()[:4] == b"\x89PNG"
    assert "| tiny-1k" in capsys.readouterr().out


def test_bad_arguments_are_one_line_errors(capsys):
    assert main(["bench", "--cases", "nope", "--out", "/tmp/unused-bench"]) == 2
    assert "unknown bench case" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["no-such-command"])


def test_device_choice_follows_argument_then_environment(monkeypatch):
    from vk_adam import DEVICE_ENV, list_devices, select_device

    first = list_devices()[0]
    monkeypatch.setenv(DEVICE_ENV, "0")
    assert select_device() == first
    monkeypatch.setenv(DEVICE_ENV, first.name[:6])
    assert select_device() == first
    assert select_device(0) == first  # the argument wins over the environment
    monkeypatch.setenv(DEVICE_ENV, "no-such-device")
    with pytest.raises(ValueError, match="no Vulkan device name contains 'no-such-device'"):
        select_device()


def test_bench_is_table_driven(tmp_path, monkeypatch, capsys):
    """Cases with tables of their own run first, in the table's order, from OWN_TABLES; every
    backend a case can get has its runner in BACKENDS."""
    from vk_adam._commands.bench import run
    from vk_adam._commands.bench.cases import select_cases

    ran: list[str] = []
    for name in run.OWN_TABLES:
        monkeypatch.setitem(
            run.OWN_TABLES, name, lambda args, info, name=name: ran.append(name) or f"[{name}]"
        )
    assert main(["bench", "--cases", "zero,train", "--out", str(tmp_path), "--quiet"]) == 0
    assert ran == ["train", "zero"] and capsys.readouterr().out.split() == ["[train]", "[zero]"]
    args = argparse.Namespace(cpu_max_elements=2**40)
    backends = {backend for _, backend in run._jobs(select_cases("all", False), args, True, True)}
    assert backends == set(run.BACKENDS)
