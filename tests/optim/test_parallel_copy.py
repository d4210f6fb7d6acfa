"""Large host copies (gradients into staging memory, params back into the arrays) are split over
threads (``host.copy_threads.copy_into``, which ``to_device``'s gather and ``to_host``'s scatter
hand a large array to): the result must be exactly the one assignment gives, for every size,
dtype conversion and thread count."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from vk_adam._optim.host.copy_threads import COPY_THREADS_ENV, PARALLEL_COPY_BYTES, copy_into, copy_threads
from vk_adam._optim.host.to_device import gather
from vk_adam._optim.host.to_host import scatter
from vk_adam._optim.layout import ParamSlot


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


@pytest.mark.parametrize("threads", ["1", "3"])
def test_gather_and_scatter_copy_small_and_large_slots_exactly(monkeypatch, rng, threads):
    """A slot below the threshold is copied in place, one past it over the threads: both land
    exactly at their offsets, in the buffer's dtype, and come back unchanged."""
    monkeypatch.setenv(COPY_THREADS_ENV, threads)
    sizes = [1000, PARALLEL_COPY_BYTES // 2 + 777]  # bfloat16: 2 bytes, so the second is past it
    arrays = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    slots = [
        ParamSlot(0, 0, sizes[0], (sizes[0],), arrays[0]),
        ParamSlot(0, 1024, sizes[1], (sizes[1],), arrays[1]),
    ]
    flat = np.zeros(1024 + sizes[1], ml_dtypes.bfloat16)
    gather(slots, arrays, flat)
    for slot, array in zip(slots, arrays, strict=True):
        expected = array.astype(ml_dtypes.bfloat16)
        assert np.array_equal(
            flat[slot.offset : slot.offset + slot.size].view(np.uint16), expected.view(np.uint16)
        )
    for array in arrays:
        array[...] = 0
    scatter(slots, flat)
    for slot, array in zip(slots, arrays, strict=True):
        assert np.array_equal(array, flat[slot.offset : slot.offset + slot.size].astype(np.float32))


def test_copy_threads_come_from_the_environment_or_the_cores(monkeypatch):
    monkeypatch.setenv(COPY_THREADS_ENV, "5")
    assert copy_threads() == 5
    monkeypatch.delenv(COPY_THREADS_ENV)
    assert 1 <= copy_threads() <= 16
    monkeypatch.setenv(COPY_THREADS_ENV, "0")
    with pytest.raises(ValueError, match=r"VK_ADAM_COPY_THREADS must be a positive integer \(got '0'\)"):
        copy_threads()
