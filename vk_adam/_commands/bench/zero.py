"""``vk-adam bench --cases zero``: ZeRO-1 on N ranks of this machine, beside one process and
torch's ``ZeroRedundancyOptimizer``, in one run. Writes ``zero.json`` and ``zero.md``.

Rows (AdamW, ``--zero-elements`` fp32 params in 8 tensors, every rank its own gradients):
  * ``vk-adam ZeRO-1 (gloo)``: ``vk_adam.distributed`` over torch.distributed gloo, twice: over
    NumPy params, and over device buffers (float32 kp tensors on the rank's own ``kp.Manager``,
    kp tensor gradients already on the device; the row records how the GPU reached the
    collectives' host memory: ``device_staging``);
  * ``vk-adam ZeRO-1 (MPI)``: the same two over mpi4py, when ``mpirun`` and mpi4py are installed;
  * ``vk-adam 1 process``: ``vk_adam.AdamW`` over all the params, given the mean gradient;
  * ``torch ZeRO (CPU, gloo)``: torch's ZeroRedundancyOptimizer on CPU tensors;
  * ``torch ZeRO (CUDA, ...)``: the same on CUDA tensors where torch has CUDA: NCCL when every
    rank has a GPU of its own, else gloo (NCCL refuses two ranks on one GPU; on one GPU the
    ranks share it);
  * where torch has CUDA, a job of one rank per GPU (at most ``--ranks``; one on one GPU) over
    NCCL: ``vk-adam ZeRO-1 (NCCL)`` over device buffers, NCCL running on the Vulkan buffers
    themselves (CUDA mappings of exportable Vulkan memory), and ``torch ZeRO (CUDA, NCCL)``.
Per row: which params it steps (``params``), the step time (median over ``--repeats`` steps
after ``--warmup``, the slowest rank's), the optimizer-state bytes each rank holds, and for
vk-adam the phases of a step (reduce-scatter, update, all-gather, host staging, and the small
all-reduces: agree, norm). The ranks are processes on this machine (``--ranks``, default 2),
started by this command with torch's ``env://`` variables, or by mpirun; each rank opens the
Vulkan device vk-adam would choose (with several GPUs, its local rank's; ``$VK_ADAM_DEVICE``
wins), so on one GPU they share it; its device buffers are on that device's ``kp.Manager``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..._runtime import DeviceInfo

WORKER = "vk_adam._commands.bench.zero_worker"
#: Row key -> (label, the params it steps), in the report's order.
ROWS = {
    "vk-adam-zero1-gloo": ("vk-adam ZeRO-1 (gloo)", "NumPy"),
    "vk-adam-zero1-gloo-device": ("vk-adam ZeRO-1 (gloo)", "device buffers"),
    "vk-adam-zero1-mpi": ("vk-adam ZeRO-1 (MPI)", "NumPy"),
    "vk-adam-zero1-mpi-device": ("vk-adam ZeRO-1 (MPI)", "device buffers"),
    "vk-adam-1-process": ("vk-adam 1 process", "NumPy"),
    "torch-zero-cpu": ("torch ZeRO (CPU)", "torch CPU tensors"),
    "torch-zero-cuda": ("torch ZeRO (CUDA)", "torch CUDA tensors"),
    "vk-adam-zero1-nccl-device": ("vk-adam ZeRO-1 (NCCL)", "device buffers"),
    "torch-zero-nccl": ("torch ZeRO (CUDA, NCCL)", "torch CUDA tensors"),
}
TORCH_ROWS = ("vk-adam-zero1-gloo", "vk-adam-zero1-gloo-device", "torch-zero-cpu", "torch-zero-cuda")
MPI_ROWS = ("vk-adam-zero1-mpi", "vk-adam-zero1-mpi-device")
NCCL_ROWS = ("vk-adam-zero1-nccl-device", "torch-zero-nccl")
PHASES = ("reduce_scatter", "update", "all_gather", "staging", "agree", "norm")


def add_zero_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ranks", type=int, default=2, help="zero: ranks on this machine (default %(default)s)"
    )
    parser.add_argument(
        "--zero-elements",
        type=int,
        default=None,
        help="zero: fp32 params in all (default 2^24 on a GPU, 2^20 on a software device)",
    )


def _module_available(name: str) -> bool:
    try:
        __import__(name)
    except ImportError:
        return False
    return True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(world: int) -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    share = str(max(1, (os.cpu_count() or 1) // world))  # the ranks split the CPU cores
    env.setdefault("OMP_NUM_THREADS", share)
    env.setdefault("LP_NUM_THREADS", share)  # lavapipe's threads
    return env


def _torch_job(world: int, config: dict[str, Any], out: Path, timeout: float) -> str | None:
    """Every rank of the torch.distributed job; None, or why it did not finish."""
    port = str(_free_port())
    procs = []
    for rank in range(world):
        env = _env(world) | {
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(world),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
        }
        cmd = [sys.executable, "-m", WORKER, json.dumps(config | {"transport": "torch"}), str(out)]
        procs.append(
            subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        )
    deadline, failure = time.monotonic() + timeout, None
    for proc in procs:
        try:
            output, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            if proc.returncode != 0 and failure is None:
                failure = f"rank exited with {proc.returncode}: {output[-800:]}"
        except subprocess.TimeoutExpired:
            failure = failure or f"timed out after {timeout:.0f} s"
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return failure


def _cuda_devices() -> int:
    """CUDA devices torch sees (0 without torch or CUDA)."""
    if not _module_available("torch"):
        return 0
    import torch

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def _mpi_job(world: int, config: dict[str, Any], out: Path, timeout: float) -> str | None:
    cmd = ["mpirun", "-n", str(world), "--oversubscribe", "--timeout", str(int(timeout))]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += [sys.executable, "-m", "mpi4py", "-m", WORKER, json.dumps(config | {"transport": "mpi"}), str(out)]
    done = subprocess.run(cmd, env=_env(world), capture_output=True, text=True, check=False)
    return None if done.returncode == 0 else f"mpirun exited with {done.returncode}: {done.stderr[-800:]}"


def _one_process(config: dict[str, Any], world: int, device: int) -> dict[str, Any]:
    """vk-adam's AdamW over every param in this process, given the mean of the ranks' gradients."""
    import vk_adam

    from .zero_worker import _grads, _params, _sizes, _timed

    sizes = _sizes(config["elements"], config["tensors"])
    params = _params(sizes)
    per_rank = [_grads(r, sizes) for r in range(world)]
    mean = [np.mean(gs, axis=0, dtype=np.float64).astype(np.float32) for gs in zip(*per_rank, strict=True)]
    with vk_adam.AdamW(params, lr=1e-4, device=device) as opt:
        times = _timed(lambda: opt.step(mean), config["warmup"], config["repeats"], lambda: None)
        memory = opt.memory_bytes()
        return {
            "step_ms": statistics.median(times) * 1e3,
            "state_bytes": memory["state"] + memory["absmax"] + memory["master"],
            "transport": "none",
        }


def _gather(out: Path, name: str, world: int) -> dict[str, Any] | None:
    files = [out / f"{name}-rank{r}.json" for r in range(world)]
    if not all(f.exists() for f in files):
        return None
    ranks = [json.loads(f.read_text()) for f in files]
    failed = [r["failed"] for r in ranks if "failed" in r]
    if failed:
        return {"note": failed[0]}
    row: dict[str, Any] = {
        "step_ms": max(r["step_ms"] for r in ranks),  # the job runs at its slowest rank's pace
        "state_bytes_per_rank": [r["state_bytes"] for r in ranks],
        "transport": ranks[0]["transport"],
    }
    if "phases_ms" in ranks[0]:
        row["phases_ms"] = {
            k: statistics.mean(r["phases_ms"][k] for r in ranks) for k in ranks[0]["phases_ms"]
        }
        row["devices"] = sorted({r["device"] for r in ranks if r["device"]})
        row["shards"] = [r["shard"] for r in ranks]
    if "device_staging" in ranks[0]:
        row["device_staging"] = sorted({r["device_staging"] for r in ranks if r["device_staging"]})
    return row


def run_zero_bench(args: argparse.Namespace, info: DeviceInfo) -> str:
    world = int(args.ranks)
    if world < 1:
        raise ValueError(f"--ranks must be at least 1 (got {world})")
    elements = args.zero_elements or (2**20 if info.is_software else 2**24)
    config = {"elements": int(elements), "tensors": 8, "warmup": args.warmup, "repeats": args.repeats}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    timeout = float(getattr(args, "zero_timeout", 600))
    rows: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="vk-adam-zero-") as tmp:
        ranks_dir = Path(tmp)
        if _module_available("torch"):
            failure = _torch_job(world, config, ranks_dir, timeout)
            for name in TORCH_ROWS:
                row = _gather(ranks_dir, name, world)
                if row is not None or (failure and name != "torch-zero-cuda"):
                    rows[name] = row or {"note": f"failed: {failure}"}
        else:
            rows["vk-adam-zero1-gloo"] = {"note": "torch is not installed"}
            rows["vk-adam-zero1-gloo-device"] = {"note": "torch is not installed"}
        if shutil.which("mpirun") and _module_available("mpi4py"):
            failure = _mpi_job(world, config, ranks_dir, timeout)
            for name in MPI_ROWS:
                rows[name] = _gather(ranks_dir, name, world) or {"note": f"{failure}"}
        gpus = _cuda_devices()
        if gpus:  # NCCL refuses two ranks on one GPU: as many ranks as GPUs, at most --ranks
            ranks = min(world, gpus)
            failure = _torch_job(ranks, config | {"nccl": True}, ranks_dir, timeout)
            for name in NCCL_ROWS:
                row = _gather(ranks_dir, name, ranks) or {"note": f"{failure}"}
                rows[name] = row | {"ranks": ranks}
    rows["vk-adam-1-process"] = _one_process(config, world, info.index)
    rows["vk-adam-1-process"]["state_bytes_per_rank"] = [rows["vk-adam-1-process"].pop("state_bytes")]
    rows = {name: {"params": ROWS[name][1]} | rows[name] for name in ROWS if name in rows}
    report = {
        "meta": {
            "ranks": world,
            "elements": elements,
            "tensors": 8,
            "device": info.name,
            "repeats": args.repeats,
            "warmup": args.warmup,
            "command": f"vk-adam bench --cases zero --ranks {world} "
            f"--zero-elements {elements} --repeats {args.repeats} --warmup {args.warmup}",
        },
        "rows": rows,
    }
    (out / "zero.json").write_text(json.dumps(report, indent=2))
    table = format_zero_table(report)
    (out / "zero.md").write_text(table + "\n")
    return table + f"\n\nwrote {out / 'zero.json'}, {out / 'zero.md'}"


def format_zero_table(report: dict[str, Any]) -> str:
    meta = report["meta"]
    lines = [
        f"ZeRO-1: AdamW, {meta['elements']:,} fp32 params in {meta['tensors']} tensors, "
        f"{meta['ranks']} ranks on one machine ({meta['device']}); median of {meta['repeats']} "
        "steps, the slowest rank's",
        "",
        "| backend | params | transport | step ms | state MiB per rank | "
        + " | ".join(p.replace("_", "-") for p in PHASES)
        + " |",
        "|---|---|---|---|---|" + "---|" * len(PHASES),
    ]
    for name, row in report["rows"].items():
        label, params = ROWS[name]
        if "ranks" in row:  # NCCL's rows: one rank per GPU
            label = f"{label[:-1]}, {row['ranks']} rank{'s' if row['ranks'] > 1 else ''})"
        params = row.get("params", params)
        if row.get("device_staging"):  # how device buffers reached host memory
            params += f": {', '.join(row['device_staging'])}"
        if "note" in row:
            lines.append(f"| {label} | {params} | {row['note'][:120]} |")
            continue
        state = ", ".join(f"{b / 2**20:.2f}" for b in row["state_bytes_per_rank"])
        phases = row.get("phases_ms", {})
        cells = " | ".join(f"{phases[p]:.3f}" if p in phases else "" for p in PHASES)
        lines.append(
            f"| {label} | {params} | {row['transport']} | {row['step_ms']:.3f} | {state} | {cells} |"
        )
    return "\n".join(lines)
