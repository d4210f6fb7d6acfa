"""The DeepSpeedCPUAdam row of `vk-adam bench --cases host`: skipped, with its reason, where
deepspeed is absent or its CPU Adam op does not build; where it runs (here with a stand-in class
that is torch's AdamW under DeepSpeedCPUAdam's signature), it times the same steps as the torch CPU
rows on the same arrays, with torch AdamW's hyper-parameters, and says DeepSpeed's version and
threads."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any, ClassVar

import numpy as np
import pytest

from vk_adam import select_device
from vk_adam._commands.bench import host, host_peers

torch = pytest.importorskip("torch")

N = 2**12


class TorchAsDeepSpeed(torch.optim.AdamW):  # type: ignore[misc]
    """torch's AdamW behind DeepSpeedCPUAdam's constructor: every hyper-parameter by keyword, and
    ``adamw_mode`` (which torch's AdamW has not) must be True."""

    made: ClassVar[list[TorchAsDeepSpeed]] = []

    def __init__(
        self,
        params: Any,
        *,
        lr: float,
        betas: tuple[float, float],
        eps: float,
        weight_decay: float,
        adamw_mode: bool,
    ) -> None:
        assert adamw_mode is True
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        TorchAsDeepSpeed.made.append(self)


def _recording_grads(monkeypatch: pytest.MonkeyPatch) -> list[host_peers.Grads]:
    """Every ``Grads`` the rows make, to read their params after the steps."""
    made: list[host_peers.Grads] = []

    class Recorded(host_peers.Grads):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(host_peers, "Grads", Recorded)
    return made


def _no_deepspeed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "deepspeed", None)  # `import deepspeed` raises ImportError


def _stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_peers, "deepspeed_cpu_adam", lambda: (TorchAsDeepSpeed, "0.0+stand-in"))


@pytest.mark.parametrize("arrays", ["reused", "fresh"])
def test_the_row_steps_like_torch_cpu_adamw_on_the_same_arrays(monkeypatch, arrays):
    _stand_in(monkeypatch)
    grads = _recording_grads(monkeypatch)
    TorchAsDeepSpeed.made.clear()
    row = host_peers.bench_deepspeed_cpu(N, arrays, 1, 3)
    ((opt,),) = (TorchAsDeepSpeed.made,)
    assert math.isfinite(row["ms"]) and row["ms"] > 0 and row["timed_steps"] == 3
    assert row["param_max_change"] > 0 and next(iter(opt.state.values()))["step"] == 4  # 1 + 3 steps
    assert row["deepspeed"] == "0.0+stand-in" and row["threads"] == torch.get_num_threads()
    assert isinstance(row["openmp_runtimes"], list)
    if arrays == "fresh":  # as the torch rows: a new array each step, the previous one dies inside it
        assert row["previous_grads_freed_in_step"] == 3 and row["distinct_grad_addresses"] >= 2
    (group,) = opt.param_groups  # torch AdamW's defaults, which DeepSpeedCPUAdam's weight decay is not
    assert (group["lr"], group["betas"], group["eps"], group["weight_decay"]) == (
        1e-3,
        (0.9, 0.999),
        1e-8,
        1e-2,
    )
    host_peers.bench_torch_cpu(N, arrays, False, 1, 3)
    ds, reference = grads
    assert ds.param is not reference.param and ds.arrays == reference.arrays == arrays
    np.testing.assert_allclose(ds.param, reference.param, rtol=1e-6)


def test_without_deepspeed_the_row_is_skipped_with_how_to_get_it(monkeypatch):
    _no_deepspeed(monkeypatch)
    row = host_peers.bench_deepspeed_cpu(N, "reused", 0, 2)
    assert "ms" not in row and row["cell"] == "no deepspeed"
    assert row["skipped"].startswith("deepspeed not installed")
    assert "DS_BUILD_OPS=0 pip install deepspeed" in row["skipped"] and "g++ and ninja" in row["skipped"]


def test_an_op_that_does_not_build_skips_the_row_once_with_the_cause(monkeypatch):
    tries = []

    class Unbuildable:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            tries.append(kwargs)
            raise RuntimeError("DeepSpeedCPUAdam requires the cpu_adam op") from OSError("no ninja here")

    monkeypatch.setattr(host_peers, "deepspeed_cpu_adam", lambda: (Unbuildable, "0.0"))
    rows = [host_peers.bench_deepspeed_cpu(N, arrays, 0, 2) for arrays in ("reused", "fresh")]
    assert len(tries) == 1  # a failed build is not tried again at every size
    for row in rows:
        assert "ms" not in row and row["cell"] == "n/a"
        assert row["skipped"].startswith("DeepSpeedCPUAdam's CPU Adam op did not build or load: RuntimeError")
        assert "(OSError: no ninja here)" in row["skipped"] and "g++ and ninja" in row["skipped"]


@pytest.mark.parametrize("deepspeed", ["absent", "stand-in"])
def test_the_host_table_has_the_row_or_says_why_not(tmp_path, monkeypatch, deepspeed):
    (_no_deepspeed if deepspeed == "absent" else _stand_in)(monkeypatch)
    jobs = [("vk-adam", "reused"), ("deepspeed-cpu", "reused"), ("deepspeed-cpu", "fresh")]
    monkeypatch.setattr(host, "JOBS", jobs)
    args = argparse.Namespace(host_sizes="2^12", repeats=2, warmup=1, out=str(tmp_path), quiet=True)
    table = host.run_host_bench(args, select_device())
    report = json.loads((tmp_path / "host.json").read_text())
    assert report["labels"]["deepspeed-cpu"] == "DeepSpeedCPUAdam (adamw_mode=True)"
    assert "deepspeed-cpu" in report["speedup_over"]
    rows = {(r["arrays"], r["backend"]): r for r in report["rows"]}
    ds = rows[("reused", "deepspeed-cpu")]
    if deepspeed == "absent":  # a reason, never a figure
        assert "ms" not in ds and "vk_adam_speedup" not in ds and "| no deepspeed |" in table
        assert "* DeepSpeedCPUAdam (adamw_mode=True): deepspeed not installed (" in table
        assert "DeepSpeed " not in table.splitlines()[0]
    else:
        assert ds["ms"] > 0 and ds["vk_adam_speedup"] > 0 and "deepspeed not installed" not in table
        assert f"; DeepSpeed 0.0+stand-in ({torch.get_num_threads()} threads);" in table.splitlines()[0]
        assert "| vs DeepSpeedCPUAdam (adamw_mode=True) |" in table


def test_real_deepspeed_cpu_adam_steps_like_torch_adamw(monkeypatch):
    """Where deepspeed is installed (the GPU kit's), its op built: the row's steps are AdamW's."""
    pytest.importorskip("deepspeed")
    grads = _recording_grads(monkeypatch)
    row = host_peers.bench_deepspeed_cpu(N, "reused", 1, 3)
    if "skipped" in row:
        pytest.skip(row["skipped"])
    assert row["ms"] > 0 and row["deepspeed"] and row["threads"] >= 1
    host_peers.bench_torch_cpu(N, "reused", False, 1, 3)
    ds, reference = grads
    # DeepSpeed's vectorized update rounds differently from torch's: float32 ulps, not a formula
    np.testing.assert_allclose(ds.param, reference.param, rtol=1e-5, atol=1e-6)
