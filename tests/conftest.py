"""Shared fixtures. Every test draws fresh random inputs; the seed is printed so a failure can
be replayed with VK_ADAM_TEST_SEED=<seed>."""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests import _validation

#: The validation log of this session (None when the layer is off).
VALIDATION_LOG: Path | None = None


def pytest_configure(config: pytest.Config) -> None:
    """Run every Vulkan call of the suite under Khronos core + synchronization validation."""
    global VALIDATION_LOG
    wanted = os.environ.get("VK_ADAM_VALIDATION", "auto")
    if wanted == "0":
        return
    if not _validation.layer_installed():
        if wanted == "1":
            raise pytest.UsageError(
                "VK_ADAM_VALIDATION=1 but the Khronos validation layer is not installed "
                "(Debian: apt-get install vulkan-validationlayers)"
            )
        return
    VALIDATION_LOG = _validation.enable(Path(tempfile.mkdtemp(prefix="vk-adam-validation-")))


@pytest.fixture(autouse=True)
def no_validation_messages() -> Iterator[None]:
    """Fail the test if the validation layer reported anything while it ran."""
    if VALIDATION_LOG is None:
        yield
        return
    start = VALIDATION_LOG.stat().st_size
    yield
    with VALIDATION_LOG.open("rb") as log:
        log.seek(start)
        new = _validation.messages(log.read().decode(errors="replace"))
    if new:
        pytest.fail("Vulkan validation reported:\n" + "\n".join(new)[:6000], pytrace=False)


@pytest.fixture
def rng() -> np.random.Generator:
    seed = int(os.environ.get("VK_ADAM_TEST_SEED") or secrets.randbits(32))
    print(f"random seed: {seed} (replay with VK_ADAM_TEST_SEED={seed})")
    return np.random.default_rng(seed)


@pytest.fixture(scope="session")
def kp_manager() -> Iterator[object]:
    """One application-owned kp.Manager, as a Vulkan application would hold."""
    from vk_adam._runtime import kp_module, select_device

    mgr = kp_module().Manager(select_device().index)
    yield mgr
    mgr.destroy()


def scale_error(actual: np.ndarray, expected: np.ndarray) -> float:
    """max |actual - expected| relative to the tensor's scale (max |expected|)."""
    expected = np.asarray(expected, np.float64)
    return float(
        np.max(np.abs(np.asarray(actual, np.float64) - expected)) / max(np.max(np.abs(expected)), 1e-30)
    )


def random_grad(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Gradients whose scale changes from step to step (1e-3 .. 1e2), never all zeros."""
    return (rng.standard_normal(shape) * 10.0 ** rng.uniform(-3, 2)).astype(np.float32)
