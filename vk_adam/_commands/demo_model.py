"""The demo's frozen toy model and its data, with forward and backward in NumPy.

``layers`` x ``targets`` frozen linear maps ``W [out, in]``, each with a planted low-rank change
``dW = U V^T`` (rank ``cfg.planted_rank``); targets are ``(W + dW) x`` plus noise. The LoRA
adapter must recover ``dW``. The same functions serve the Vulkan run (float32), the float64
reference and the torch run, so the three see the same data and the same gradients' formula.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:  # a type only: demo.py imports this module
    from .demo import DemoConfig

Array = npt.NDArray[Any]


@dataclass
class FrozenModel:
    base: dict[str, npt.NDArray[np.float64]]  # module path -> W [out, in]
    planted: dict[str, npt.NDArray[np.float64]]  # module path -> dW [out, in]


def make_model(cfg: DemoConfig, paths: list[str]) -> FrozenModel:
    rng = np.random.default_rng([cfg.seed, 1])
    base, planted = {}, {}
    for path in paths:
        base[path] = rng.standard_normal((cfg.dim, cfg.dim)) / math.sqrt(cfg.dim)
        u = rng.standard_normal((cfg.dim, cfg.planted_rank))
        v = rng.standard_normal((cfg.dim, cfg.planted_rank))
        planted[path] = 0.5 * (u @ v.T) / cfg.dim
    return FrozenModel(base, planted)


def draw_batch(cfg: DemoConfig, rng: np.random.Generator, paths: list[str]) -> tuple[Array, dict[str, Array]]:
    """Inputs and per-module target noise for one step (float32, from the run's RNG)."""
    x = rng.standard_normal((cfg.batch, cfg.dim)).astype(np.float32)
    noise = {p: (cfg.noise * rng.standard_normal((cfg.batch, cfg.dim))).astype(np.float32) for p in paths}
    return x, noise


def loss_and_grads(
    model: FrozenModel,
    weights: Callable[[str, str], Array],
    grads: Callable[[str, str], Array] | None,
    scale: float,
    batch: tuple[Array, dict[str, Array]],
    dtype: type,
) -> float:
    """Mean squared error of the adapted model against the planted target; writes grads."""
    total = 0.0
    paths = list(model.base)
    x: Array = batch[0].astype(dtype)
    for path in paths:
        a, b = weights(path, "A"), weights(path, "B")
        w: Array = model.base[path].astype(dtype)
        target = x @ (w + model.planted[path].astype(dtype)).T + batch[1][path].astype(dtype)
        ax = x @ a.T  # [batch, rank]
        y = x @ w.T + scale * (ax @ b.T)
        err: Array = y - target
        total += float(np.mean(err.astype(np.float64) ** 2))
        if grads is not None:
            dy = (2.0 / (err.size * len(paths))) * err  # d(mean over modules of MSE)/dy
            grads(path, "B")[...] = scale * (dy.T @ ax)
            grads(path, "A")[...] = scale * ((dy @ b).T @ x)
    return total / len(paths)
