"""A plugin rule that declares captured steps (``capturable_constants``): ``check_rule`` replays
it (N evaluations of one recording equal N steps, with an lr changed between evaluations) and
catches a shader that takes its lr from push constants; a declaration that disagrees with the
shader is refused at registration. The shaders are compiled here, as a plugin's build does."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vk_adam import ShaderVariant, StateBuffer, UpdateRule
from vk_adam._rules import check_rule_object
from vk_adam.shaderc import compile_shaders
from vk_adam.testing import RuleConformanceError, check_rule

_HEADER = """#version 450
#extension GL_GOOGLE_include_directive : require
#define VK_ADAM_STATE_COUNT 1   // s[0] = the mean square of the gradients
#define VK_ADAM_HYPER_COUNT 4   // lr (0 when captured), alpha, 1 - alpha, eps
#include "vk_adam_rule.glsl"

void vk_adam_update(inout vec4 p, vec4 g, inout vec4 s[VK_ADAM_STATE_SLOTS]) {
    s[0] = HYPER(1) * s[0] + HYPER(2) * g * g;
"""
SHADERS = {
    # RMSprop as a plugin author writes it for captured steps: the lr from the device's clock.
    "rmsprop_clock": _HEADER + "    const float lr = VK_ADAM_CAPTURABLE != 0u ? vk_adam_lr() : HYPER(0);\n"
    "    p -= lr * g / (sqrt(s[0]) + HYPER(3));\n}\n",
    # The trap: the lr stays a push constant, frozen in the recording.
    "rmsprop_push_lr": _HEADER + "    p -= HYPER(0) * g / (sqrt(s[0]) + HYPER(3));\n}\n",
}


@pytest.fixture(scope="module")
def spirv(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if shutil.which("glslangValidator") is None or shutil.which("spirv-val") is None:
        pytest.skip("glslangValidator and spirv-val are needed to compile the test plugin's shaders")
    src = tmp_path_factory.mktemp("glsl")
    for name, text in SHADERS.items():
        (src / f"{name}.comp").write_text(text)
    return {path.stem: path for path in compile_shaders(src, tmp_path_factory.mktemp("spirv"))}


def rmsprop(spv: Path, *, lr_in_constants: bool = False) -> UpdateRule:
    def reference(param: Any, grad: Any, state: dict[str, Any], h: Any, step: int) -> None:
        v = state["square_avg"]
        v[...] = h["alpha"] * v + (1.0 - h["alpha"]) * grad * grad
        param -= h["lr"] * grad / (np.sqrt(v) + h["eps"])

    def push(h: Any, step: int) -> tuple[float, ...]:
        return (h["lr"], h["alpha"], 1.0 - h["alpha"], h["eps"])

    def constants(h: Any) -> tuple[float, ...]:
        return (h["lr"] if lr_in_constants else 0.0, h["alpha"], 1.0 - h["alpha"], h["eps"])

    return UpdateRule(
        name="rmsprop_test",
        defaults={"lr": 1e-2, "alpha": 0.9, "eps": 1e-3},
        variants={
            "rmsprop": ShaderVariant(spv, (StateBuffer("square_avg", nonnegative=True),), hyper_count=4)
        },
        select_variant=lambda h: "rmsprop",
        push_constants=push,
        reference=reference,
        capturable_constants=constants,
    )


def test_check_rule_replays_a_capturable_plugin_rule(spirv):
    rule = rmsprop(spirv["rmsprop_clock"])
    plain = check_rule(dataclasses.replace(rule, capturable_constants=None), sizes=(7, 1029), formats=[])
    report = check_rule(rule, sizes=(7, 1029), formats=[])
    assert (report.replays, plain.replays) == (2, 0)  # one replay per size, for the capturable rule


def test_check_rule_catches_a_captured_step_that_keeps_its_lr_in_push_constants(spirv):
    rule = rmsprop(spirv["rmsprop_push_lr"], lr_in_constants=True)
    with pytest.raises(
        RuleConformanceError, match=r"evaluation \d+ of one recorded captured step.*vk_adam_lr"
    ):
        check_rule(rule, sizes=(1029,), formats=[])


def test_a_capturable_declaration_that_disagrees_with_the_shader_is_refused(spirv):
    rule = dataclasses.replace(rmsprop(spirv["rmsprop_clock"]), capturable_constants=lambda h: (0.0, 1.0))
    with pytest.raises(ValueError, match=r"capturable_constants\(\) returns 2 values .* hyper_count=4"):
        check_rule_object(rule)
