"""The subgroup variant of the 8-bit path and the loop-shape knobs (vk_adam/_optim/variants.py).

Selection is tested on fake device properties; both variants, every knob value and the
fallbacks run on the real device (lavapipe here) and must give the same bits as the base
variant with default knobs. Agreement with the format reference is test_formats.py's, which
runs its device tests under both variants."""

from __future__ import annotations

import dataclasses
import os
import shutil

import numpy as np
import pytest

import vk_adam
from vk_adam._optim import variants
from vk_adam._optim.storage import group_format
from vk_adam._optim.variants import (
    LoopShape,
    loop_shape,
    subgroup_size,
    subgroup_spirv,
    subgroup_unsupported,
    update_launch,
)
from vk_adam._rules.registry import default_registry
from vk_adam._rules.rule import ShaderVariant
from vk_adam._rules.spirv import SPIRV_DIR
from vk_adam._runtime.devices import DeviceInfo, select_device

ALL_KNOBS = (
    variants.SUBGROUPS_ENV,
    variants.VEC4S_ENV,
    variants.INT8_VEC4S_ENV,
    variants.INT8_WORKGROUPS_ENV,
    variants.WORKGROUP_SIZE_ENV,
)
COMPUTE, BASIC, ARITHMETIC = 0x20, 0x1, 0x4


@pytest.fixture(autouse=True)
def _no_knobs(monkeypatch):
    for name in ALL_KNOBS:
        monkeypatch.delenv(name, raising=False)


def fake_device(
    size: int = 32, stages: int = COMPUTE | 0x10, ops: int = 0x7F, name: str = "fake GPU", threads: int = 1024
) -> DeviceInfo:
    return DeviceInfo(0, name, "discrete", "fake", "1.3", 65535, True, size, stages, ops, threads)


# -- selection on fake properties -----------------------------------------------------------------


@pytest.mark.parametrize("size", [8, 16, 32, 64])
def test_a_device_with_subgroup_arithmetic_in_compute_gets_the_variant(size):
    assert subgroup_unsupported(fake_device(size)) is None
    assert subgroup_size(fake_device(size)) == size


@pytest.mark.parametrize(
    "device, reason",
    [
        (fake_device(ops=BASIC | 0x2 | 0x8), "no subgroup arithmetic"),
        (fake_device(stages=0x10), "no subgroup operations in compute"),
        (fake_device(size=128), "subgroup size is 128"),
        (fake_device(size=4), "subgroup size is 4"),
        (fake_device(size=0, stages=0, ops=0), "does not report subgroup properties"),
    ],
)
def test_a_device_without_what_the_variant_needs_gets_the_base_variant(device, reason, monkeypatch):
    assert reason in (subgroup_unsupported(device) or "")
    assert subgroup_size(device) == 0
    monkeypatch.setenv(variants.SUBGROUPS_ENV, "auto")
    assert subgroup_size(device) == 0
    monkeypatch.setenv(variants.SUBGROUPS_ENV, "1")  # forcing it there is an error that says why
    with pytest.raises(ValueError, match=reason):
        subgroup_size(device)


def test_the_environment_forces_either_variant(monkeypatch):
    monkeypatch.setenv(variants.SUBGROUPS_ENV, "0")
    assert subgroup_size(fake_device(32)) == 0
    monkeypatch.setenv(variants.SUBGROUPS_ENV, "1")
    assert subgroup_size(fake_device(32)) == 32
    monkeypatch.setenv(variants.SUBGROUPS_ENV, "yes")
    with pytest.raises(ValueError, match="VK_ADAM_SUBGROUPS must be 0, 1 or auto"):
        subgroup_size(fake_device(32))


def test_the_8_bit_workgroup_cap_follows_the_step_size_unless_set():
    """Unset, the cap is a quarter of one pass's workgroups within 2048..32768; the knob's value
    wins whatever the size."""
    shape = LoopShape(1, 1, 32)
    assert shape.int8_cap(1000, 256) == variants.INT8_WORKGROUPS_MIN
    assert shape.int8_cap(2**21, 256) == 2048  # 2**24 elements, subgroup variant: four passes
    assert shape.int8_cap(2**22, 256) == 4096
    assert shape.int8_cap(2**23, 256) == 8192  # 2**26 elements
    assert shape.int8_cap(2**25, 256) == 32768 == variants.INT8_WORKGROUPS_MAX  # 2**28 elements
    assert shape.int8_cap(2**27, 256) == variants.INT8_WORKGROUPS_MAX  # 2**30 elements: capped
    assert LoopShape(1, 1, 32, 96).int8_cap(2**25, 256) == 96
    state = default_registry().get("adam").variants["adam"].state
    for state_dtype, cap in (("int8-blockwise", 32768), ("float32", None)):
        form = group_format(state, "float32", state_dtype, False, 2**28)
        assert update_launch(shape, "adam", form, 2**28, lambda spirv: True).max_groups == cap


