"""The rule registry: built-ins through the same hook as plugins; bad plugins break nothing."""

from __future__ import annotations

import importlib.metadata
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import vk_adam
from vk_adam import ShaderVariant, StateBuffer, UpdateRule
from vk_adam._rules.builtin import SGD
from vk_adam._rules.registry import BUILTIN_PLUGIN, load_registry
from vk_adam.testing import RuleConformanceError, check_rule

SPIRV = Path(__file__).resolve().parents[1] / "spirv"


EXP_AVG = (StateBuffer("exp_avg"),)


def lion_like(name: str, spirv: Path | str, state=EXP_AVG, hyper_count=6) -> UpdateRule:
    def reference(param, grad, state, hyper, step):
        m = state["exp_avg"]
        param -= hyper["lr"] * (np.sign(0.9 * m + 0.1 * grad) + 0.0 * param)
        m *= 0.99
        m += 0.01 * grad

    return UpdateRule(
        name=name,
        defaults={"lr": 0.01, "betas": (0.9, 0.99), "weight_decay": 0.0},
        variants={"v": ShaderVariant(spirv, tuple(state), hyper_count)},
        select_variant=lambda h: "v",
        push_constants=lambda h, t: (h["lr"], 0.9, 0.1, 0.99, 0.01, h["weight_decay"]),
        reference=reference,
    )


def plugin(*rules: UpdateRule, name: str = "test_plugin") -> types.ModuleType:
    module = types.ModuleType(name)

    @vk_adam.hookimpl
    def vk_adam_rules():
        return list(rules)

    module.vk_adam_rules = vk_adam_rules  # type: ignore[attr-defined]
    return module


def test_builtin_rules_arrive_through_the_hook():
    registry = load_registry(entry_points=False)
    assert {"adam", "adamw", "sgd"} <= set(registry.rules)
    assert registry.plugin_manager.get_plugin(BUILTIN_PLUGIN) is not None
    assert registry.rules["adam"].distribution.startswith("vk-adam")


def test_registration_rejects_binding_mismatch_and_keeps_others():
    # the Adam shader binds two state buffers; this declaration says one
    bad = lion_like("wrong_bindings", "adam", state=(StateBuffer("exp_avg"),), hyper_count=8)
    with pytest.warns(vk_adam.PluginLoadWarning, match=r"binds \[0, 1, 2, 3, 4, 5, 6, 7, 8\]"):
        registry = load_registry(entry_points=False, extra_plugins=[plugin(bad)])
    assert "wrong_bindings" not in registry.rules and "adam" in registry.rules
    assert any("wrong_bindings" in f.error for f in registry.failures)


def test_registration_rejects_push_constant_size_mismatch():
    bad = lion_like("wrong_push", SPIRV / "lion_wrong_sign.spv", hyper_count=5)
    with pytest.warns(
        vk_adam.PluginLoadWarning,
        match=r"push-constant block is 32 bytes \(uint n \+ 6 floats \+ uint rng_key\)",
    ):
        registry = load_registry(entry_points=False, extra_plugins=[plugin(bad)])
    assert "wrong_push" not in registry.rules


def test_push_constants_over_128_bytes_warn_at_registration_and_a_smaller_device_refuses_them():
    def sgd_reference(param, grad, state, hyper, step):
        param -= hyper["lr"] * grad

    big = UpdateRule(  # plain SGD whose shader takes 40 push-constant floats (it reads the first)
        name="huge_push",
        defaults={"lr": 0.01},
        variants={"v": ShaderVariant(SPIRV / "too_many_push_constants.spv", (), 40)},
        select_variant=lambda h: "v",
        push_constants=lambda h, t: (h["lr"], *[0.0] * 39),
        reference=sgd_reference,
    )
    with pytest.warns(vk_adam.PortabilityWarning, match="168 bytes of push constants exceed the 128"):
        registry = load_registry(entry_points=False, extra_plugins=[plugin(big)])
    assert "huge_push" in registry.rules  # registered: devices with room for it run it
    from vk_adam._runtime import Runtime

    with Runtime() as rt:
        room = rt.facts.max_push_bytes
    if room >= 168:
        pytest.skip(f"this device holds {room} bytes of push constants; the refusal needs fewer than 168")
    match = rf"168 bytes of push constants exceed this device's maxPushConstantsSize \({room} bytes\)"
    with pytest.raises(ValueError, match=match):
        vk_adam.Optimizer([np.zeros(8, np.float32)], registry.get("huge_push"))


def test_two_rules_with_one_name_name_both_distributions():
    registry = load_registry(
        entry_points=False,
        extra_plugins=[
            plugin(lion_like("dup", SPIRV / "lion_wrong_sign.spv"), name="first_dist"),
            plugin(lion_like("dup", SPIRV / "lion_wrong_sign.spv"), name="second_dist"),
        ],
    )
    with pytest.raises(vk_adam.RuleRegistrationError, match="first_dist and second_dist"):
        registry.get("dup")
    assert "adam" in registry.rules  # the rest still works


def test_a_plugin_that_fails_to_import_is_reported_by_name(monkeypatch):
    class BrokenEntryPoint:
        name = "broken_plugin"
        dist = None

        def load(self):
            raise ImportError("No module named 'missing_dependency'")

    real = importlib.metadata.entry_points

    def fake_entry_points(group=None, **kw):
        found = list(real(group=group, **kw))
        return [*found, BrokenEntryPoint()] if group == "vk_adam" else found

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    with pytest.warns(vk_adam.PluginLoadWarning, match="'broken_plugin'.*missing_dependency"):
        registry = load_registry()
    assert [f.plugin for f in registry.failures] == ["broken_plugin"]
    assert {"adam", "adamw", "sgd"} <= set(registry.rules)


def test_plugins_can_be_blocked_by_argument_and_environment(monkeypatch):
    assert "lion" in load_registry().rules  # the plugin package from plugins/ is installed
    assert "lion" not in load_registry(blocked=["lion"]).rules
    monkeypatch.setenv(vk_adam.BLOCK_ENV, "other, lion")
    assert "lion" not in load_registry().rules


def test_conformance_helper_passes_builtin_rules(vk_seed):
    report = check_rule(SGD, hyper=[{"momentum": 0.9, "nesterov": True, "weight_decay": 0.01}], seed=vk_seed)
    assert report.worst_error < 2e-6


def test_conformance_helper_fails_a_deliberately_wrong_shader(vk_seed):
    lion = vk_adam.default_registry().get("lion")
    from dataclasses import replace

    wrong = replace(
        lion,
        name="lion_wrong",
        variants={"lion": ShaderVariant(SPIRV / "lion_wrong_sign.spv", (StateBuffer("exp_avg"),), 6)},
    )
    with pytest.raises(RuleConformanceError, match="param differs from the reference at step 1"):
        check_rule(wrong, seed=vk_seed)


def test_sgd_by_name_and_create():
    p = np.ones(3, np.float32)
    with vk_adam.create("sgd", [p], lr=0.5, momentum=0.9) as opt:
        assert isinstance(opt, vk_adam.Optimizer) and opt.rule.name == "sgd"
        opt.step([np.ones(3, np.float32)])
    np.testing.assert_allclose(p, 0.5)


def test_list_rules_includes_plugins():
    rules = vk_adam.list_rules()
    assert {"adam", "adamw", "sgd", "lion"} <= set(rules)
    assert sys.modules.get("vk_adam_lion") is not None
