"""Shared fixtures, and the suite's one seed.

Every random draw of the suite comes from one session seed: ``$VK_ADAM_TEST_SEED`` (or
``--vk-seed``), else a fresh one, printed in the session's header. Each test's seed is derived
from it and the test's node id (vk-adam's pytest plugin: fixture ``vk_seed``), so a test
replays alone: a failing test that drew random data prints the one command that replays it,
``VK_ADAM_TEST_SEED=<seed> python -m pytest <node id>``. From that seed come the ``rng``
fixture's NumPy generator, hypothesis (each ``@given`` test is seeded with it unless
``--hypothesis-seed`` is given, and the example database is off, so the seed alone decides what
runs), and the global generators of ``random``, NumPy's legacy ``np.random`` and torch (seeded
before each test; torch is imported for that when it is installed). ``check_rule`` calls pass
``seed=vk_seed``. A module-scoped fixture takes ``module_seed(request)``.

The Vulkan fixtures (``kp_manager``: the process's shared device; ``vulkan_device``), Khronos
validation (``--vk-validation``, which scripts/test.sh passes: a missing layer is an error, and a
test fails if the layer reported anything while it ran) and the ``requires_gpu`` marker come
from vk-adam's own pytest plugin (``vk_adam/pytest_plugin.py``), loaded through its entry point.
Marker ``exclusive``: a test that needs the machine to itself (timings, memory or fd counts of
the whole process or device, many processes or a thousand cycles); scripts/test.sh runs them
alone, after the others ran in parallel.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import random
import socket
import sys
from collections.abc import Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from hypothesis import settings
from hypothesis.internal.detection import is_hypothesis_test

from vk_adam._runtime import DeviceLimits
from vk_adam.pytest_plugin import derive_seed, seed_of, session_seed

# No example database: what a hypothesis test runs depends on its seed alone (a failure found
# in an earlier session is replayed from that session's seed, not from a local file).
settings.register_profile("vk-adam", database=None)
settings.load_profile("vk-adam")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "exclusive: needs the machine to itself (timings; memory, fd or device counts of the "
        "process or device; many processes; a thousand cycles): scripts/test.sh runs these alone, "
        "after the parallel run",
    )


@pytest.fixture
def rng(vk_seed: int) -> np.random.Generator:
    """A NumPy generator seeded with this test's seed."""
    return np.random.default_rng(vk_seed)


def module_seed(request: pytest.FixtureRequest) -> int:
    """The seed of a module-scoped fixture: the session's seed and the module's node id."""
    return derive_seed(session_seed(request.config), request.node.nodeid)


def _torch() -> Any:
    """torch, imported (so that a test importing it later still draws from its seed), or None."""
    torch = sys.modules.get("torch")
    if torch is None and importlib.util.find_spec("torch") is not None:
        import torch
    return torch


def _global_states() -> tuple[object, ...]:
    """The global generators' states (to see whether a test drew from them)."""
    torch = _torch()
    legacy = np.random.get_state(legacy=True)
    states: tuple[object, ...] = (random.getstate(), legacy[1].tobytes(), legacy[2:])  # type: ignore[index]
    if torch is not None:
        states += (torch.random.get_rng_state().numpy().tobytes(),)
    return states


_GLOBAL_STATES = pytest.StashKey[tuple[object, ...]]()


@pytest.fixture(autouse=True)
def _seeded(request: pytest.FixtureRequest) -> None:
    """Seed the global generators and hypothesis with this test's seed."""
    item = request.node
    seed = seed_of(item, draws=False)
    random.seed(seed)
    np.random.seed(seed)
    torch = _torch()
    if torch is not None:
        torch.manual_seed(seed)
    function = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))
    if function is not None and is_hypothesis_test(function):
        if request.config.getoption("hypothesis_seed", None) is None:
            function._hypothesis_internal_use_seed = seed  # what hypothesis.seed(seed) sets
            seed_of(item)  # hypothesis draws from it
    item.stash[_GLOBAL_STATES] = _global_states()


#: Set by scripts/test-profiles.sh: the suite runs on a simulated device class.
SIMULATED_PROFILE = os.environ.get("VK_KHRONOS_PROFILES_PROFILE_NAME")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """A test that drew from a global generator drew from its seed (its failure names it).

    Under a simulated device profile, a test whose device work the device refuses (a
    ``vk_adam.DeviceCapabilityError``: a limit or feature it lacks, named in the message) is
    skipped with that reason; on a real device, as on CI's lavapipe, it fails."""
    try:
        return (yield)
    except Exception as exc:
        from vk_adam import DeviceCapabilityError

        if SIMULATED_PROFILE and isinstance(exc, DeviceCapabilityError):
            pytest.skip(f"{SIMULATED_PROFILE} cannot run it: {exc}")
        raise
    finally:
        before = item.stash.get(_GLOBAL_STATES, None)
        if before is not None and _global_states() != before:
            seed_of(item)


def scale_error(actual: np.ndarray, expected: np.ndarray, scale: float | None = None) -> float:
    """max |actual - expected| relative to the tensor's scale: ``scale`` if given (such as the
    largest magnitude the tensor held over several steps), else max |expected|."""
    expected = np.asarray(expected, np.float64)
    if scale is None:
        scale = float(np.max(np.abs(expected)))
    return float(np.max(np.abs(np.asarray(actual, np.float64) - expected)) / max(scale, 1e-30))


def adamw_f64(
    p: np.ndarray,
    g: np.ndarray,
    m: np.ndarray,
    v: np.ndarray,
    step: int,
    lr: float = 1e-3,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
    wd: float = 1e-2,
) -> None:
    """One AdamW step in float64, in place on ``p``, ``m``, ``v`` (torch.optim.AdamW's order)."""
    p *= 1 - lr * wd
    m[:] = betas[0] * m + (1 - betas[0]) * g
    v[:] = betas[1] * v + (1 - betas[1]) * g * g
    denom = np.sqrt(v / (1 - betas[1] ** step)) + eps
    p -= lr / (1 - betas[0] ** step) * m / denom


def random_grad(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Gradients whose scale changes from step to step (1e-3 .. 1e2), never all zeros."""
    return (rng.standard_normal(shape) * 10.0 ** rng.uniform(-3, 2)).astype(np.float32)


#: The limits' constructor as the library defines it (``limit_allocations`` lowers what it reports).
_FROM_PROPERTIES = DeviceLimits.__dict__["from_properties"]


def limit_allocations(monkeypatch: pytest.MonkeyPatch, limit: int | None) -> None:
    """Allocations of at most ``limit`` bytes (None: the device's own) for the runtimes and limits
    read after this: the device's properties report that ``maxMemoryAllocationSize`` (read, even
    where a stock kp cannot read the device's), so small NumPy groups take the several-buffer-sets
    path that groups past one allocation take on real devices. As ``tests/optim/test_windows.py``
    lowers bindings; the two replace each other, so a test takes one of them."""
    if limit is None:
        monkeypatch.setattr(DeviceLimits, "from_properties", _FROM_PROPERTIES)
        return

    def lowered(cls: type[DeviceLimits], props: Mapping[str, Any]) -> DeviceLimits:
        limits = _FROM_PROPERTIES.__func__(cls, props)
        readable = "max_memory_allocation_size" not in limits.assumed
        return dataclasses.replace(
            limits,
            max_memory_allocation_size=min(limit, limits.max_memory_allocation_size) if readable else limit,
            assumed=limits.assumed - {"max_memory_allocation_size"},
        )

    monkeypatch.setattr(DeviceLimits, "from_properties", classmethod(lowered))


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
