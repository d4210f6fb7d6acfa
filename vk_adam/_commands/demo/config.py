"""The demo's settings and what every run of it shares: ``DemoConfig``, its command-line
arguments, the learning-rate schedule, the optimizer's options and the summary's config record.

The bottom of the demo's modules: ``model``, ``resident``, ``torch_peer``, ``run``
and ``bench/train`` import it, and it imports none of them.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict, dataclass
from typing import Any

from ..._formats import PARAM_DTYPES, STATE_DTYPES
from ..._optim import Optimizer

CHECKPOINT_NAME = "checkpoint.safetensors"
HOST_ONLY = "the resident example's shaders read float32 weights"


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

    def lr_at(self, step: int) -> float:
        """Linear warm-up over 5% of the steps, then cosine decay to 1% of the peak."""
        warm = max(1, self.steps // 20)
        if step < warm:
            return self.lr * (step + 1) / warm
        progress = (step - warm) / max(1, self.steps - warm)
        return self.lr * (0.01 + 0.99 * 0.5 * (1.0 + math.cos(math.pi * progress)))

    def rule_hyper(self) -> dict[str, Any]:
        """The demo's hyperparameters that the chosen rule takes (any registered rule works)."""
        from ..._rules import default_registry

        defaults = default_registry().get(self.rule).defaults
        hyper: dict[str, Any] = {"lr": self.lr}
        if "weight_decay" in defaults:
            hyper["weight_decay"] = self.weight_decay
        return hyper

    def optimizer_options(self) -> dict[str, Any]:
        """The rule's hyperparameters plus the optimizer's options (on-device clipping, formats)."""
        options = self.rule_hyper()
        if self.clip_grad_norm is not None:
            options["clip_grad_norm"] = self.clip_grad_norm
        if self.state_dtype != "float32":
            options["state_dtype"] = self.state_dtype
        if self.stochastic_rounding:  # the optimizer refuses it for float32 params (ValueError)
            options.update(stochastic_rounding=True, seed=self.seed)
        return options

    def config_json(self, path: str) -> dict[str, Any]:
        """The config as a checkpoint stores it, with the path (host or resident) that made it."""
        d = asdict(self)
        d["targets"] = list(self.targets)
        d["path"] = path  # host or resident: their checkpoints do not mix
        return d


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