def test_knob_defaults_and_refusals(monkeypatch):
    assert loop_shape(fake_device(32)) == LoopShape(1, 1, 32, None)  # the 8-bit cap: by size
    assert loop_shape(fake_device(8, name="llvmpipe (LLVM 15.0.6, 256 bits)")).int8_vec4s == 1
    monkeypatch.setenv(variants.VEC4S_ENV, "4")
    monkeypatch.setenv(variants.INT8_VEC4S_ENV, "2")
    monkeypatch.setenv(variants.INT8_WORKGROUPS_ENV, "96")
    monkeypatch.setenv(variants.WORKGROUP_SIZE_ENV, "512")
    assert loop_shape(fake_device(32)) == LoopShape(4, 2, 32, 96, 512)
    monkeypatch.setenv(variants.WORKGROUP_SIZE_ENV, "1024")
    with pytest.raises(ValueError, match="at most 512 invocations per workgroup"):
        loop_shape(fake_device(32, threads=512))
    for name, bad in (
        (variants.VEC4S_ENV, "3"),
        (variants.INT8_VEC4S_ENV, "4"),
        (variants.INT8_WORKGROUPS_ENV, "0"),
        (variants.WORKGROUP_SIZE_ENV, "100"),
    ):
        monkeypatch.setenv(name, bad)
        with pytest.raises(ValueError, match=name):
            loop_shape(fake_device(32))
        monkeypatch.delenv(name)


def test_one_reader_for_integer_knobs(monkeypatch):
    """``_inputs.env_int`` reads every integer knob (the loop shape's and the workgroup cap)."""
    from vk_adam._inputs import env_int
    from vk_adam._runtime.facts import MAX_WORKGROUPS_ENV

    monkeypatch.setenv(MAX_WORKGROUPS_ENV, "  ")
    assert env_int(MAX_WORKGROUPS_ENV, 7) == 7
    monkeypatch.setenv(MAX_WORKGROUPS_ENV, " 12 ")
    assert env_int(MAX_WORKGROUPS_ENV, 7) == 12
    assert env_int(MAX_WORKGROUPS_ENV, 7, (4, 12)) == 12
    with pytest.raises(ValueError, match=r"must be one of 4, 8 \(got '12'\)"):
        env_int(MAX_WORKGROUPS_ENV, 7, (4, 8))
    for bad in ("0", "-3", "two", "1.5"):
        monkeypatch.setenv(MAX_WORKGROUPS_ENV, bad)
        with pytest.raises(
            ValueError, match=rf"VK_ADAM_MAX_WORKGROUPS must be a positive integer \(got '{bad}'\)"
        ):
            env_int(MAX_WORKGROUPS_ENV, 7)


def test_invocations_cover_one_pass_of_each_loop():
    shape = LoopShape(vec4s=4, int8_vec4s=2, subgroup_size=32)
    n = 4 * 1000 + 1  # 1001 vec4s, 16 blocks
    assert shape.invocations(n, quantized=False, subgroups=False) == 251
    assert shape.invocations(n, quantized=True, subgroups=False) == 501
    assert shape.invocations(n, quantized=True, subgroups=True) == 251  # 2 blocks x 2 vec4s per lane


