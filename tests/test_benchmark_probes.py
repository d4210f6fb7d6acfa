"""benchmarks/quantizer_cost.py edits the harness's text to build its probes: every edit must
still find what it replaces in today's harness, and the build that claims the same results
(quantizer_cost.SAME_RESULTS: the tables copied into shared memory instead of read in place,
fp16 stochastic rounding without its fast path, a leaner quantizer, the quantizer's bucket tables
in shared memory) must give the same bits."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import vk_adam
from vk_adam import _formats as fmt

ROOT = Path(__file__).resolve().parent.parent
HARNESS = (Path(vk_adam.__file__).parent / "include" / "vk_adam_rule.glsl").read_text()


@pytest.fixture(scope="module")
def probe() -> ModuleType:
    spec = importlib.util.spec_from_file_location("quantizer_cost", ROOT / "benchmarks" / "quantizer_cost.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["quantizer_cost"] = module
    spec.loader.exec_module(module)
    return module


def test_every_probe_edit_changes_the_harness(probe):
    for name, (edits, _knobs) in probe.ABLATIONS.items():
        text = HARNESS
        for edit in edits:
            edited = edit(text)
            assert edited != text, f"{name}: an edit found nothing to change"
            text = edited
    shared = probe._shared_tables(HARNESS)
    assert "shared uint vk_adam_tables" in shared and "barrier();" in shared.split("void main()")[1]


N = fmt.INT8_MIN_ELEMENTS + 3 * fmt.BLOCK + 1001  # 8-bit state (big enough), the last block partial


def _three_steps(rule, subgroups: str, monkeypatch, dtype=np.float32) -> list[np.ndarray]:
    """Three AdamW steps with 8-bit state: the params (``dtype``; 16-bit ones take the update by
    stochastic rounding) and both state buffers afterwards."""
    monkeypatch.setenv("VK_ADAM_SUBGROUPS", subgroups)
    rng = np.random.default_rng(7)
    # Magnitudes from 1e-9 to 1e4: fp16 subnormals, normals and values near fp16's largest.
    p = (rng.standard_normal(N) * 10.0 ** rng.uniform(-9, 4, N)).astype(dtype)
    grads = [rng.standard_normal(N).astype(dtype) for _ in range(3)]
    opt = vk_adam.Optimizer(
        [p],
        rule,
        lr=1e-2,
        state_dtype="int8-blockwise",
        zero_grad=False,
        stochastic_rounding=dtype != np.float32,
    )
    try:
        assert opt.memory_bytes()["absmax"] > 0, "the state must be 8-bit for this test to mean anything"
        for g in grads:
            opt.step([g])
        state = opt.state_dict()["state"][0]
        return [p, *(np.asarray(state[k]) for k in ("exp_avg", "exp_avg_sq"))]
    finally:
        opt.close()


#: The param dtype each same-result build changes something for.
DTYPES = {
    "shared tables": np.float32,
    "fp16 SR general path": np.float16,
    "lean quantizer": np.float32,
    "shared bucket tables": np.float32,
}


@pytest.mark.parametrize("subgroups", ["0", "1"])
@pytest.mark.parametrize("build", sorted(DTYPES))
def test_same_result_builds_give_the_release_bits(probe, tmp_path, monkeypatch, subgroups, build):
    assert set(DTYPES) == set(probe.SAME_RESULTS)
    rule = probe.build_rule(build, probe.SAME_RESULTS[build](HARNESS), tmp_path)
    built = Path(rule.variants["adam"].spirv)
    assert built.is_file() and built.with_name("adam.subgroups.spv").is_file()
    ours = _three_steps(rule, subgroups, monkeypatch, DTYPES[build])
    release = _three_steps("adamw", subgroups, monkeypatch, DTYPES[build])
    for a, b in zip(ours, release, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))
    rng = np.random.default_rng(7)
    start = (rng.standard_normal(N) * 10.0 ** rng.uniform(-9, 4, N)).astype(DTYPES[build])
    assert not np.array_equal(ours[0], start), "the steps must have changed the params"
    if DTYPES[build] == np.float16:  # both paths of the rounding: subnormal and normal results
        magnitude = np.abs(ours[0].astype(np.float32))
        subnormal = (magnitude > 0) & (magnitude < np.finfo(np.float16).tiny)
        assert subnormal.any() and (magnitude >= np.finfo(np.float16).tiny).any()
