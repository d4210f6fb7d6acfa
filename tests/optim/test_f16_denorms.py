"""The fp16 denormals variant (vk_adam/_optim/variants.py): the subgroup variant built under the
DenormPreserve execution mode for 16-bit floats, run for fp16 params on devices that report
shaderDenormPreserveFloat16.

Selection is tested on fake device properties and on the built shaders; the variant runs only on
a device that allows its execution mode (lavapipe does not; the Intel profile of
scripts/test-profiles.sh simulates one that does, and NVIDIA's driver reports it), where its
bits must equal the exact path's, subnormals, zeros, inf and NaN included."""

from __future__ import annotations

import dataclasses
import struct

import numpy as np
import pytest

import vk_adam
from vk_adam._errors import DeviceCapabilityError
from vk_adam._optim import variants
from vk_adam._optim.storage import group_format
from vk_adam._optim.variants import F16_DENORMS_ENV, LoopShape, f16_denorms, f16_denorms_spirv, update_launch
from vk_adam._rules.registry import default_registry
from vk_adam._rules.spirv import SPIRV_DIR
from vk_adam._runtime.devices import DeviceInfo, select_device
from vk_adam._runtime.limits import DeviceLimits

RULE_SHADERS = ("adam", "adam_amsgrad", "sgd", "sgd_momentum")
FLOAT_CONTROLS = "VK_KHR_shader_float_controls"


@pytest.fixture(autouse=True)
def _no_knobs(monkeypatch):
    for name in (F16_DENORMS_ENV, variants.SUBGROUPS_ENV, variants.INT8_VEC4S_ENV):
        monkeypatch.delenv(name, raising=False)


def fake_device(f16: bool = True, subgroups: int = 32) -> DeviceInfo:
    return DeviceInfo(
        0, "fake GPU", "discrete", "fake", "1.3", 65535, True, subgroups, 0x20, 0x7F, 1024, f16_denorms=f16
    )


# -- what the device reports ------------------------------------------------------------------------


def test_the_limits_read_the_float_controls_property_and_need_the_extension():
    props = {"shader_denorm_preserve_float16": True, "extensions": [FLOAT_CONTROLS]}
    assert DeviceLimits.from_properties(props).f16_denorms
    # the property without the extension (which vk-adam's kp enables where listed) is not enough
    assert not DeviceLimits.from_properties({**props, "extensions": []}).f16_denorms
    assert not DeviceLimits.from_properties({**props, "shader_denorm_preserve_float16": False}).f16_denorms
    older = DeviceLimits.from_properties({"extensions": [FLOAT_CONTROLS]})  # a kp before patch 0023
    assert not older.f16_denorms and "shader_denorm_preserve_float16" in older.assumed


def test_the_device_reports_the_property_through_the_patched_kp():
    """kp patch 0023 reports it (lavapipe: false) and enables VK_KHR_shader_float_controls where
    the device lists it, so the variant's SPIR-V is valid there."""
    from vk_adam._runtime._kp import kp_features, kp_module

    if "float controls" not in kp_features().patches:
        pytest.skip("this kp build predates patch 0023: no float-controls properties")
    manager = kp_module().Manager()
    try:
        props = manager.get_device_properties()
        assert isinstance(props["shader_denorm_preserve_float16"], bool)
        if FLOAT_CONTROLS in props["extensions"]:
            assert FLOAT_CONTROLS in manager.enabled_extensions()
        assert DeviceLimits.from_properties(props).f16_denorms == select_device().f16_denorms
    finally:
        manager.destroy()


# -- selection on fake properties -------------------------------------------------------------------


def test_a_device_with_the_property_and_subgroups_gets_the_variant(monkeypatch):
    assert f16_denorms(fake_device(), 32)
    assert variants.loop_shape(fake_device()).f16_denorms
    monkeypatch.setenv(F16_DENORMS_ENV, "0")
    assert not f16_denorms(fake_device(), 32)
    assert not variants.loop_shape(fake_device()).f16_denorms
    monkeypatch.setenv(F16_DENORMS_ENV, "auto")
    assert f16_denorms(fake_device(), 32)


@pytest.mark.parametrize(
    "device, subgroups, reason",
    [
        (fake_device(f16=False), 32, "does not report shaderDenormPreserveFloat16"),
        (fake_device(), 0, "the subgroup variant, which does not run here"),
    ],
)
def test_a_device_without_what_the_variant_needs_runs_the_exact_test(device, subgroups, reason, monkeypatch):
    assert not f16_denorms(device, subgroups)
    monkeypatch.setenv(F16_DENORMS_ENV, "1")  # forcing it there is an error that says why
    with pytest.raises(DeviceCapabilityError, match=reason):
        f16_denorms(device, subgroups)


def test_the_knob_takes_0_1_or_auto(monkeypatch):
    monkeypatch.setenv(F16_DENORMS_ENV, "yes")
    with pytest.raises(ValueError, match="VK_ADAM_F16_DENORMS must be 0, 1 or auto"):
        f16_denorms(fake_device(), 32)


