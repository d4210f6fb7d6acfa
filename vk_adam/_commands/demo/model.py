"""The demo's frozen toy model and its data, with forward and backward in NumPy.

``layers`` residual blocks. A block applies its target modules (frozen square linear maps
``W [out, in]``, each with a LoRA adapter) in order with a ReLU between consecutive ones, and adds
the result to its input: with the default targets ``h + v_proj(relu(q_proj(h)))``. The data:
inputs ``x ~ N(0, I)`` and targets from the same network with a planted low-rank change
``dW = U V^T`` (rank ``cfg.planted_rank``) on every module, plus noise; the adapter must recover
``dW``. Every batch of the run is drawn up front (``make_dataset``), so the host path, the float64
reference, torch and the GPU-resident run (which uploads the whole set once) see the same data.
``fresh_run`` gives the adapter, model and data stream every run starts from, and
``train_reference`` runs the demo in float64 with the update rule's NumPy reference.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ...lora import LoRAAdapter
from .config import DemoConfig
from .output import progress_bar

Array = npt.NDArray[Any]
Weights = Callable[[str, str], Array]

BASE_GAIN = 0.5  # frozen weights ~ N(0, BASE_GAIN**2 / dim): keeps the residual stream tame


@dataclass
class FrozenModel:
    base: dict[str, npt.NDArray[np.float64]]  # module path -> W [out, in]
    planted: dict[str, npt.NDArray[np.float64]]  # module path -> dW [out, in]
    blocks: list[list[str]]  # per layer, its module paths in the order they are applied


def make_model(cfg: DemoConfig, paths: list[str]) -> FrozenModel:
    rng = np.random.default_rng([cfg.seed, 1])
    base, planted = {}, {}
    for path in paths:
        base[path] = BASE_GAIN * rng.standard_normal((cfg.dim, cfg.dim)) / math.sqrt(cfg.dim)
        u = rng.standard_normal((cfg.dim, cfg.planted_rank))
        v = rng.standard_normal((cfg.dim, cfg.planted_rank))
        planted[path] = 0.5 * (u @ v.T) / cfg.dim
    per = len(cfg.targets)
    blocks = [paths[i : i + per] for i in range(0, len(paths), per)]
    return FrozenModel(base, planted, blocks)


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


def teacher(model: FrozenModel, x: Array) -> Array:
    """The target network (frozen weights plus the planted change), float64."""
    h = x.astype(np.float64)
    for block in model.blocks:
        z = h
        for i, path in enumerate(block):
            z = z @ (model.base[path] + model.planted[path]).T
            if i < len(block) - 1:
                z = np.maximum(z, 0.0)
        h = h + z
    return h


def make_dataset(cfg: DemoConfig, model: FrozenModel) -> tuple[Array, Array]:
    """Inputs ``X [steps, batch, dim]`` and targets ``Y`` (float32), one batch per step."""
    rng = np.random.default_rng([cfg.seed, 3])
    x = rng.standard_normal((cfg.steps, cfg.batch, cfg.dim)).astype(np.float32)
    noise = cfg.noise * rng.standard_normal(x.shape)
    y = (teacher(model, x) + noise).astype(np.float32)
    return x, y


def loss_and_grads(
    model: FrozenModel,
    weights: Weights,
    grads: Weights | None,
    scale: float,
    batch: tuple[Array, Array],
    dtype: type,
) -> float:
    """Mean squared error of the adapted model on one batch; writes the LoRA gradients."""
    x: Array = batch[0].astype(dtype)
    y: Array = batch[1].astype(dtype)
    h = x
    saved = []  # per block: the input of each module
    for block in model.blocks:
        inputs, z = [], h
        for i, path in enumerate(block):
            inputs.append(z)
            a, b = weights(path, "A"), weights(path, "B")
            z = z @ model.base[path].astype(dtype).T + scale * ((z @ a.T) @ b.T)
            if i < len(block) - 1:
                z = np.maximum(z, 0.0)
        saved.append(inputs)
        h = h + z
    err: Array = h - y
    loss = float(np.mean(err.astype(np.float64) ** 2))
    if grads is None:
        return loss
    g = (2.0 / err.size) * err  # d loss / d h_L
    for block, inputs in zip(reversed(model.blocks), reversed(saved), strict=True):
        d: Array = g  # gradient of the block's last pre-activation: the residual branch's output
        for i in reversed(range(len(block))):
            path, z = block[i], inputs[i]
            a, b = weights(path, "A"), weights(path, "B")
            t = z @ a.T
            grads(path, "B")[...] = scale * (d.T @ t)
            dt = scale * (d @ b)
            grads(path, "A")[...] = dt.T @ z
            dz: Array = d @ model.base[path].astype(dtype) + dt @ a
            d = dz * (z > 0) if i > 0 else dz
        g = g + d
    return loss


def train_reference(cfg: DemoConfig, progress: bool) -> list[float]:
    """The demo's run in float64 with the rule's NumPy reference (forward/backward in float64):
    float64 params and state whatever ``cfg``'s storage formats: the ideal they approximate."""
    from ..._rules import default_registry

    rule = default_registry().get(cfg.rule)
    adapter, model, _ = fresh_run(cfg)
    x, y = make_dataset(cfg, model)
    params = adapter.flat_params.astype(np.float64)
    grads = np.zeros_like(params)
    # slices() is in the order of the modules, A then B of each: name its entries by (path, A|B)
    names = [(m.path, w) for m in adapter.modules for w in ("A", "B")]
    slices = dict(zip(names, adapter.slices().values(), strict=True))

    def view(flat: Array) -> Callable[[str, str], Array]:
        def get(path: str, which: str) -> Array:
            offset, shape = slices[(path, which)]
            return flat[offset : offset + shape[0] * shape[1]].reshape(shape)

        return get

    hyper = {**rule.defaults, **cfg.rule_hyper()}
    state = {s.name: np.full_like(params, s.initial_value) for s in rule.variant_for(hyper).state}
    losses = []
    bar = progress_bar(cfg.steps, 0, progress, "float64 reference")
    for step in range(cfg.steps):
        batch = (x[step], y[step])
        losses.append(loss_and_grads(model, view(params), view(grads), adapter.scale, batch, np.float64))
        if cfg.clip_grad_norm is not None:  # torch's clip_grad_norm_: g *= min(1, max / (norm + 1e-6))
            grads *= min(1.0, cfg.clip_grad_norm / (float(np.linalg.norm(grads)) + 1e-6))
        hyper["lr"] = cfg.lr_at(step)
        rule.reference(params, grads, state, hyper, step + 1)
        bar(losses[-1])
    bar(None)
    return losses
