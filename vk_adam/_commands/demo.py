"""``vk-adam demo``: fine-tune LoRA adapters of a small frozen model; every update on Vulkan.

The model: ``layers`` x ``targets`` frozen linear maps ``W [out, in]``. The data: inputs
``x ~ N(0, I)`` and targets ``(W + dW) x``, where ``dW = U V^T`` is a planted low-rank change
(rank ``rank // 2``) the adapter must recover. Forward and backward run in NumPy (float32);
the optimizer step for all ``2 * layers * len(targets)`` LoRA tensors is one dispatch.

The same run is repeated with the float64 NumPy reference of the update rule and, when torch is
installed, with ``torch.optim.AdamW``; the summary reports how far the curves are apart.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..lora import CheckpointError, LoRAAdapter, load_checkpoint, save_checkpoint, update_lora_adapter
from .demo_model import FrozenModel, draw_batch, loss_and_grads, make_model
from .demo_output import curve_gap, plot_loss_curves, progress_bar

Array = npt.NDArray[Any]

CHECKPOINT_NAME = "checkpoint.safetensors"


@dataclass(frozen=True)
class DemoConfig:
    layers: int = 8
    dim: int = 128
    rank: int = 8
    alpha: float = 16.0
    targets: tuple[str, ...] = ("q_proj", "v_proj")
    steps: int = 500
    lr: float = 2e-2
    weight_decay: float = 0.0
    batch: int = 64
    seed: int = 0
    rule: str = "adamw"
    noise: float = 3e-3  # std of the target noise: the loss floor is about noise**2

    @property
    def planted_rank(self) -> int:
        return max(1, self.rank // 2)


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


def fresh_run(cfg: DemoConfig) -> tuple[LoRAAdapter, FrozenModel, np.random.Generator]:
    """The adapter, frozen model and data stream every run starts from (same seeds: same data)."""
    adapter = LoRAAdapter.create(
        layers=cfg.layers,
        in_features=cfg.dim,
        rank=cfg.rank,
        alpha=cfg.alpha,
        target_modules=cfg.targets,
        rng=np.random.default_rng([cfg.seed, 2]),
    )
    model = make_model(cfg, [m.path for m in adapter.modules])
    return adapter, model, np.random.default_rng([cfg.seed, 3])


def train_vk(
    cfg: DemoConfig, out: Path, *, device: str | None, checkpoint_every: int, resume: bool, progress: bool
) -> tuple[LoRAAdapter, list[float], dict[str, Any]]:
    adapter, model, data_rng = fresh_run(cfg)
    losses: list[float] = []
    start = 0
    ckpt = out / CHECKPOINT_NAME
    opt = adapter.optimizer(cfg.rule, device=device, **rule_hyper(cfg))
    info: dict[str, Any] = {
        "device": opt.device.name,
        "tensors": adapter.tensor_count,
        "elements": int(adapter.flat_params.size),
        "dispatches_per_step": opt.dispatches_per_step(),
    }
    with opt:
        if resume and ckpt.exists():
            state = load_checkpoint(ckpt, adapter, opt, rng=data_rng)
            if state.extra.get("config") != _config_json(cfg):
                raise CheckpointError(f"{ckpt} was written by a run with other settings; use another --out")
            start = state.step
            losses = list(state.extra.get("losses", []))[:start]
            info["resumed_from_step"] = start
        bar = progress_bar(cfg.steps, start, progress, "vk-adam")
        t0 = time.perf_counter()
        for step in range(start, cfg.steps):
            batch = draw_batch(cfg, data_rng, list(model.base))
            loss = loss_and_grads(model, adapter.weight, adapter.grad, adapter.scale, batch, np.float32)
            losses.append(loss)
            opt.param_groups[0]["lr"] = lr_at(cfg, step)
            update_lora_adapter(adapter, opt)
            if checkpoint_every and (step + 1) % checkpoint_every == 0:
                save_checkpoint(
                    ckpt, adapter, opt, rng=data_rng, extra={"losses": losses, "config": _config_json(cfg)}
                )
            bar(loss)
        info["train_seconds"] = time.perf_counter() - t0
        bar(None)
    return adapter, losses, info


def train_reference(cfg: DemoConfig, progress: bool) -> list[float]:
    """The same run in float64 with the rule's NumPy reference (forward/backward in float64)."""
    from .._rules.registry import default_registry

    rule = default_registry().get(cfg.rule)
    adapter, model, data_rng = fresh_run(cfg)
    params = adapter.flat_params.astype(np.float64)
    grads = np.zeros_like(params)
    slices = {(m.path, w): adapter._offsets[(m.path, w)] for m in adapter.modules for w in ("A", "B")}

    def view(flat: Array) -> Callable[[str, str], Array]:
        def get(path: str, which: str) -> Array:
            offset, shape = slices[(path, which)]
            return flat[offset : offset + shape[0] * shape[1]].reshape(shape)

        return get

    hyper = {**rule.defaults, **rule_hyper(cfg)}
    state = {s.name: np.full_like(params, s.initial_value) for s in rule.variant_for(hyper).state}
    losses = []
    bar = progress_bar(cfg.steps, 0, progress, "float64 reference")
    for step in range(cfg.steps):
        batch = draw_batch(cfg, data_rng, list(model.base))
        losses.append(loss_and_grads(model, view(params), view(grads), adapter.scale, batch, np.float64))
        hyper["lr"] = lr_at(cfg, step)
        rule.reference(params, grads, state, hyper, step + 1)
        bar(losses[-1])
    bar(None)
    return losses