def test_the_workgroup_size_reaches_the_loops_that_take_any():
    """Constant 25 and the launch's invocations per workgroup: the knob's size where the loop
    takes any, 256 for the base variant's 8-bit loop; constant 26 (VK_ADAM_PARAM_OUT) last."""
    from vk_adam._optim.storage import GroupFormat, uint_spec
    from vk_adam._optim.variants import PARAM_OUT_SPEC_ID, update_launch
    from vk_adam._runtime.runtime import WORKGROUP_SIZE_SPEC_ID

    shape = LoopShape(subgroup_size=32, workgroup_size=1024)
    plain, int8 = GroupFormat(), GroupFormat(state=(2, 3))

    def launch(form, subgroups=True, param_out=False):
        return update_launch(shape, "adam", form, 10**6, lambda _: subgroups, param_out=param_out)

    for got, threads in ((launch(plain), 1024), (launch(int8), 1024), (launch(int8, subgroups=False), 256)):
        assert got.threads == threads
        assert got.spec[WORKGROUP_SIZE_SPEC_ID - 16] == uint_spec(threads)[0]
        assert len(got.spec) == PARAM_OUT_SPEC_ID - 16 + 1
    assert launch(plain, param_out=True).spec[-1] == uint_spec(1)[0]
    assert launch(plain).spec[-1] == uint_spec(0)[0]


def test_the_update_pipeline_is_sized_for_the_workgroup_size(monkeypatch):
    from vk_adam._runtime import Runtime

    sized = []
    original = Runtime.pipeline

    def spy(self, buffers, spirv, items, spec, push_floats, **kw):
        sized.append((items, kw.get("threads", 256)))
        return original(self, buffers, spirv, items, spec, push_floats, **kw)

    monkeypatch.setattr(Runtime, "pipeline", spy)
    monkeypatch.setenv(variants.WORKGROUP_SIZE_ENV, "1024")
    with vk_adam.AdamW([np.zeros(4 * 5000, np.float32)], lr=1e-3) as opt:
        opt.step([np.ones(4 * 5000, np.float32)])
    # the update alone (no clipping, no non-finite check): a vec4 per invocation (the flat
    # buffer is padded), in workgroups of 1,024; where the driver can bind the array's own
    # memory (host import), a second update pipeline over it, sized the same way
    assert 1 <= len(sized) <= 2
    assert all(items >= 5000 and threads == 1024 for items, threads in sized), sized


def test_variant_names():
    assert subgroup_spirv("adam") == "adam.subgroups"
    assert subgroup_spirv("/x/y/lion.spv") == "/x/y/lion.subgroups.spv"


# -- the real device -----------------------------------------------------------------------------------


def test_the_device_reports_its_subgroup_properties():
    """The patched kp (patch 0015) reports them; lavapipe supports arithmetic in compute."""
    from vk_adam._runtime._kp import kp_features

    if "subgroup properties" not in kp_features().patches:
        pytest.skip("this kp build predates patch 0015 (stock kp): no subgroup properties")
    if os.environ.get("VK_KHRONOS_PROFILES_PROFILE_NAME"):
        pytest.skip("a simulated device profile reports its own subgroup properties, not lavapipe's")
    device = select_device()
    assert device.subgroup_size in (4, 8, 16, 32, 64, 128)
    assert device.subgroup_stages & COMPUTE and device.subgroup_operations & BASIC
    if device.is_software:  # lavapipe (Mesa 22.3): subgroups of 8 lanes (256-bit vectors)
        assert subgroup_unsupported(device) is None


FORMATS = [("float32", False), ("bfloat16", True), ("float16", True), ("bfloat16", False), ("float16", False)]


def run_steps(p: np.ndarray, grads, rule: str, lr: float, stochastic: bool, seed: int):
    """A copy of p after one step per gradient of `grads` with 8-bit state, that state (codes and
    absmax), and the shader each set ran."""
    p = p.copy()
    opt = vk_adam.Optimizer(
        [p],
        default_registry().get(rule),
        lr=lr,
        state_dtype="int8-blockwise",
        stochastic_rounding=stochastic,
        seed=seed,
    )
    with opt:
        for g in grads:
            opt.step([g])
        state = opt.state_dict()["state"][0]
        shaders = [b.spirv for gr in opt._dev.groups for b in gr.sets]
    return p, state, shaders


def run_int8(param_dtype: str, stochastic: bool, n: int, seed: int, steps: int = 3, rule: str = "adamw"):
    """Params, 8-bit state (codes and absmax) after a few steps, and the shader each set ran."""
    rng = np.random.default_rng(seed)
    dtype = {"float32": np.float32, "float16": np.float16, "bfloat16": vk_adam._formats.BFLOAT16}[param_dtype]
    p = rng.standard_normal(n).astype(np.float32).astype(dtype)
    grads = (
        (rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 1)).astype(np.float32).astype(dtype)
        for _ in range(steps)
    )
    return run_steps(p, grads, rule, lr=1e-2, stochastic=stochastic, seed=3)


