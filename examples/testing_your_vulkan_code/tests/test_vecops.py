"""vecops against NumPy, on the session's Vulkan device (lavapipe in CI), under validation."""

from __future__ import annotations

import numpy as np
import pytest


def _inputs(rng: np.random.Generator, n: int) -> tuple[float, np.ndarray, np.ndarray]:
    return (
        float(rng.uniform(-2, 2)),
        rng.standard_normal(n).astype(np.float32),
        rng.standard_normal(n).astype(np.float32),
    )


def _expected(a: float, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y_out = np.float32(a) * x + y  # float32, as the shader; it may fuse the multiply-add (1 ulp)
    return y_out, y_out * y_out


def test_saxpy_then_square_match_numpy(make_vecops, rng):
    n = 10_000
    ops = make_vecops(n)
    a, x, y = _inputs(rng, n)
    y_out, z_out = ops.run(a, x, y)
    want_y, want_z = _expected(a, x, y)
    np.testing.assert_allclose(y_out, want_y, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(z_out, want_z, rtol=1e-5, atol=1e-6)


def test_a_grid_smaller_than_the_vector_still_covers_it(make_vecops, rng):
    n = 1_000  # 3 groups of 64 invocations: each strides over about 5 elements
    ops = make_vecops(n, max_groups=3)
    a, x, y = _inputs(rng, n)
    y_out, z_out = ops.run(a, x, y)
    np.testing.assert_allclose(y_out, _expected(a, x, y)[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(z_out, _expected(a, x, y)[1], rtol=1e-5, atol=1e-6)


def test_submissions_back_to_back_on_the_same_buffers(make_vecops, rng):
    n = 4_096
    ops = make_vecops(n)
    for _ in range(3):
        a, x, y = _inputs(rng, n)
        np.testing.assert_allclose(ops.run(a, x, y)[1], _expected(a, x, y)[1], rtol=1e-5, atol=1e-6)


@pytest.mark.requires_gpu
def test_a_vector_too_large_for_a_cpu_driver(make_vecops, rng):
    n = 1 << 25  # 128 MiB a buffer, 768 MiB with the host copies: a size for a GPU, not for lavapipe
    ops = make_vecops(n)
    a, x, y = _inputs(rng, n)
    y_out, z_out = ops.run(a, x, y)
    sample = rng.integers(0, n, 10_000)
    want_y, want_z = _expected(a, x[sample], y[sample])
    np.testing.assert_allclose(y_out[sample], want_y, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(z_out[sample], want_z, rtol=1e-5, atol=1e-6)
