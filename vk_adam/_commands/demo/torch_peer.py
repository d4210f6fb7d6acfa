"""The demo's model trained by torch (autograd, ``torch.optim.AdamW``), CPU or CUDA when present:
the same initial weights, batches, schedule and clipping as the vk-adam runs, an independent
implementation of the forward and backward passes to compare the loss curves against."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .config import DemoConfig
from .model import fresh_run, make_dataset
from .output import progress_bar

#: What the demo says where torch is absent (no extra of vk-adam installs torch: it is large, and
#: only this comparison needs it), rather than leaving its curve out without a word.
NO_TORCH = "torch is not installed, so the comparison with torch is skipped (pip install torch adds it)"


def _torch_model(cfg: DemoConfig, dev: str) -> Any:
    """The demo's fresh run as torch tensors on ``dev``: LoRA weights (trainable), frozen base
    weights, the data set, and the forward pass ``forward(h) -> output``."""
    import types

    import torch

    adapter, model, _ = fresh_run(cfg)
    x, y = make_dataset(cfg, model)
    lora = {
        (m.path, w): torch.tensor(adapter.weight(m.path, w), device=dev, requires_grad=True)
        for m in adapter.modules
        for w in ("A", "B")
    }
    base = {p: torch.tensor(w, dtype=torch.float32, device=dev) for p, w in model.base.items()}
    scale = adapter.scale

    def forward(h: Any) -> Any:
        for block in model.blocks:
            z = h
            for i, path in enumerate(block):
                z = z @ base[path].T + scale * ((z @ lora[(path, "A")].T) @ lora[(path, "B")].T)
                if i < len(block) - 1:
                    z = torch.relu(z)
            h = h + z
        return h

    return types.SimpleNamespace(
        params=list(lora.values()),
        xs=torch.from_numpy(x).to(dev),
        ys=torch.from_numpy(y).to(dev),
        steps=len(x),
        forward=forward,
        optimizer_class=torch.optim.AdamW if cfg.rule == "adamw" else torch.optim.Adam,
    )


def torch_trainer(cfg: DemoConfig, dev: str, *, fused: bool | None = None) -> Callable[[int], Any]:
    """The demo's model in torch on ``dev``: a function running training step ``step`` (forward,
    backward, clipping, update) and returning the loss tensor (not synchronized)."""
    import torch

    run = _torch_model(cfg, dev)
    topt = run.optimizer_class(run.params, lr=cfg.lr, weight_decay=cfg.weight_decay, fused=fused)

    def step_fn(step: int) -> Any:
        loss: Any = torch.mean((run.forward(run.xs[step]) - run.ys[step]) ** 2)
        topt.zero_grad()
        loss.backward()
        if cfg.clip_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(run.params, cfg.clip_grad_norm)
        topt.step()
        return loss

    step_fn.optimizer = topt  # type: ignore[attr-defined]  # for the schedule
    return step_fn


def torch_graph_trainer(cfg: DemoConfig, dev: str, *, warmup: int = 3) -> Callable[[], Any]:
    """The demo's whole training step (forward, backward, clipping, fused AdamW) as one CUDA
    graph on ``dev`` = ``"cuda"``: a function replaying it once and returning the loss tensor (not
    synchronized). The graph walks the data set by itself (a step counter on the device picks
    the batch), so a replay needs nothing from the host: the torch counterpart of recording many
    steps into one Vulkan submission. The first ``warmup`` steps run eagerly on a side stream
    (the optimizer creates its state there, as capture requires), so the first replay trains on
    batch ``warmup``.

    On ``dev`` = ``"cpu"`` nothing is captured and each call runs the same step eagerly (no
    capturable state): what the graph computes, checkable without a GPU."""
    import torch

    capture = dev == "cuda"
    run = _torch_model(cfg, dev)
    # capturable: the step count and the bias corrections stay on the device (no host sync).
    topt = run.optimizer_class(
        run.params, lr=cfg.lr, weight_decay=cfg.weight_decay, fused=True, capturable=capture
    )
    index = torch.zeros(1, dtype=torch.long, device=dev)  # the next batch, kept on the device

    def step() -> Any:
        h = torch.index_select(run.xs, 0, index)[0]
        target = torch.index_select(run.ys, 0, index)[0]
        loss: Any = torch.mean((run.forward(h) - target) ** 2)
        loss.backward()
        if cfg.clip_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(run.params, cfg.clip_grad_norm)
        topt.step()
        index.add_(1).remainder_(run.steps)
        return loss

    if not capture:

        def eager() -> Any:
            topt.zero_grad(set_to_none=True)
            return step()

        return eager
    side = torch.cuda.Stream()  # type: ignore[no-untyped-call]
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            topt.zero_grad(set_to_none=True)
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    # Gradients unset: backward allocates them inside the graph's memory pool, and every replay
    # overwrites them (the documented whole-network capture).
    topt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        static_loss = step()

    def replay() -> Any:
        graph.replay()
        return static_loss

    return replay


def train_torch(cfg: DemoConfig, progress: bool) -> tuple[list[float], str] | None:
    """The loss curve and torch's device, or None without torch (said, :data:`NO_TORCH`) or for a
    rule torch lacks."""
    if cfg.rule not in ("adam", "adamw"):
        return None
    try:
        import torch
    except ImportError:
        print(f"vk-adam demo: {NO_TORCH}")
        return None

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    step_fn = torch_trainer(cfg, dev)
    topt = step_fn.optimizer  # type: ignore[attr-defined]
    losses = []
    bar = progress_bar(cfg.steps, 0, progress, f"torch.optim ({dev})")
    for step in range(cfg.steps):
        topt.param_groups[0]["lr"] = cfg.lr_at(step)
        losses.append(float(step_fn(step).item()))
        bar(losses[-1])
    bar(None)
    return losses, dev
