"""The optimizer's state and master copies hold no host staging copy (kp storage tensors, vk-adam's
patch 0022 "storage copies"): they are filled on the device at construction, and checkpoints move
them through a transient host buffer a chunk at a time (``_runtime/unstaged.py``).

Chunks are made tiny here (``CHUNK_BYTES`` 1,000: not a multiple of 4, so regions start and end
mid-word) so that every path runs over many chunks; the values must be the same bit for bit as
with one chunk, and a checkpoint must resume the run exactly.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import vk_adam
from vk_adam._runtime import kp_features, unstaged

pytestmark = pytest.mark.skipif(
    "storage copies" not in kp_features().patches,
    reason="this kp build cannot copy into storage tensors (vk-adam's patch 0022)",
)

FORMATS = [
    pytest.param({}, id="fp32"),
    pytest.param({"state_dtype": "bfloat16"}, id="bf16-state"),
    pytest.param({"state_dtype": "int8-blockwise"}, id="int8-state"),
]


def _params(rng: np.random.Generator, param_dtype: str) -> list[np.ndarray]:
    shapes = [(37, 29), (4099,), (3, 5, 7)]
    dtype = ml_dtypes.bfloat16 if param_dtype == "bfloat16" else np.float32
    return [rng.standard_normal(s).astype(np.float32).astype(dtype) for s in shapes]


def _run(params: list[np.ndarray], grads: list[list[np.ndarray]], options: dict) -> tuple[list, dict]:
    opt = vk_adam.AdamW(params, lr=1e-2, weight_decay=0.1, **options)
    try:
        for g in grads:
            opt.step(g)
        return [p.copy() for p in params], opt.state_dict()
    finally:
        opt.close()


def _same(a: object, b: object) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, list | tuple):
        assert isinstance(b, list | tuple) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8))
    else:
        assert a == b


@pytest.mark.parametrize("options", FORMATS)
@pytest.mark.parametrize("param_dtype", ["float32", "bfloat16"])  # bfloat16: an fp32 master copy
def test_state_in_many_chunks_matches_one_chunk_and_resumes_exactly(
    monkeypatch: pytest.MonkeyPatch, rng: np.random.Generator, options: dict, param_dtype: str
) -> None:
    start = _params(rng, param_dtype)
    grads = [
        [rng.standard_normal(p.shape).astype(np.float32).astype(p.dtype) for p in start] for _ in range(4)
    ]

    one_params, one_state = _run([p.copy() for p in start], grads, options)
    monkeypatch.setattr(unstaged, "CHUNK_BYTES", 1000)
    many_params, many_state = _run([p.copy() for p in start], grads, options)
    _same(one_params, many_params)
    _same(one_state, many_state)

    # Two steps, a checkpoint, two more in a new optimizer: as four in one.
    params = [p.copy() for p in start]
    first = vk_adam.AdamW(params, lr=1e-2, weight_decay=0.1, **options)
    for g in grads[:2]:
        first.step(g)
    saved = first.state_dict()
    first.close()
    second = vk_adam.AdamW(params, lr=1e-2, weight_decay=0.1, **options)
    second.load_state_dict(saved)
    for g in grads[2:]:
        second.step(g)
    _same(second.state_dict(), one_state)
    second.close()
    _same(params, one_params)


def test_state_buffers_have_no_host_copy(rng: np.random.Generator) -> None:
    params = [rng.standard_normal(1000).astype(np.float32)]
    opt = vk_adam.AdamW(params, lr=1e-3, state_dtype="int8-blockwise")
    try:
        runtime = opt._rt
        for name in ("exp_avg", "exp_avg_sq"):
            buffer = opt.state_buffer(name)
            assert not runtime.has_host_copy(buffer), f"{name} keeps a host staging copy"
        assert runtime.has_host_copy(opt._groups[0].sets[0].grad), "the gradient buffer is staged"
    finally:
        opt.close()


def test_exportable_state_keeps_its_exportable_buffer(rng: np.random.Generator) -> None:
    from vk_adam._runtime import Runtime

    rt = Runtime()
    try:
        if "fd export" not in rt.facts.info.external_memory:
            pytest.skip(f"{rt.facts.info.name} cannot export memory (VK_KHR_external_memory_fd)")
    finally:
        rt.close()
    params = [rng.standard_normal(1000).astype(np.float32)]
    opt = vk_adam.AdamW(params, lr=1e-3, exportable=True)
    try:
        assert opt._rt.has_host_copy(opt.state_buffer("exp_avg")), "exportable buffers stay as they were"
    finally:
        opt.close()
