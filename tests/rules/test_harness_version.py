"""A rule shader built against an older ``vk_adam_rule.glsl`` is refused whole, with one message
naming the fix, wherever a rule enters: registration, ``check_rule_object``, ``Optimizer``.

The older shaders here are today's with the specialization constants a harness of that version
did not have yet taken out of the SPIR-V (their ``SpecId`` decorations removed): what the
registry reads of a shader is its interface, and every older harness lacks some of them (version
8 added the version mark 31 with the quantization table of one word per bucket, 7 the step
clock's 27..30, 6 ``VK_ADAM_PARAM_OUT``, 5 the workgroup size, 4 the vec4s per invocation, 3 the
storage formats). Version-8 and version-9 shaders have them all; their version mark's default
value says their version (the table's entries changed in 9 and in 10), so their copies here are
today's with that value set.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

import vk_adam
from vk_adam._rules import checks, default_registry, load_registry
from vk_adam._rules.spirv import (
    HARNESS_MARK_SPEC_ID,
    HARNESS_SPEC_IDS,
    HARNESS_VERSION,
    SPIRV_DIR,
    SUBGROUP_SIZE_SPEC_ID,
    ShaderInterface,
    is_current_harness,
    load_spirv,
    reflect,
    subgroup_spirv,
)
from vk_adam.shaderc import INCLUDE_DIR

from .test_registry import plugin

MESSAGE = r"built against an older vk_adam_rule\.glsl; rebuild the plugin against this vk-adam"
_OP_SPEC_CONSTANT, _OP_DECORATE, _SPEC_ID = 50, 71, 1
#: The constants each older harness lacks, by its version (what a build against it reflects).
LACKS = {
    9: (),
    8: (),
    7: (31,),
    6: range(27, 32),
    5: range(26, 32),
    4: range(25, 32),
    3: (23, *range(25, 32)),
    2: range(16, 32),
}


def without_spec_ids(spirv: bytes, ids: set[int]) -> bytes:
    """``spirv`` with the ``OpDecorate ... SpecId`` of each constant in ``ids`` removed."""
    words = list(struct.unpack(f"<{len(spirv) // 4}I", spirv))
    out, i = words[:5], 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        instruction = words[i : i + count]
        if not (
            opcode == _OP_DECORATE and count == 4 and instruction[2] == _SPEC_ID and instruction[3] in ids
        ):
            out += instruction
        i += count
    return struct.pack(f"<{len(out)}I", *out)


def with_mark(spirv: bytes, version: int) -> bytes:
    """``spirv`` with the default value of its version mark (SpecId 31) set to ``version``."""
    words = list(struct.unpack(f"<{len(spirv) // 4}I", spirv))
    i, mark, defaults = 5, None, {}
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if opcode == _OP_DECORATE and count == 4 and words[i + 2] == _SPEC_ID and words[i + 3] == 31:
            mark = words[i + 1]
        if opcode == _OP_SPEC_CONSTANT and count == 4:
            defaults[words[i + 2]] = i + 3
        i += count
    assert mark is not None and mark in defaults, "the shader declares no version mark"
    words[defaults[mark]] = version
    return struct.pack(f"<{len(words)}I", *words)


def older_adamw(tmp_path: Path, version: int) -> vk_adam.UpdateRule:
    """The built-in AdamW over shaders that reflect as built against harness ``version`` (base
    variant only: its package ships no subgroup variant)."""
    adamw = default_registry().get("adamw")
    variants = {}
    for key, variant in adamw.variants.items():
        spv = tmp_path / f"v{version}_{variant.spirv}.spv"
        if not spv.exists():
            data = without_spec_ids((SPIRV_DIR / f"{variant.spirv}.spv").read_bytes(), set(LACKS[version]))
            spv.write_bytes(with_mark(data, version) if HARNESS_MARK_SPEC_ID not in LACKS[version] else data)
        variants[key] = dataclasses.replace(variant, spirv=spv)
    return dataclasses.replace(adamw, name=f"adamw_harness{version}", variants=variants)


def test_the_version_is_the_one_the_harness_defines():
    text = (INCLUDE_DIR / "vk_adam_rule.glsl").read_text()
    (defined,) = re.findall(r"#define VK_ADAM_HARNESS_VERSION (\d+)", text)
    assert int(defined) == HARNESS_VERSION


def test_every_registered_rule_shader_is_current():
    """The built-in rules' shaders, and those of the plugins installed here."""
    for rule in default_registry().rules.values():
        for variant in rule.variants.values():
            for name in (str(variant.spirv), subgroup_spirv(variant.spirv)):
                assert is_current_harness(reflect(load_spirv(name))), name


