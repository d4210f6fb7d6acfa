"""``vk-adam demo``: fine-tune LoRA adapters of a small frozen model; every update on Vulkan.

The model (``demo_model``): ``layers`` residual blocks of frozen linear maps with ReLUs between
them, LoRA on each. The data: inputs ``x ~ N(0, I)`` and the outputs of the same network with a
planted low-rank change ``dW = U V^T`` (rank ``rank // 2``) on every module, which the adapter
must recover. By default the whole step runs on the device (``demo_resident``: the shaders of
``examples/resident_training``, many steps per submission); with ``--host`` forward and backward
run in NumPy (float32) and only the update runs on Vulkan. Either way the optimizer step for all
``2 * layers * len(targets)`` LoRA tensors is one dispatch. ``--state-dtype`` (either path),
``--param-dtype`` (16-bit: the host path) and ``--stochastic-rounding`` pick the storage formats;
``summary.json`` records them with the optimizer's resident device bytes.

The same run is repeated with the float64 NumPy reference of the update rule, with the host path
(after a resident run; in the same formats) and, when torch is installed, with torch (autograd
and ``torch.optim.AdamW``); the summary reports how far the curves are apart. The float64 and
torch runs are float32's ideal whatever the formats.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._formats import PARAM_DTYPES, STATE_DTYPES
from .._optim.optimizer import Optimizer
from ..lora import CheckpointError, LoRAAdapter, load_checkpoint, save_checkpoint, update_lora_adapter
from .demo_model import FrozenModel, loss_and_grads, make_dataset, make_model, train_reference
from .demo_output import curve_gap, plot_loss_curves, print_summary, progress_bar

Array = npt.NDArray[Any]

CHECKPOINT_NAME = "checkpoint.safetensors"


@dataclass(frozen=True)
class DemoConfig:
    layers: int = 4
    dim: int = 64
    rank: int = 8
    alpha: float = 16.0
    targets: tuple[str, ...] = ("q_proj", "v_proj")
    steps: int = 300
    lr: float = 1e-2
    weight_decay: float = 0.0
    batch: int = 64
    seed: int = 0
    rule: str = "adamw"
    noise: float = 3e-3  # std of the target noise: the loss floor is about noise**2
    clip_grad_norm: float | None = 1.0  # on-device clipping by global norm (None: off), as HF Trainer
    param_dtype: str = "float32"  # float16/bfloat16: the host path only (16-bit LoRA weights)
    state_dtype: str = "float32"  # float32, bfloat16 or int8-blockwise optimizer state
    stochastic_rounding: bool = False  # 16-bit params without an fp32 master copy

    @property
    def planted_rank(self) -> int:
        return max(1, self.rank // 2)

    def formats_label(self) -> str:
        """The storage formats in words, e.g. ``bfloat16 params (fp32 master), int8-blockwise state``."""
        if self.param_dtype == "float32":
            params = "float32 params"
        else:
            how = "stochastic rounding" if self.stochastic_rounding else "fp32 master"
            params = f"{self.param_dtype} params ({how})"
        return f"{params}, {self.state_dtype} state"


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    d = DemoConfig()
    parser.add_argument("--layers", type=int, default=d.layers, help="model layers (default %(default)s)")
    parser.add_argument("--dim", type=int, default=d.dim, help="hidden size (default %(default)s)")
    parser.add_argument("--rank", type=int, default=d.rank, help="LoRA rank (default %(default)s)")
    parser.add_argument("--alpha", type=float, default=d.alpha, help="LoRA alpha (default %(default)s)")
    parser.add_argument("--targets", default=",".join(d.targets), help="target modules (default %(default)s)")
    parser.add_argument("--steps", type=int, default=d.steps, help="optimizer steps (default %(default)s)")
    parser.add_argument("--lr", type=float, default=d.lr, help="peak learning rate (default %(default)s)")
    parser.add_argument("--weight-decay", type=float, default=d.weight_decay, help="(default %(default)s)")
    parser.add_argument("--batch", type=int, default=d.batch, help="batch size (default %(default)s)")
    parser.add_argument("--seed", type=int, default=d.seed, help="model and data seed (default %(default)s)")
    parser.add_argument("--noise", type=float, default=d.noise, help="target noise std (default %(default)s)")
    parser.add_argument(
        "--rule", default=d.rule, help="update rule (default %(default)s; see `vk-adam rules`)"
    )
    parser.add_argument("--out", default="vk-adam-out", help="output folder (default %(default)s)")
    parser.add_argument("--device", help="Vulkan device index or name substring")
    parser.add_argument("--checkpoint-every", type=int, default=50, help="steps between checkpoints (0: off)")
    parser.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.safetensors")
    parser.add_argument("--no-compare", action="store_true", help="skip the reference and torch runs")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--host", action="store_true", help="forward/backward in NumPy on the host, only the update on Vulkan"
    )
    parser.add_argument(
        "--param-dtype",
        choices=PARAM_DTYPES,
        default=d.param_dtype,
        help="LoRA weight dtype (default %(default)s; 16-bit runs on the host path)",
    )
    parser.add_argument(
        "--state-dtype",
        choices=STATE_DTYPES,
        default=d.state_dtype,
        help="optimizer state (default %(default)s)",
    )
    parser.add_argument(
        "--stochastic-rounding",
        action="store_true",
        help="16-bit params take each update by stochastic rounding (no fp32 master copy)",
    )
    parser.add_argument(
        "--steps-per-submit",
        type=int,
        default=25,
        help="resident: steps per submission (default %(default)s)",
    )


def lr_at(cfg: DemoConfig, step: int) -> float:
    """Linear warm-up over 5% of the steps, then cosine decay to 1% of the peak."""
    warm = max(1, cfg.steps // 20)
    if step < warm:
        return cfg.lr * (step + 1) / warm
    progress = (step - warm) / max(1, cfg.steps - warm)
    return cfg.lr * (0.01 + 0.99 * 0.5 * (1.0 + math.cos(math.pi * progress)))


# -- the three runs ---------------------------------------------------------------------------


def rule_hyper(cfg: DemoConfig) -> dict[str, Any]:
    """The demo's hyperparameters that the chosen rule takes (any registered rule works)."""
    from .._rules.registry import default_registry

    defaults = default_registry().get(cfg.rule).defaults
    hyper: dict[str, Any] = {"lr": cfg.lr}
    if "weight_decay" in defaults:
        hyper["weight_decay"] = cfg.weight_decay
    return hyper


