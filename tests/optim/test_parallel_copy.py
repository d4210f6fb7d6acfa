"""Large host copies (gradients into staging memory, params back into the arrays) are split over
threads (``host.slots.copy_into``): the result must be exactly the one assignment gives, for every
size, dtype conversion and thread count."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from vk_adam._optim.host.copy_threads import COPY_THREADS_ENV, PARALLEL_COPY_BYTES, copy_threads
from vk_adam._optim.host.slots import copy_into


@pytest.mark.parametrize("threads", ["1", "3", "16"])
@pytest.mark.parametrize(
    "src_dtype,dst_dtype",
    [(np.float32, np.float32), (np.float64, np.float32), (np.float32, ml_dtypes.bfloat16)],
)
def test_a_threaded_copy_equals_assignment(monkeypatch, rng, threads, src_dtype, dst_dtype):
    monkeypatch.setenv(COPY_THREADS_ENV, threads)
    n = PARALLEL_COPY_BYTES // 4 * 3 + 12345  # past the threshold, not a multiple of anything
    src = rng.standard_normal(n).astype(src_dtype)
    expected = np.empty(n, dst_dtype)
    expected[...] = src
    got = np.full(n, np.nan, dst_dtype)
    copy_into(got, src)
    assert np.array_equal(got.view(np.uint8), expected.view(np.uint8))


def test_copy_threads_come_from_the_environment_or_the_cores(monkeypatch):
    monkeypatch.setenv(COPY_THREADS_ENV, "5")
    assert copy_threads() == 5
    monkeypatch.delenv(COPY_THREADS_ENV)
    assert 1 <= copy_threads() <= 16
    monkeypatch.setenv(COPY_THREADS_ENV, "0")
    with pytest.raises(ValueError, match=r"VK_ADAM_COPY_THREADS must be a positive integer \(got '0'\)"):
        copy_threads()
