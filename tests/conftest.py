"""Shared fixtures. Every test draws fresh random inputs; the seed is printed so a failure can
be replayed with VK_ADAM_TEST_SEED=<seed>.

The Vulkan fixtures (``kp_manager``: the process's shared device; ``vulkan_device``), Khronos
validation (``--vk-validation``, which scripts/test.sh passes: a missing layer is an error, and a
test fails if the layer reported anything while it ran) and the ``requires_gpu`` marker come
from vk-adam's own pytest plugin (``vk_adam/pytest_plugin.py``), loaded through its entry point.
"""

from __future__ import annotations

import os
import secrets

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    seed = int(os.environ.get("VK_ADAM_TEST_SEED") or secrets.randbits(32))
    print(f"random seed: {seed} (replay with VK_ADAM_TEST_SEED={seed})")
    return np.random.default_rng(seed)


def scale_error(actual: np.ndarray, expected: np.ndarray) -> float:
    """max |actual - expected| relative to the tensor's scale (max |expected|)."""
    expected = np.asarray(expected, np.float64)
    return float(
        np.max(np.abs(np.asarray(actual, np.float64) - expected)) / max(np.max(np.abs(expected)), 1e-30)
    )


def random_grad(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Gradients whose scale changes from step to step (1e-3 .. 1e2), never all zeros."""
    return (rng.standard_normal(shape) * 10.0 ** rng.uniform(-3, 2)).astype(np.float32)
