"""The demo's model trained by torch (autograd, ``torch.optim.AdamW``), CPU or CUDA when present:
the same initial weights, batches, schedule and clipping as the vk-adam runs, an independent
implementation of the forward and backward passes to compare the loss curves against."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .demo_model import make_dataset
from .demo_output import progress_bar

if TYPE_CHECKING:  # types only: demo.py imports this module
    from .demo import DemoConfig


def train_torch(cfg: DemoConfig, progress: bool) -> tuple[list[float], str] | None:
    """The loss curve and torch's device, or None without torch or for a rule torch lacks."""
    if cfg.rule not in ("adam", "adamw"):
        return None
    try:
        import torch
    except ImportError:
        return None
    from .demo import fresh_run, lr_at

    adapter, model, _ = fresh_run(cfg)
    x, y = make_dataset(cfg, model)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    lora = {
        (m.path, w): torch.tensor(adapter.weight(m.path, w), device=dev, requires_grad=True)
        for m in adapter.modules
        for w in ("A", "B")
    }
    base = {p: torch.tensor(w, dtype=torch.float32, device=dev) for p, w in model.base.items()}
    xs, ys = torch.from_numpy(x).to(dev), torch.from_numpy(y).to(dev)
    cls: Any = torch.optim.AdamW if cfg.rule == "adamw" else torch.optim.Adam
    topt = cls(list(lora.values()), lr=cfg.lr, weight_decay=cfg.weight_decay)
    scale = adapter.scale
    losses = []
    bar = progress_bar(cfg.steps, 0, progress, f"torch.optim ({dev})")
    for step in range(cfg.steps):
        h = xs[step]
        for block in model.blocks:
            z = h
            for i, path in enumerate(block):
                z = z @ base[path].T + scale * ((z @ lora[(path, "A")].T) @ lora[(path, "B")].T)
                if i < len(block) - 1:
                    z = torch.relu(z)
            h = h + z
        loss: Any = torch.mean((h - ys[step]) ** 2)
        topt.zero_grad()
        loss.backward()
        if cfg.clip_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(list(lora.values()), cfg.clip_grad_norm)
        topt.param_groups[0]["lr"] = lr_at(cfg, step)
        topt.step()
        losses.append(float(loss.item()))
        bar(losses[-1])
    bar(None)
    return losses, dev