def test_what_makes_a_shader_current():
    current = frozenset({0, *HARNESS_SPEC_IDS} - {SUBGROUP_SIZE_SPEC_ID})
    bindings, version = frozenset(range(5)), HARNESS_VERSION
    assert is_current_harness(ShaderInterface(bindings, 12, current, 8, version))
    assert is_current_harness(ShaderInterface(bindings, 12, current | {SUBGROUP_SIZE_SPEC_ID}, 8, version))
    # a status block of 4 bytes: the skip flag only, no gradient scale (before clipping)
    assert not is_current_harness(ShaderInterface(bindings, 12, current, 4, version))
    for missing in sorted(current - {0}):
        assert not is_current_harness(ShaderInterface(bindings, 12, current - {missing}, 8, version))
    # every constant, but the version mark of another harness (8: the older quantization table)
    for other in (0, 8, version + 1):
        assert not is_current_harness(ShaderInterface(bindings, 12, current, 8, other))


def test_the_reflected_version_is_the_mark_s_default_value(tmp_path):
    spirv = (SPIRV_DIR / "adam.spv").read_bytes()
    assert reflect(spirv).harness_version == HARNESS_VERSION
    assert reflect(with_mark(spirv, 8)).harness_version == 8
    assert reflect(without_spec_ids(spirv, {HARNESS_MARK_SPEC_ID})).harness_version == 0


@pytest.mark.parametrize("version", sorted(LACKS))
def test_an_older_harness_is_refused_by_the_rule_checks(tmp_path, version):
    rule = older_adamw(tmp_path, version)
    with pytest.raises(checks.InvalidRuleError, match=MESSAGE) as caught:
        checks.check_rule_object(rule)
    assert f"harness version {HARNESS_VERSION}" in str(caught.value)
    assert str(rule.variants["adam"].spirv) in str(caught.value)  # names the shader


def test_an_older_harness_is_refused_at_registration_and_the_others_stay(tmp_path):
    old = older_adamw(tmp_path, 6)
    with pytest.warns(vk_adam.PluginLoadWarning, match=MESSAGE):
        registry = load_registry(entry_points=False, extra_plugins=[plugin(old)])
    assert old.name not in registry.rules and "adamw" in registry.rules
    (failure,) = [f for f in registry.failures if old.name in f.error]
    assert re.search(MESSAGE, failure.error)


@pytest.mark.parametrize("clip_grad_norm", [None, 1.0])
@pytest.mark.parametrize("state_dtype", ["float32", "bfloat16"])
def test_an_optimizer_refuses_an_older_harness_before_touching_the_params(
    tmp_path, clip_grad_norm, state_dtype
):
    p = np.ones(64, np.float32)
    with pytest.raises(ValueError, match=MESSAGE):
        vk_adam.Optimizer(
            [p], older_adamw(tmp_path, 5), state_dtype=state_dtype, clip_grad_norm=clip_grad_norm
        )
    assert np.all(p == 1.0)


def test_the_same_shader_unchanged_is_accepted(tmp_path):
    """The test's copy itself is not what is refused: with nothing taken out it registers and steps."""
    adamw = default_registry().get("adamw")
    shutil.copy(SPIRV_DIR / "adam.spv", tmp_path / "copy.spv")
    variants = {
        **adamw.variants,
        "adam": dataclasses.replace(adamw.variants["adam"], spirv=tmp_path / "copy.spv"),
    }
    rule = dataclasses.replace(adamw, name="adamw_copy", variants=variants)
    assert (
        without_spec_ids((tmp_path / "copy.spv").read_bytes(), set()) == (tmp_path / "copy.spv").read_bytes()
    )
    checks.check_rule_object(rule)
    p = np.ones(64, np.float32)
    with vk_adam.Optimizer([p], rule, lr=0.1) as opt:
        opt.step([np.ones(64, np.float32)])
    assert np.all(p < 1.0)


@pytest.mark.skipif(shutil.which("spirv-opt") is None, reason="needs spirv-opt (Debian: spirv-tools)")
def test_an_optimized_build_keeps_the_version_mark(tmp_path):
    """A plugin whose SPIR-V went through ``spirv-opt -O`` (dead code removed) keeps the version
    mark: the shader uses it. (Such a build may drop other constants a rule leaves unused, e.g.
    the formats of state buffers 2 and 3 in Adam's subgroup variant; vk_adam.shaderc does not
    optimize.)"""
    import subprocess

    for name in ("adam", "adam.subgroups"):
        optimized = tmp_path / f"{name}.spv"
        subprocess.run(["spirv-opt", "-O", str(SPIRV_DIR / f"{name}.spv"), "-o", str(optimized)], check=True)
        assert HARNESS_MARK_SPEC_ID in reflect(optimized.read_bytes()).spec_ids, name
