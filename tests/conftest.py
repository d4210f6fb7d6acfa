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
import socket
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

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


@contextmanager
def gloo_world_of_one() -> Iterator[None]:
    """A torch.distributed gloo process group of one rank, this process, on a free local port."""
    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def one_rank() -> Iterator[None]:
    """A module's one-rank gloo group (``gloo_world_of_one``); skips if one already exists."""
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    with gloo_world_of_one():
        yield


def assert_same_refusals(ranks: Sequence[Mapping[str, Any]], expected: Mapping[str, tuple[str, str]]) -> None:
    """Each bad input a ZeRO-1 worker tried (``expected``: key -> (error type, text)) raised the
    same error on every rank, naming a rank."""
    for key, (kind, text) in expected.items():
        messages = {r[key] for r in ranks}
        assert len(messages) == 1, messages  # the same error on every rank
        message = messages.pop()
        assert message is not None and message.startswith(kind) and text in message and "rank" in message, (
            message
        )
