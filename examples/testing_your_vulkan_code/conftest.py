"""The project's own fixtures. The Vulkan ones (``kp_manager``, ``vulkan_device``), the test's
seed (``vk_seed``), the ``--vk-validation`` option and the ``requires_gpu`` marker come from
vk-adam's pytest plugin, which pytest loads by itself once vk-adam is installed: nothing to
import for them."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest
import vecops


@pytest.fixture(scope="session")
def spirv(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The shaders, compiled once per session."""
    out = tmp_path_factory.mktemp("spirv")
    return {name: vecops.compile_shader(name, out) for name in ("saxpy", "square")}


@pytest.fixture
def rng(vk_seed: int) -> np.random.Generator:
    """Random inputs from the test's seed: a failure prints the command that replays it."""
    return np.random.default_rng(vk_seed)


@pytest.fixture
def make_vecops(kp_manager, vulkan_device, spirv) -> Iterator[Callable[..., vecops.VecOps]]:
    """``make_vecops(n, max_groups=None)``: a VecOps on the session's device, freed after the test."""
    made: list[vecops.VecOps] = []

    def make(n: int, max_groups: int | None = None) -> vecops.VecOps:
        made.append(vecops.VecOps(kp_manager, spirv, n, max_groups or vulkan_device.max_workgroup_count))
        return made[-1]

    yield make
    for v in made:
        v.close()
