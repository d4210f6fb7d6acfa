"""WRONG ON PURPOSE: the barrier between the two dispatches is left out, so square.comp's reads
of y race saxpy.comp's writes. On lavapipe, which runs the dispatches one after the other, the
numbers come out right anyway; under ``pytest --vk-validation`` this test fails with
SYNC-HAZARD-READ-AFTER-WRITE. It lives outside ``tests/`` (the project's testpaths), and
.ci/recipe-vulkan-testing.sh checks that it fails."""

from __future__ import annotations

import kp
import numpy as np


def test_saxpy_then_square_without_the_barrier(make_vecops, rng):
    n = 10_000
    ops = make_vecops(n)
    a = 1.5
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    no_barrier = [op for op in ops.ops(a) if not isinstance(op, kp.OpMemoryBarrier)]
    y_out, z_out = ops.run(a, x, y, no_barrier)
    np.testing.assert_allclose(z_out, y_out * y_out, rtol=1e-6)