def assert_same_bits(a, b):
    (pa, sa, _), (pb, sb, _) = a, b
    np.testing.assert_array_equal(pa.view(np.uint8), pb.view(np.uint8))
    assert sa.keys() == sb.keys()
    for key in sa:
        a, b = np.atleast_1d(np.asarray(sa[key])), np.atleast_1d(np.asarray(sb[key]))
        assert a.dtype == b.dtype, key
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8), key)


@pytest.mark.parametrize("param_dtype, stochastic", FORMATS)
def test_both_variants_give_the_same_bits(param_dtype, stochastic, monkeypatch):
    """Partial last vec4 and block, many blocks per subgroup (one workgroup: the grid-stride
    loop), one and two blocks per iteration: every shape equals the base variant's default."""
    n = 256 * 37 + 4 * 5 + 3
    monkeypatch.setenv(variants.SUBGROUPS_ENV, "0")
    base = run_int8(param_dtype, stochastic, n, seed=11)
    assert all(s == "adam" for s in base[2])
    for knobs in (
        {"VK_ADAM_INT8_VEC4S": "1"},
        {"VK_ADAM_INT8_VEC4S": "2"},
        {"VK_ADAM_INT8_WORKGROUPS": "1"},
        {"VK_ADAM_WORKGROUP_SIZE": "64", "VK_ADAM_INT8_WORKGROUPS": "3"},  # base variant: still 256
        {"VK_ADAM_WORKGROUP_SIZE": "1024", "VK_ADAM_INT8_VEC4S": "2"},
    ):
        for forced in ("0", "1"):
            monkeypatch.setenv(variants.SUBGROUPS_ENV, forced)
            for name, value in knobs.items():
                monkeypatch.setenv(name, value)
            got = run_int8(param_dtype, stochastic, n, seed=11)
            assert all(s == ("adam.subgroups" if forced == "1" else "adam") for s in got[2])
            assert_same_bits(got, base)
            for name in knobs:
                monkeypatch.delenv(name)


def fp16_off_the_fast_paths() -> tuple[np.ndarray, np.ndarray]:
    """fp16 params and gradients with values off the fast conversions in a few iterations of the
    subgroup loop only: subnormal params and gradients, params that a zero gradient leaves
    subnormal or zero (the rounding's slow path), infinite gradients; the rest normal."""
    rng = np.random.default_rng(29)
    n = 256 * 64 + 4 * 3 + 1  # many iterations at any subgroup size; a partial last vec4
    p = rng.standard_normal(n).astype(np.float16)
    g = rng.standard_normal(n).astype(np.float16)
    p[[700, 3001]] = [2.0**-20, -(2.0**-24)]  # subnormal params
    g[[5200, 9001]] = [-(2.0**-17), 2.0**-24]  # subnormal gradients
    g[[9500, 12000]] = [np.inf, -np.inf]
    p[[13000, 13001, 15002]] = [2.0**-18, 0.0, -(2.0**-15)]  # kept by a zero gradient
    g[[13000, 13001, 15002]] = 0.0
    return p, g


def run_fp16(p: np.ndarray, g: np.ndarray, stochastic: bool, lr: float, steps: int):
    """Params, state and shaders after `steps` Adam steps with 8-bit state, gradient g each."""
    return run_steps(p, [g] * steps, "adam", lr=lr, stochastic=stochastic, seed=5)


@pytest.mark.parametrize("stochastic", [True, False], ids=["sr", "master"])
def test_fp16_values_off_the_fast_paths_give_the_base_variant_s_bits(stochastic, monkeypatch):
    """fp16 values off the fast roundings (those of normal halves) and subnormal gradients in
    some iterations of the subgroup loop, and not in others: the bits equal the base
    variant's, at one and two blocks per iteration."""
    p, g = fp16_off_the_fast_paths()
    monkeypatch.setenv(variants.SUBGROUPS_ENV, "0")
    base = run_fp16(p, g, stochastic, lr=1e-2, steps=2)
    assert base[2] == ["adam"]
    for vec4s in ("1", "2"):
        monkeypatch.setenv(variants.SUBGROUPS_ENV, "1")
        monkeypatch.setenv(variants.INT8_VEC4S_ENV, vec4s)
        got = run_fp16(p, g, stochastic, lr=1e-2, steps=2)
        assert got[2] == ["adam.subgroups"]
        assert_same_bits(got, base)
    after = base[0].astype(np.float32)  # the odd values were met: a NaN, params kept subnormal
    assert np.isnan(after).any() and np.count_nonzero(np.abs(after[np.isfinite(after)]) < 2.0**-14) >= 3