def test_subgroups_forced_off_leave_the_variant_out_too(monkeypatch):
    monkeypatch.setenv(variants.SUBGROUPS_ENV, "0")
    assert not variants.loop_shape(fake_device()).f16_denorms


@pytest.mark.parametrize("state_dtype", ["int8-blockwise", "bfloat16", "float32"])
@pytest.mark.parametrize("param_dtype", ["float16", "bfloat16", "float32"])
def test_only_fp16_params_launch_the_variant(param_dtype, state_dtype):
    state = default_registry().get("adam").variants["adam"].state
    n = 2**20
    form = group_format(state, param_dtype, state_dtype, param_dtype != "float32", n)
    on, off = LoopShape(subgroup_size=32, f16_denorms=True), LoopShape(subgroup_size=32)
    launch = update_launch(on, "adam", form, n, lambda spirv: True)
    plain = update_launch(off, "adam", form, n, lambda spirv: True)
    if param_dtype == "float16":
        assert launch.spirv == "adam.subgroups.f16denorms"
    else:
        assert launch == plain
    # the same loop either way: the same constants, invocations and workgroups
    assert (launch.spec, launch.items, launch.max_groups, launch.threads) == (
        plain.spec,
        plain.items,
        plain.max_groups,
        plain.threads,
    )
    # a package that ships no such variant runs what it has
    without = update_launch(on, "adam", form, n, lambda spirv: not spirv.endswith("f16denorms"))
    assert without == plain


def test_variant_names():
    assert f16_denorms_spirv("adam") == "adam.subgroups.f16denorms"
    assert f16_denorms_spirv("/x/y/lion.spv") == "/x/y/lion.subgroups.f16denorms.spv"


# -- the built shaders ------------------------------------------------------------------------------

_OP_EXECUTION_MODE, _MODE_DENORM_PRESERVE = 16, 4459


def denorm_preserve_widths(spirv: bytes) -> set[int]:
    """The float widths a SPIR-V module declares DenormPreserve for (OpExecutionMode)."""
    words = struct.unpack(f"<{len(spirv) // 4}I", spirv)
    widths, i = set(), 5
    while i < len(words):
        count, op = words[i] >> 16, words[i] & 0xFFFF
        if op == _OP_EXECUTION_MODE and words[i + 2] == _MODE_DENORM_PRESERVE:
            widths.add(words[i + 3])
        i += max(count, 1)
    return widths


@pytest.mark.parametrize("name", RULE_SHADERS)
def test_only_the_variant_declares_denorm_preserve_for_16_bit_floats(name):
    assert denorm_preserve_widths((SPIRV_DIR / f"{name}.subgroups.f16denorms.spv").read_bytes()) == {16}
    for other in (f"{name}.spv", f"{name}.subgroups.spv"):
        assert denorm_preserve_widths((SPIRV_DIR / other).read_bytes()) == set()


# -- the real device -----------------------------------------------------------------------------------


def run_fp16(p, grads, rule: str, stochastic: bool, state_dtype: str, lr: float = 1e-2):
    """Params, state and the shader each set ran, after one step per gradient."""
    p = p.copy()
    options = {"state_dtype": state_dtype} if rule == "adam" else {"momentum": 0.9}
    opt = vk_adam.Optimizer(
        [p], default_registry().get(rule), lr=lr, stochastic_rounding=stochastic, seed=7, **options
    )
    with opt:
        for g in grads:
            opt.step([g])
        state = opt.state_dict()["state"][0]
        shaders = [b.spirv for gr in opt._dev.groups for b in gr.sets]
    return p, state, shaders


def fp16_inputs() -> tuple[np.ndarray, list[np.ndarray]]:
    """Small N(0, 0.01) gradients (0.5% of them fp16 subnormals), some subnormal and zero params,
    an infinite gradient and a NaN one; a partial last vec4 and 8-bit block."""
    rng = np.random.default_rng(41)
    n = 256 * 48 + 4 * 5 + 3
    p = rng.standard_normal(n).astype(np.float16)
    p[[9, 700, 3001, 4000]] = [2.0**-20, -(2.0**-24), 0.0, -0.0]
    grads = [(rng.standard_normal(n) * 1e-2).astype(np.float16) for _ in range(3)]
    grads[0][[5200, 9001, 11000]] = [np.inf, 2.0**-24, np.nan]
    assert np.count_nonzero(np.abs(grads[1]) < 2.0**-14) > n // 400  # fp16 subnormals (and zeros)
    return p, grads


