"""``vk-adam demo``: fine-tune LoRA adapters of a small frozen model; every update on Vulkan.

The model (``model``): ``layers`` residual blocks of frozen linear maps with ReLUs between
them, LoRA on each. The data: inputs ``x ~ N(0, I)`` and the outputs of the same network with a
planted low-rank change ``dW = U V^T`` (rank ``rank // 2``) on every module, which the adapter
must recover. By default the whole step runs on the device (``resident``: the shaders of
``resident_example``, many steps per submission); with ``--host`` forward and backward
run in NumPy (float32) and only the update runs on Vulkan. Either way the optimizer step for all
``2 * layers * len(targets)`` LoRA tensors is one dispatch. ``--state-dtype`` (either path),
``--param-dtype`` (16-bit: the host path) and ``--stochastic-rounding`` pick the storage formats;
``summary.json`` records them with the optimizer's resident device bytes.

The same run is repeated with the float64 NumPy reference of the update rule, with the host path
(after a resident run; in the same formats) and, when torch is installed, with torch (autograd
and ``torch.optim.AdamW``); the summary reports how far the curves are apart. The float64 and
torch runs are float32's ideal whatever the formats.

``config`` holds the settings and what every run shares (schedule, optimizer options);
``model`` the model, its data and the float64 run; ``resident`` and ``torch_peer`` the
resident and torch runs. Each imports only modules below it; this one, the command, is the top.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ...lora import CheckpointError, LoRAAdapter, load_checkpoint, save_checkpoint, update_lora_adapter
from .config import (
    CHECKPOINT_NAME,
    HOST_ONLY,
    DemoConfig,
    config_from_args,
    memory_info,
)
from .model import fresh_run, loss_and_grads, make_dataset, train_reference
from .output import curve_gap, plot_loss_curves, print_summary, progress_bar

Array = npt.NDArray[Any]


# -- the host path, then the command and its comparison runs ----------------------------------


def train_vk(
    cfg: DemoConfig, out: Path, *, device: str | None, checkpoint_every: int, resume: bool, progress: bool
) -> tuple[LoRAAdapter, list[float], dict[str, Any]]:
    """The host path: forward and backward in NumPy (float32), the update on Vulkan. The adapter
    is in ``cfg.param_dtype``: the forward reads 16-bit weights as float32 (exactly), and the
    float32 gradients are rounded (nearest-even) into its 16-bit gradient buffer."""
    adapter, model, data_rng = fresh_run(cfg, cfg.param_dtype)
    x, y = make_dataset(cfg, model)
    losses: list[float] = []
    start = 0
    ckpt = out / CHECKPOINT_NAME
    opt = adapter.optimizer(cfg.rule, device=device, **cfg.optimizer_options())

    def weights(path: str, which: str) -> Array:  # a 16-bit weight read as float32 (exactly)
        w = adapter.weight(path, which)
        return w if w.dtype == np.float32 else w.astype(np.float32)

    elements = int(adapter.flat_params.size)
    info: dict[str, Any] = {
        "path": "host",
        "device": opt.device.name,
        "tensors": adapter.tensor_count,
        "elements": elements,
        "dispatches_per_step": opt.dispatches_per_step(),
        **memory_info(opt, elements),
    }
    with opt:
        if resume and ckpt.exists():
            state = load_checkpoint(ckpt, adapter, opt, rng=data_rng)
            if state.extra.get("config") != cfg.config_json("host"):
                raise CheckpointError(f"{ckpt} was written by a run with other settings; use another --out")
            start = state.step
            losses = list(state.extra.get("losses", []))[:start]
            info["resumed_from_step"] = start
        bar = progress_bar(cfg.steps, start, progress, "vk-adam host path")
        t0 = time.perf_counter()
        for step in range(start, cfg.steps):
            loss = loss_and_grads(model, weights, adapter.grad, adapter.scale, (x[step], y[step]), np.float32)
            losses.append(loss)
            opt.param_groups[0]["lr"] = cfg.lr_at(step)
            update_lora_adapter(adapter, opt)
            if checkpoint_every and (step + 1) % checkpoint_every == 0:
                save_checkpoint(
                    ckpt,
                    adapter,
                    opt,
                    rng=data_rng,
                    extra={"losses": losses, "config": cfg.config_json("host")},
                )
            bar(loss)
        info["train_seconds"] = time.perf_counter() - t0
        bar(None)
    return adapter, losses, info


def run_demo(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    progress = not args.quiet
    started = time.perf_counter()
    host = args.host or cfg.param_dtype != "float32"  # 16-bit LoRA weights: the host path
    switched = host and not args.host
    if switched:
        print(f"vk-adam demo: --param-dtype {cfg.param_dtype} runs on the host path: {HOST_ONLY}")
    run = dict(
        device=args.device, checkpoint_every=args.checkpoint_every, resume=args.resume, progress=progress
    )
    if host:
        adapter, losses, info = train_vk(cfg, out, **run)  # type: ignore[arg-type]
    else:
        from .resident import train_resident

        adapter, losses, info = train_resident(cfg, out, per_submit=args.steps_per_submit, **run)  # type: ignore[arg-type]
    adapter.save_peft(out / "adapter")
    label = f"vk-adam (Vulkan, {cfg.formats_label()})"
    curves = {label: losses}
    summary: dict[str, Any] = {
        "config": cfg.config_json(info["path"]),
        **info,
        "param_dtype": cfg.param_dtype,
        "state_dtype": cfg.state_dtype,
        "stochastic_rounding": cfg.stochastic_rounding,
        "switched_to_host_path": switched,
        "switch_reason": f"--param-dtype {cfg.param_dtype}: {HOST_ONLY}" if switched else None,
    }
    if not args.no_compare:
        compare(cfg, args, losses, curves, summary)
    summary["initial_loss"] = losses[0]
    summary["final_loss"] = losses[-1]
    summary["loss_reduction"] = losses[0] / losses[-1]
    summary["total_seconds"] = time.perf_counter() - started
    summary["outputs"] = {
        "peft_adapter": str(out / "adapter"),
        "loss_curve": str(out / "loss_curve.png"),
        "checkpoint": str(out / CHECKPOINT_NAME),
    }
    summary["losses"] = losses
    where = (
        "forward, backward and update on the device" if info["path"] == "resident" else "update on the device"
    )
    plot_loss_curves(
        out / "loss_curve.png",
        curves,
        f"LoRA r{cfg.rank}, {cfg.layers}x{len(cfg.targets)} modules ({adapter.tensor_count} tensors): {where}"
        f"\n{info['device']}",
    )
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print_summary(cfg.formats_label(), summary, adapter.tensor_count, out)
    return 0


def compare(
    cfg: DemoConfig,
    args: argparse.Namespace,
    losses: list[float],
    curves: dict[str, Any],
    summary: dict[str, Any],
) -> None:
    """The same run on the host path (after a resident run), in float64 and with torch."""
    from .torch_peer import train_torch

    progress = not args.quiet
    if summary["path"] == "resident":
        with tempfile.TemporaryDirectory() as tmp:
            _, host, _ = train_vk(
                cfg, Path(tmp), device=args.device, checkpoint_every=0, resume=False, progress=progress
            )
        curves["vk-adam host path"] = host
        summary["max_relative_gap_vs_host"] = curve_gap(losses, host)
    reference = train_reference(cfg, progress)
    curves["float64 reference"] = reference
    summary["max_relative_gap_vs_float64_reference"] = curve_gap(losses, reference)
    summary["final_relative_gap_vs_float64_reference"] = abs(losses[-1] - reference[-1]) / reference[-1]
    theirs = train_torch(cfg, progress)
    if theirs is not None:
        curves[f"torch ({theirs[1]})"] = theirs[0]
        summary["torch_device"] = theirs[1]
        summary["max_relative_gap_vs_torch"] = curve_gap(losses, theirs[0])
        summary["final_relative_gap_vs_torch"] = abs(losses[-1] - theirs[0][-1]) / theirs[0][-1]