def train_torch(cfg: DemoConfig, progress: bool) -> list[float] | None:
    """The same run with torch.optim.AdamW (float32), when torch is installed and the rule is AdamW."""
    if cfg.rule not in ("adam", "adamw"):
        return None
    try:
        import torch
    except ImportError:
        return None
    adapter, model, data_rng = fresh_run(cfg)
    flat = torch.from_numpy(adapter.flat_params)  # shares memory with the adapter's views
    flat.grad = torch.from_numpy(adapter.flat_grads)
    cls = torch.optim.AdamW if cfg.rule == "adamw" else torch.optim.Adam
    topt = cls([flat], lr=cfg.lr, weight_decay=cfg.weight_decay)
    losses = []
    bar = progress_bar(cfg.steps, 0, progress, "torch.optim")
    for step in range(cfg.steps):
        batch = draw_batch(cfg, data_rng, list(model.base))
        losses.append(loss_and_grads(model, adapter.weight, adapter.grad, adapter.scale, batch, np.float32))
        topt.param_groups[0]["lr"] = lr_at(cfg, step)
        topt.step()
        bar(losses[-1])
    bar(None)
    return losses


# -- output ----------------------------------------------------------------------------------


def _config_json(cfg: DemoConfig) -> dict[str, Any]:
    d = asdict(cfg)
    d["targets"] = list(cfg.targets)
    return d


def run_demo(args: argparse.Namespace) -> int:
    targets = tuple(t.strip() for t in args.targets.split(",") if t.strip())
    cfg = DemoConfig(
        args.layers,
        args.dim,
        args.rank,
        args.alpha,
        targets,
        args.steps,
        args.lr,
        args.weight_decay,
        args.batch,
        args.seed,
        args.rule,
        args.noise,
    )
    for name in ("layers", "dim", "rank", "steps", "batch"):
        if getattr(cfg, name) < 1:
            raise ValueError(f"--{name} must be >= 1")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    progress = not args.quiet
    started = time.perf_counter()
    adapter, losses, info = train_vk(
        cfg,
        out,
        device=args.device,
        checkpoint_every=args.checkpoint_every,
        resume=args.resume,
        progress=progress,
    )
    adapter.save_peft(out / "adapter")
    curves = {"vk-adam (Vulkan, float32)": losses}
    summary: dict[str, Any] = {"config": _config_json(cfg), **info}
    if not args.no_compare:
        reference = train_reference(cfg, progress)
        curves["float64 reference"] = reference
        summary["max_relative_gap_vs_float64_reference"] = curve_gap(losses, reference)
        summary["final_relative_gap_vs_float64_reference"] = abs(losses[-1] - reference[-1]) / reference[-1]
        theirs = train_torch(cfg, progress)
        if theirs is not None:
            curves["torch.optim"] = theirs
            summary["max_relative_gap_vs_torch"] = curve_gap(losses, theirs)
            summary["final_relative_gap_vs_torch"] = abs(losses[-1] - theirs[-1]) / theirs[-1]
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
    plot_loss_curves(
        out / "loss_curve.png",
        curves,
        f"LoRA r{cfg.rank} on {cfg.layers}x{len(targets)} modules ({adapter.tensor_count} tensors, "
        f"1 dispatch/step) - {info['device']}",
    )
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(
        f"device: {info['device']}  ({adapter.tensor_count} LoRA tensors, {info['elements']} elements, "
        f"{info['dispatches_per_step']} dispatch per step)"
    )
    print(f"loss: {losses[0]:.4e} -> {losses[-1]:.4e}  ({summary['loss_reduction']:.0f}x lower)")
    for key, label in (
        ("max_relative_gap_vs_float64_reference", "float64 reference"),
        ("max_relative_gap_vs_torch", "torch.optim.AdamW"),
    ):
        if key in summary:
            print(f"loss curve vs {label}: max relative gap {summary[key]:.2e}")
    print(f"wrote {out / 'adapter'} (PEFT), {out / 'loss_curve.png'}, {out / 'summary.json'}")
    print(f"took {summary['total_seconds']:.1f} s")
    return 0