def test_fp16_stochastic_rounding_to_subnormals_beside_normal_vec4s_gives_the_base_variant_s_bits(
    monkeypatch,
):
    """Every other vec4 of params sits just below 2**-14 (fp16 subnormals) and a step of lr =
    1e-6 leaves it there, off the grid: the random bits pick its neighbour. The normal vec4s
    beside it, in the same subgroup, take the fast rounding; the subnormal ones must not (a
    test of the vec4s that lets one lane decide for another gives other bits)."""
    rng = np.random.default_rng(41)
    n = 256 * 64
    p = rng.standard_normal(n).astype(np.float16)
    sub = (np.arange(n) // 4) % 2 == 1
    m = rng.integers(256, 1000, n)
    p[sub] = (np.where(rng.random(n) < 0.5, -m, m) * 2.0**-24)[sub].astype(np.float16)
    g = rng.standard_normal(n).astype(np.float16)
    monkeypatch.setenv(variants.SUBGROUPS_ENV, "0")
    base = run_steps(p, [g], "adam", lr=1e-6, stochastic=True, seed=8)
    assert base[2] == ["adam"]
    moved = base[0][sub].astype(np.float32)
    assert (np.abs(moved) < 2.0**-14).all() and np.count_nonzero(moved != p[sub]) > sub.sum() // 2
    for vec4s in ("1", "2"):
        monkeypatch.setenv(variants.SUBGROUPS_ENV, "1")
        monkeypatch.setenv(variants.INT8_VEC4S_ENV, vec4s)
        got = run_steps(p, [g], "adam", lr=1e-6, stochastic=True, seed=8)
        assert got[2] == ["adam.subgroups"]
        assert_same_bits(got, base)


@pytest.mark.parametrize("stochastic", [True, False], ids=["sr", "master"])
def test_fp16_params_off_the_fast_paths_come_back_exactly_from_the_subgroup_loop(stochastic, monkeypatch):
    """lr = 0 leaves every param as it was, subnormals and zeros too, in the subgroup loop's
    iterations with values off the fast paths as in the others; an infinite gradient makes its
    own param NaN whatever the lr (0 * inf)."""
    p, g = fp16_off_the_fast_paths()
    monkeypatch.setenv(variants.SUBGROUPS_ENV, "1")
    got, _, shaders = run_fp16(p, g, stochastic, lr=0.0, steps=1)
    assert shaders == ["adam.subgroups"]
    finite = np.isfinite(g)
    np.testing.assert_array_equal(got.view(np.uint16)[finite], p.view(np.uint16)[finite])
    assert np.isnan(got[~finite]).all() and np.count_nonzero(~finite) == 2


def test_detection_picks_the_subgroup_variant_here_when_the_device_has_it():
    device = select_device()
    _, _, shaders = run_int8("float32", False, 4096 + 256, seed=5, steps=1)
    want = "adam.subgroups" if subgroup_unsupported(device) is None else "adam"
    assert shaders == [want]
    # without 8-bit state the base variant runs whatever the device
    with vk_adam.AdamW([np.zeros(5000, np.float32)], state_dtype="bfloat16") as opt:
        opt.step([np.ones(5000, np.float32)])
        assert [b.spirv for g in opt._dev.groups for b in g.sets] == ["adam"]


def test_a_rule_without_the_subgroup_spirv_falls_back_to_the_base_variant(tmp_path, monkeypatch):
    """A plugin whose package ships only <name>.spv (compiled without vk_adam.shaderc) runs that,
    with the same results, even where the variant is forced."""
    adamw = default_registry().get("adamw")
    shutil.copy(SPIRV_DIR / "adam.spv", tmp_path / "old_adam.spv")
    variants_ = {
        key: ShaderVariant(tmp_path / "old_adam.spv", v.state, v.hyper_count) if str(v.spirv) == "adam" else v
        for key, v in adamw.variants.items()
    }
    old = dataclasses.replace(adamw, name="old_plugin_adamw", variants=variants_)
    rng = np.random.default_rng(2)
    n = 256 * 20 + 7
    p0, grads = rng.standard_normal(n).astype(np.float32), rng.standard_normal((3, n)).astype(np.float32)
    results = []
    for rule, forced in ((adamw, "0"), (old, "1")):
        monkeypatch.setenv(variants.SUBGROUPS_ENV, forced)
        p = p0.copy()
        with vk_adam.Optimizer([p], rule, lr=1e-2, state_dtype="int8-blockwise") as opt:
            for g in grads:
                opt.step([g])
            results.append(
                (p, opt.state_dict()["state"][0], [b.spirv for gr in opt._dev.groups for b in gr.sets])
            )
    assert results[1][2] == [str(tmp_path / "old_adam.spv")]
    assert_same_bits(results[0], results[1])
    # with its subgroup SPIR-V next to it, the same rule runs the variant
    shutil.copy(SPIRV_DIR / "adam.subgroups.spv", tmp_path / "old_adam.subgroups.spv")
    with vk_adam.Optimizer([p0.copy()], old, lr=1e-2, state_dtype="int8-blockwise") as opt:
        opt.step([grads[0]])
        assert [b.spirv for g in opt._dev.groups for b in g.sets] == [
            str(tmp_path / "old_adam.subgroups.spv")
        ]


@pytest.mark.parametrize("state_dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize(
    "param_dtype, stochastic", [("float32", False), ("bfloat16", True), ("float16", False)]
)
def test_vec4s_and_workgroup_sizes_without_8_bit_state_give_the_same_bits(
    param_dtype, stochastic, state_dtype, monkeypatch
):
    rng = np.random.default_rng(4)
    dtype = {"float32": np.float32, "float16": np.float16, "bfloat16": vk_adam._formats.BFLOAT16}[param_dtype]
    n = 256 * 4 * 9 + 4 * 3 + 1  # a partial vec4, a partial tile at every vec4s value
    p0 = rng.standard_normal(n).astype(np.float32).astype(dtype)
    grads = (rng.standard_normal((3, n)) * 0.1).astype(np.float32).astype(dtype)
    results = []
    for vec4s, threads in (
        ("1", "256"),
        ("2", "256"),
        ("4", "256"),
        ("1", "64"),
        ("4", "1024"),
        ("2", "128"),
    ):
        monkeypatch.setenv(variants.VEC4S_ENV, vec4s)
        monkeypatch.setenv(variants.WORKGROUP_SIZE_ENV, threads)
        monkeypatch.setenv("VK_ADAM_MAX_WORKGROUPS", "2")  # the grid-stride loop goes round
        p = p0.copy()
        with vk_adam.AdamW(
            [p], lr=1e-2, state_dtype=state_dtype, stochastic_rounding=stochastic, seed=9
        ) as opt:
            for g in grads:
                opt.step([g])
            results.append((p, opt.state_dict()["state"][0], None))
    assert not np.array_equal(results[0][0].view(np.uint8), p0.view(np.uint8))  # it did step
    for other in results[1:]:
        assert_same_bits(results[0], other)


def test_a_subgroup_variant_with_another_interface_is_refused(tmp_path):
    """Registration checks the variant beside a rule's SPIR-V too: here SGD's subgroup variant
    (one state buffer fewer, other push constants) beside Adam's base SPIR-V."""
    from vk_adam._rules.checks import InvalidRuleError, check_rule

    adamw = default_registry().get("adamw")
    shutil.copy(SPIRV_DIR / "adam.spv", tmp_path / "mixed.spv")
    variants_ = {
        key: ShaderVariant(tmp_path / "mixed.spv", v.state, v.hyper_count) if str(v.spirv) == "adam" else v
        for key, v in adamw.variants.items()
    }
    rule = dataclasses.replace(adamw, name="mixed", variants=variants_)
    check_rule(rule)  # no subgroup variant beside it: fine
    shutil.copy(SPIRV_DIR / "adam.subgroups.spv", tmp_path / "mixed.subgroups.spv")
    check_rule(rule)  # the matching one: fine
    shutil.copy(SPIRV_DIR / "sgd_momentum.subgroups.spv", tmp_path / "mixed.subgroups.spv")
    with pytest.raises(
        InvalidRuleError, match=r"subgroup variant .*mixed\.subgroups\.spv has another interface"
    ):
        check_rule(rule)