@pytest.mark.parametrize(
    "rule, stochastic, state_dtype",
    [
        ("adam", True, "int8-blockwise"),
        ("adam", False, "int8-blockwise"),
        ("adam", True, "bfloat16"),
        ("sgd", True, "float32"),
    ],
)
def test_the_variant_gives_the_exact_path_s_bits(rule, stochastic, state_dtype, monkeypatch):
    device = select_device()
    if not device.f16_denorms or variants.subgroup_unsupported(device):
        pytest.skip(
            f"{device.name} cannot run the fp16 denormals variant (no shaderDenormPreserveFloat16, "
            "or no subgroup variant): it runs under the Intel profile of scripts/test-profiles.sh "
            "and on NVIDIA GPUs"
        )
    p, grads = fp16_inputs()
    monkeypatch.setenv(F16_DENORMS_ENV, "0")
    exact = run_fp16(p, grads, rule, stochastic, state_dtype)
    assert not any(s.endswith("f16denorms") for s in exact[2])
    monkeypatch.setenv(F16_DENORMS_ENV, "auto")
    got = run_fp16(p, grads, rule, stochastic, state_dtype)
    shader = "adam" if rule == "adam" else "sgd_momentum"
    assert got[2] == [f"{shader}.subgroups.f16denorms"]
    np.testing.assert_array_equal(got[0].view(np.uint16), exact[0].view(np.uint16))
    assert got[1].keys() == exact[1].keys()
    for key in got[1]:
        a, b = np.atleast_1d(np.asarray(got[1][key])), np.atleast_1d(np.asarray(exact[1][key]))
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8), key)
    assert np.isnan(got[0][[5200, 11000]].astype(np.float32)).all()


@pytest.mark.parametrize("f16", ["0", "auto"], ids=["exact-test", "detected"])
def test_fp16_subnormal_gradients_reach_the_update_exactly(f16, monkeypatch):
    """SGD with lr = 1 from a zero fp32 master copy: the master after one step is -g, exactly,
    for every fp16 value: subnormals (the smallest and largest), normals, zeros, infinities. On
    a device that runs the fp16 denormals variant, "detected" runs it; "exact-test" runs the
    per-vec4 test everywhere."""
    monkeypatch.setenv(F16_DENORMS_ENV, f16)
    bits = np.arange(0, 0x7C01, dtype=np.uint16)  # +0 .. +inf, every subnormal and normal
    g = np.concatenate([bits, bits | 0x8000]).view(np.float16)
    p = np.zeros(g.size, np.float16)
    with vk_adam.SGD([p], lr=1.0) as opt:
        opt.step([g])
        master = opt.state_dict()["state"][0]["master_param"]
        shaders = [b.spirv for gr in opt._dev.groups for b in gr.sets]
    runs_variant = (
        f16 == "auto" and select_device().f16_denorms and not variants.subgroup_unsupported(select_device())
    )
    assert shaders == (["sgd.subgroups.f16denorms"] if runs_variant else ["sgd"])
    want = np.float32(0.0) - g.astype(np.float32)  # 0 - (+0) is +0
    wrong = np.flatnonzero(master.view(np.uint32) != want.view(np.uint32))
    assert wrong.size == 0, (
        f"{wrong.size} of {g.size} values differ, e.g. g bits {g.view(np.uint16)[wrong[:4]]}: "
        f"master {master[wrong[:4]]} instead of {want[wrong[:4]]}"
    )


def test_the_intel_profile_runs_the_variant():
    """Where CI simulates Intel's Windows driver (which reports shaderDenormPreserveFloat16), the
    variant is picked, so the bit comparisons above run there rather than skip."""
    import os

    if os.environ.get("VK_KHRONOS_PROFILES_PROFILE_NAME") != "VP_VK_ADAM_intel_windows":
        pytest.skip("runs under the Intel profile of scripts/test-profiles.sh")
    device = select_device()
    assert device.f16_denorms and variants.loop_shape(device).f16_denorms


def test_where_the_device_cannot_run_it_forcing_the_variant_says_why(monkeypatch):
    device = select_device()
    if device.f16_denorms and not variants.subgroup_unsupported(device):
        pytest.skip(f"{device.name} runs the fp16 denormals variant")
    monkeypatch.setenv(F16_DENORMS_ENV, "1")
    with pytest.raises(DeviceCapabilityError, match="cannot run the fp16 denormals variant"):
        vk_adam.AdamW([np.zeros(64, np.float16)], stochastic_rounding=True)


def test_a_plugin_without_the_variant_runs_its_subgroup_variant(tmp_path):
    """A package built by an older vk_adam.shaderc ships no f16denorms SPIR-V: its rule runs."""
    import shutil

    from vk_adam._rules.rule import ShaderVariant

    shutil.copy(SPIRV_DIR / "adam.spv", tmp_path / "old.spv")
    shutil.copy(SPIRV_DIR / "adam.subgroups.spv", tmp_path / "old.subgroups.spv")
    adam = default_registry().get("adam")
    old_variants = {
        key: ShaderVariant(tmp_path / "old.spv", v.state, v.hyper_count) if str(v.spirv) == "adam" else v
        for key, v in adam.variants.items()
    }
    old = dataclasses.replace(adam, name="old_plugin_adam", variants=old_variants)
    p = np.ones(4096, np.float16)
    with vk_adam.Optimizer([p], old, lr=1e-3, stochastic_rounding=True, state_dtype="int8-blockwise") as opt:
        opt.step([np.full(4096, 2.0**-20, np.float16)])
        shaders = [b.spirv for gr in opt._dev.groups for b in gr.sets]
    assert shaders[0] in (str(tmp_path / "old.spv"), str(tmp_path / "old.subgroups.spv"))
    assert np.all(p < 1.0)