def optimizer_options(cfg: DemoConfig) -> dict[str, Any]:
    """The rule's hyperparameters plus the optimizer's options (on-device clipping, formats)."""
    options = rule_hyper(cfg)
    if cfg.clip_grad_norm is not None:
        options["clip_grad_norm"] = cfg.clip_grad_norm
    if cfg.state_dtype != "float32":
        options["state_dtype"] = cfg.state_dtype
    if cfg.stochastic_rounding:  # the optimizer refuses it for float32 params (ValueError)
        options.update(stochastic_rounding=True, seed=cfg.seed)
    return options


def memory_info(opt: Optimizer, elements: int) -> dict[str, Any]:
    """The optimizer's resident device bytes by kind, and per LoRA parameter: in all
    (``bytes_per_param``) and in the per-param buffers alone (param, grad, master copy, state,
    block scales: ``resident_bytes_per_param``, without the fixed status and table buffers)."""
    memory = opt.memory_bytes()
    per_param = sum(memory[k] for k in ("param", "grad", "master", "state", "absmax"))
    return {
        "memory_bytes": memory,
        "bytes_per_param": memory["total"] / elements,
        "resident_bytes_per_param": per_param / elements,
    }


def fresh_run(
    cfg: DemoConfig, dtype: str = "float32"
) -> tuple[LoRAAdapter, FrozenModel, np.random.Generator]:
    """The adapter (of ``dtype``), frozen model and data stream every run starts from (same
    seeds: same data, and the same initial weights, rounded to a 16-bit ``dtype``)."""
    adapter = LoRAAdapter.create(
        layers=cfg.layers,
        in_features=cfg.dim,
        rank=cfg.rank,
        alpha=cfg.alpha,
        target_modules=cfg.targets,
        rng=np.random.default_rng([cfg.seed, 2]),
        dtype=dtype,
    )
    model = make_model(cfg, [m.path for m in adapter.modules])
    return adapter, model, np.random.default_rng([cfg.seed, 3])


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
    opt = adapter.optimizer(cfg.rule, device=device, **optimizer_options(cfg))

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
            if state.extra.get("config") != config_json(cfg, "host"):
                raise CheckpointError(f"{ckpt} was written by a run with other settings; use another --out")
            start = state.step
            losses = list(state.extra.get("losses", []))[:start]
            info["resumed_from_step"] = start
        bar = progress_bar(cfg.steps, start, progress, "vk-adam host path")
        t0 = time.perf_counter()
        for step in range(start, cfg.steps):
            loss = loss_and_grads(model, weights, adapter.grad, adapter.scale, (x[step], y[step]), np.float32)
            losses.append(loss)
            opt.param_groups[0]["lr"] = lr_at(cfg, step)
            update_lora_adapter(adapter, opt)
            if checkpoint_every and (step + 1) % checkpoint_every == 0:
                save_checkpoint(
                    ckpt,
                    adapter,
                    opt,
                    rng=data_rng,
                    extra={"losses": losses, "config": config_json(cfg, "host")},
                )
            bar(loss)
        info["train_seconds"] = time.perf_counter() - t0
        bar(None)
    return adapter, losses, info


# -- output ----------------------------------------------------------------------------------


def config_json(cfg: DemoConfig, path: str) -> dict[str, Any]:
    d = asdict(cfg)
    d["targets"] = list(cfg.targets)
    d["path"] = path  # host or resident: their checkpoints do not mix
    return d


HOST_ONLY = "the resident example's shaders read float32 weights"


def config_from_args(args: argparse.Namespace) -> DemoConfig:
    targets = tuple(t.strip() for t in args.targets.split(",") if t.strip())
    cfg = DemoConfig(
        layers=args.layers,
        dim=args.dim,
        rank=args.rank,
        alpha=args.alpha,
        targets=targets,
        steps=args.steps,
        lr=args.lr,
        weight_decay=args.weight_decay,
        batch=args.batch,
        seed=args.seed,
        rule=args.rule,
        noise=args.noise,
        param_dtype=args.param_dtype,
        state_dtype=args.state_dtype,
        stochastic_rounding=args.stochastic_rounding,
    )
    for name in ("layers", "dim", "rank", "steps", "batch"):
        if getattr(cfg, name) < 1:
            raise ValueError(f"--{name} must be >= 1")
    if args.steps_per_submit < 1:
        raise ValueError("--steps-per-submit must be >= 1")
    return cfg


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
        from .demo_resident import train_resident

        adapter, losses, info = train_resident(cfg, out, per_submit=args.steps_per_submit, **run)  # type: ignore[arg-type]
    adapter.save_peft(out / "adapter")
    label = f"vk-adam (Vulkan, {cfg.formats_label()})"
    curves = {label: losses}
    summary: dict[str, Any] = {
        "config": config_json(cfg, info["path"]),
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
    from .demo_torch import train_torch

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
