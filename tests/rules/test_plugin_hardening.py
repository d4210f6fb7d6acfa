"""Issue 9, plugin items 10-15: the rough edges an outside plugin author found.

One regression test (or a few) per item; each failed on the code before the fix. Functions that
did not exist then are looked up inside the tests (``_checks.check_rule_object``), so each
test fails on its own rather than the whole module failing to import.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import types
import warnings
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import vk_adam
from vk_adam import ShaderVariant, StateBuffer, UpdateRule
from vk_adam._rules import checks as _checks
from vk_adam._rules import registry as _registry
from vk_adam._rules.builtin import ADAM, SGD, sgd_reference
from vk_adam._rules.spirv import SPIRV_DIR, subgroup_spirv
from vk_adam.cli import main
from vk_adam.testing import RuleConformanceError, check_rule

from .test_registry import plugin

ROOT = Path(__file__).resolve().parents[2]
SPIRV = Path(__file__).resolve().parents[1] / "spirv"
DOCS = ROOT / "docs" / "plugins.md"
# A valid rule shader: one state buffer, six push-constant floats, no specialization constant
# of its own (its math is deliberately wrong Lion; these tests only need its interface).
SIX_FLOATS_ONE_STATE = SPIRV / "lion_wrong_sign.spv"


def simple_rule(
    name: str,
    *,
    spirv: Path | str = SIX_FLOATS_ONE_STATE,
    state: tuple[StateBuffer, ...] = (StateBuffer("exp_avg"),),
    hyper_count: int = 6,
    packs: int = 6,
) -> UpdateRule:
    """A rule over ``spirv`` whose push_constants() returns ``packs`` (at most 6) values."""

    def reference(param, grad, state, hyper, step):  # never run by these tests
        raise AssertionError("not used")

    return UpdateRule(
        name=name,
        defaults={"lr": 0.01, "weight_decay": 0.0},
        variants={"v": ShaderVariant(spirv, state, hyper_count)},
        select_variant=lambda h: "v",
        push_constants=lambda h, t: (h["lr"], 0.9, 0.1, 0.99, 0.01, h["weight_decay"])[:packs],
        reference=reference,
    )


def plugin_module(name: str, *rules: UpdateRule) -> types.ModuleType:
    return plugin(*rules, name=name)


class FakeDistribution:
    def __init__(self, name: str, version: str) -> None:
        self.metadata = {"name": name}
        self.version = version


class FakeEntryPoint:
    """What importlib.metadata gives for ``[project.entry-points.vk_adam] <name> = "<module>"``."""

    group = "vk_adam"

    def __init__(self, name: str, module: types.ModuleType, dist: FakeDistribution) -> None:
        self.name = name
        self.value = module.__name__
        self.dist = dist
        self._module = module

    def load(self) -> types.ModuleType:
        return self._module


@pytest.fixture
def install_plugin(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """``install_plugin(entry_point_name, "dist-name 1.0", *rules)``: an installed plugin, as the
    registry sees one through the ``vk_adam`` entry-point group, for this test only."""
    added: list[FakeEntryPoint] = []
    real = importlib.metadata.entry_points

    def entry_points(group: str | None = None, **kw: Any) -> Any:
        found = real(group=group, **kw) if group is not None else real(**kw)
        return [*found, *added] if group == "vk_adam" else found

    def install(ep_name: str, dist: str, *rules: UpdateRule) -> None:
        dist_name, version = dist.split(" ")
        added.append(
            FakeEntryPoint(ep_name, plugin_module(ep_name, *rules), FakeDistribution(dist_name, version))
        )

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    monkeypatch.delenv(vk_adam.BLOCK_ENV, raising=False)
    monkeypatch.delenv("VK_ADAM_ALLOW_BUILTIN_OVERRIDE", raising=False)
    yield install
    # Tests below may reload the process-wide registry with the fake plugins: drop it, so the
    # next user loads the real one again (lazily, after monkeypatch restored entry_points).
    _registry._default = None


def _subprocess_env(*paths: Path) -> dict[str, str]:
    """The environment for a child Python that imports this checkout's vk_adam (and ``paths``)."""
    existing = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, paths), str(ROOT), existing])}


# ---------------------------------------------------------------------------------------------
# 10. A rule object passed directly goes through the registration checks
# ---------------------------------------------------------------------------------------------


def _sgd_without_state() -> UpdateRule:
    """The issue's reproduction: SGD whose momentum variant declares no state buffer."""
    return dataclasses.replace(
        SGD, variants={k: dataclasses.replace(v, state=()) for k, v in SGD.variants.items()}
    )


def test_10_check_rule_object_refuses_fewer_state_buffers_than_the_shader_binds():
    with pytest.raises(
        ValueError, match=r"rule 'sgd', variant 'sgd_momentum'.*binds \[0, 1, 2, 3, 4, 5, 6\]"
    ) as err:
        _checks.check_rule_object(_sgd_without_state())
    assert isinstance(err.value, vk_adam.RuleRegistrationError)
    assert "0 state buffer(s)" in str(err.value)


def test_10_check_rule_object_refuses_what_is_not_a_rule():
    with pytest.raises(TypeError, match="not dict"):
        _checks.check_rule_object({"name": "sgd"})


def test_10_check_rule_object_is_cached_by_identity(monkeypatch):
    calls = []
    real_reflect = _checks.reflect

    def counting_reflect(spirv: bytes) -> Any:
        calls.append(1)
        return real_reflect(spirv)

    monkeypatch.setattr(_checks, "reflect", counting_reflect)
    rule = dataclasses.replace(SGD, name="sgd_copy")
    _checks.check_rule_object(rule)
    first = len(calls)
    # every variant's SPIR-V was read once, and the subgroup variant beside it (built-in: all)
    subgroup_variants = [SPIRV_DIR / f"{subgroup_spirv(v.spirv)}.spv" for v in rule.variants.values()]
    assert all(path.exists() for path in subgroup_variants)
    assert first == 2 * len(rule.variants)
    for _ in range(100):
        _checks.check_rule_object(rule)
    assert len(calls) == first  # repeated calls: a lookup, no reflection
    # An equal rule that is another object is checked on its own (identity, not equality).
    _checks.check_rule_object(dataclasses.replace(rule))
    assert len(calls) == 2 * first
    # Rules the registry loaded were checked when it loaded them.
    registered = _registry.load_registry(entry_points=False).rules["adam"]
    before = len(calls)
    _checks.check_rule_object(registered)
    assert len(calls) == before
    # A failing rule is not cached as good: it fails every time.
    bad = _sgd_without_state()
    for _ in range(2):
        with pytest.raises(ValueError):
            _checks.check_rule_object(bad)


def test_10_optimizer_runs_check_rule_object_end_to_end():
    """END TO END, needs vk_adam/_optim/optimizer.py to call _checks.check_rule_object(rule) in the
    Optimizer constructor. Runs in a child process: before the fix the step read unbound memory
    on the GPU (a segfault on some drivers), which must fail this test, not kill the test run."""
    script = textwrap.dedent(
        """
        import dataclasses, numpy as np, vk_adam
        sgd = vk_adam.list_rules()["sgd"]
        good = dataclasses.replace(sgd, name="sgd_by_hand")
        p = np.ones(4, np.float32)
        with vk_adam.Optimizer([p], good, lr=0.5, momentum=0.9) as opt:
            opt.step([np.ones(4, np.float32)])
        print("GOOD RULE STEPPED", p.tolist())
        bad = dataclasses.replace(
            sgd, variants={k: dataclasses.replace(v, state=()) for k, v in sgd.variants.items()}
        )
        q = np.ones(4, np.float32)
        try:
            opt = vk_adam.Optimizer([q], bad, momentum=0.9)
        except ValueError as exc:
            print("REFUSED:", exc)
        else:
            opt.step([np.ones(4, np.float32)])
            opt.close()
            print("ACCEPTED", q.tolist())
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=_subprocess_env(), timeout=300
    )
    assert result.returncode == 0, f"child died (rc={result.returncode}): {result.stderr[-2000:]}"
    assert "GOOD RULE STEPPED [0.5, 0.5, 0.5, 0.5]" in result.stdout, result.stdout
    assert "REFUSED:" in result.stdout, f"the bad rule object was not refused: {result.stdout}"
    assert "'sgd'" in result.stdout and "binds [0, 1, 2, 3, 4, 5, 6]" in result.stdout


# ---------------------------------------------------------------------------------------------
# 11. hyper_count mismatches: the message says which side says what
# ---------------------------------------------------------------------------------------------


def test_11_hyper_count_too_low_names_the_shader_count_and_the_declared_count():
    # The shader takes 6 floats and push_constants packs 6; the declaration says 5.
    rule = simple_rule("low_count", hyper_count=5, packs=6)
    with pytest.warns(vk_adam.PluginLoadWarning) as record:
        registry = _registry.load_registry(entry_points=False, extra_plugins=[plugin_module("p", rule)])
    assert "low_count" not in registry.rules
    (message,) = [str(w.message) for w in record if "low_count" in str(w.message)]
    assert "the shader's push-constant block is 32 bytes (uint n + 6 floats + uint rng_key)" in message
    assert "the variant declares hyper_count=5" in message
    with pytest.raises(ValueError, match=r"uint n \+ 6 floats.*declares hyper_count=5"):
        _checks.check_rule_object(rule)


def test_11_push_constants_returning_another_count_is_refused_at_registration():
    # Declaration and shader agree (6); push_constants() packs 5: caught before any step.
    rule = simple_rule("short_pack", hyper_count=6, packs=5)
    with pytest.warns(
        vk_adam.PluginLoadWarning,
        match=r"variant 'v': push_constants\(\) returns 5 values for the defaults, but the variant "
        r"declares hyper_count=6",
    ):
        registry = _registry.load_registry(entry_points=False, extra_plugins=[plugin_module("p", rule)])
    assert "short_pack" not in registry.rules
    with pytest.raises(ValueError, match=r"returns 5 values"):
        _checks.check_rule_object(rule)


# ---------------------------------------------------------------------------------------------
# 12. Conflicts name the entry-point name that blocking needs; unknown blocked names warn
# ---------------------------------------------------------------------------------------------


def test_12_duplicate_name_error_names_the_plugins_to_block(install_plugin):
    install_plugin("dup_first_ep", "dup-first 1.0", simple_rule("dup"))
    install_plugin("dup_second_ep", "dup-second 2.0", simple_rule("dup"))
    registry = _registry.load_registry()
    with pytest.raises(vk_adam.RuleRegistrationError) as err:
        registry.get("dup")
    message = str(err.value)
    assert "dup-first 1.0 and dup-second 2.0" in message
    assert "'dup_first_ep' (from dup-first 1.0)" in message
    assert "'dup_second_ep' (from dup-second 2.0)" in message
    assert "VK_ADAM_BLOCK_PLUGINS=dup_first_ep" in message
    assert registry.conflict_plugins["dup"] == ["dup_first_ep", "dup_second_ep"]
    # Following the advice works.
    unblocked = _registry.load_registry(blocked=["dup_first_ep"]).get("dup")
    assert unblocked.distribution == "dup-second 2.0" and unblocked.plugin == "dup_second_ep"


def test_12_vk_adam_rules_shows_each_plugin_name(install_plugin, capsys):
    # The entry-point name differs from the rule name, as it may in any real plugin.
    install_plugin("solo_plugin_ep", "solo-dist 0.3", simple_rule("solo_rule"))
    install_plugin("dup_first_ep", "dup-first 1.0", simple_rule("dup"))
    install_plugin("dup_second_ep", "dup-second 2.0", simple_rule("dup"))
    assert main(["rules"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^solo_rule\s+from solo-dist 0\.3 \(plugin 'solo_plugin_ep'\)$", out, re.M), out
    assert re.search(r"^adam\s+from vk-adam .*\(built in\)$", out, re.M), out
    (conflict,) = [line for line in out.splitlines() if "CONFLICT" in line]
    assert "dup-first 1.0 (plugin 'dup_first_ep') and dup-second 2.0 (plugin 'dup_second_ep')" in conflict
    assert main(["rules", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {row["rule"]: row for row in data["rules"]}
    assert rows["solo_rule"]["plugin"] == "solo_plugin_ep"
    assert data["conflict_plugins"] == {"dup": ["dup_first_ep", "dup_second_ep"]}


def test_12_a_blocked_name_that_matches_nothing_warns(install_plugin, monkeypatch):
    install_plugin("solo_plugin_ep", "solo-dist 0.3", simple_rule("solo_rule"))
    with pytest.warns(
        vk_adam.PluginLoadWarning, match=r"blocked= argument names 'no_such_plugin'.*blocks nothing"
    ):
        registry = _registry.load_registry(blocked=["no_such_plugin"])
    assert "solo_rule" in registry.rules
    # Blocking by the rule's name (not the plugin's) says which name to use instead.
    with pytest.warns(
        vk_adam.PluginLoadWarning, match=r"'solo_rule' is a rule name; its plugin is 'solo_plugin_ep'"
    ):
        registry = _registry.load_registry(blocked=["solo_rule"])
    assert "solo_rule" in registry.rules
    monkeypatch.setenv(vk_adam.BLOCK_ENV, "typo_plugin")
    with pytest.warns(vk_adam.PluginLoadWarning, match=r"\$VK_ADAM_BLOCK_PLUGINS names 'typo_plugin'"):
        _registry.load_registry()
    # A name that does match blocks quietly.
    monkeypatch.setenv(vk_adam.BLOCK_ENV, "solo_plugin_ep")
    with warnings.catch_warnings():
        warnings.simplefilter("error", vk_adam.PluginLoadWarning)
        assert "solo_rule" not in _registry.load_registry().rules


# ---------------------------------------------------------------------------------------------
# 13. Built-in names stay built in, unless the user opts in
# ---------------------------------------------------------------------------------------------


def test_13_an_outside_plugin_cannot_take_a_builtin_name(install_plugin):
    install_plugin("sneaky_adam", "sneaky-dist 6.6", simple_rule("adam"), simple_rule("sneaky_other"))
    with pytest.warns(
        vk_adam.PluginLoadWarning,
        match=r"'sneaky_adam' \(sneaky-dist 6\.6\) provides a rule named 'adam', which is a built-in",
    ):
        registry = _registry.load_registry()
    adam = registry.get("adam")
    assert adam.distribution.startswith("vk-adam") and adam.plugin == _registry.BUILTIN_PLUGIN
    assert "sneaky_other" in registry.rules  # the plugin's other rules still load
    # The process-wide registry, which vk_adam.Adam uses, keeps the built-in too.
    with pytest.warns(vk_adam.PluginLoadWarning, match="sneaky-dist"):
        vk_adam.reload_registry()
    p = np.ones(3, np.float32)
    with vk_adam.Adam([p], lr=0.1) as opt:
        assert opt.rule.distribution.startswith("vk-adam")
        opt.step([np.ones(3, np.float32)])
    np.testing.assert_allclose(p, 0.9, rtol=1e-6)


def test_13_replacing_a_builtin_is_an_explicit_opt_in(install_plugin, monkeypatch):
    install_plugin("my_adam", "my-adam 1.0", simple_rule("adam"))
    registry = _registry.load_registry(allow_builtin_override=["my_adam"])
    assert registry.get("adam").distribution == "my-adam 1.0"
    assert not registry.conflicts
    monkeypatch.setenv("VK_ADAM_ALLOW_BUILTIN_OVERRIDE", "other_plugin, my_adam")
    with pytest.warns(vk_adam.PluginLoadWarning, match="'other_plugin'.*allows nothing"):
        registry = vk_adam.reload_registry()
    assert vk_adam.default_registry().get("adam").plugin == "my_adam"
    assert registry.get("adamw").distribution.startswith("vk-adam")  # only the name it took


# ---------------------------------------------------------------------------------------------
# 14. check_rule(rule) covers every variant by default
# ---------------------------------------------------------------------------------------------


def test_14_check_rule_defaults_catch_a_bug_in_a_non_default_variant(vk_seed):
    def wrong_with_momentum(param, grad, state, hyper, step):
        # Right without momentum (the default variant), wrong with it.
        flipped = {**hyper, "nesterov": not hyper["nesterov"]} if hyper["momentum"] else hyper
        sgd_reference(param, grad, state, flipped, step)

    rule = dataclasses.replace(SGD, name="sgd_momentum_bug", reference=wrong_with_momentum)
    check_rule(rule, hyper=[{}], seed=vk_seed)  # the default variant alone is right
    with pytest.raises(RuleConformanceError, match=r"hyper=\{'momentum': 0\.5"):
        check_rule(rule, seed=vk_seed)


def test_14_check_rule_defaults_run_every_variant_and_spec_constant(vk_seed):
    report = check_rule(SGD, sizes=(7,), steps=2, seed=vk_seed)
    assert set(report.variants) == {"sgd", "sgd_momentum"}
    assert {"momentum": 0.5, "nesterov": True} in report.hyper
    assert {"maximize": True} in report.hyper
    report = check_rule(ADAM, sizes=(7,), steps=2, seed=vk_seed)
    assert set(report.variants) == {"adam", "adam_amsgrad"}
    assert {"decoupled_weight_decay": True} in report.hyper


def test_14_a_variant_check_rule_cannot_reach_asks_for_explicit_hyper(vk_seed):
    rule = dataclasses.replace(
        SGD,
        name="sgd_by_mode",
        defaults={**SGD.defaults, "mode": "plain"},
        select_variant=lambda h: "sgd_momentum" if h["mode"] == "heavy" else "sgd",
    )
    with pytest.raises(RuleConformanceError, match=r"select variant\(s\) \['sgd_momentum'\].*hyper="):
        check_rule(rule, seed=vk_seed)
    report = check_rule(
        rule, hyper=[{}, {"mode": "heavy", "momentum": 0.9}], sizes=(7,), steps=2, seed=vk_seed
    )
    assert report.variants == ("sgd", "sgd_momentum")


# ---------------------------------------------------------------------------------------------
# 15. docs/plugins.md: the contract spelled out; specialization constants checked
# ---------------------------------------------------------------------------------------------


def test_15_spec_constant_count_is_checked_at_registration():
    # SGD's shaders declare constants 0, 1, 2; this rule supplies only constant 1.
    rule = dataclasses.replace(SGD, name="sgd_one_spec", spec_constants=lambda h: (float(h["maximize"]),))
    with pytest.warns(
        vk_adam.PluginLoadWarning,
        match=r"declares specialization constants \[0, 1, 2\] but spec_constants\(\) returns 1 value",
    ):
        registry = _registry.load_registry(entry_points=False, extra_plugins=[plugin_module("p", rule)])
    assert "sgd_one_spec" not in registry.rules


def test_15_reference_must_not_modify_grad(vk_seed):
    def scribbles_on_grad(param, grad, state, hyper, step):
        grad *= 1.0  # harmless here, but callers reuse the array
        sgd_reference(param, grad, state, hyper, step)

    rule = dataclasses.replace(SGD, name="sgd_scribbler", reference=scribbles_on_grad)
    with pytest.raises(RuleConformanceError, match="modified grad in place"):
        check_rule(rule, hyper=[{}], sizes=(7,), steps=1, seed=vk_seed)


def test_15_docs_explain_what_an_outside_author_asked():
    text = DOCS.read_text()
    flat = " ".join(text.split())
    assert "`VK_ADAM_STATE_SLOTS` is defined by the harness" in flat
    assert "`VK_ADAM_STATE_COUNT` when that is at least 1, else 1" in flat
    assert "layout(constant_id = 1)" in text and "Id 0 is taken" in flat
    assert "checks the count against the SPIR-V when it loads your rule" in flat
    assert "**starting at 1**" in flat
    assert "**It must not modify `grad`**" in flat
    assert "VK_ADAM_ALLOW_BUILTIN_OVERRIDE" in flat
    # Blocking advice that actually changes what create() sees.
    assert "vk_adam.reload_registry(blocked=[" in flat
    assert "returns a separate registry and leaves `create()` as it was" in flat


def test_15_reload_registry_blocked_affects_create(install_plugin):
    install_plugin("solo_plugin_ep", "solo-dist 0.3", simple_rule("solo_rule"))
    assert "solo_rule" in vk_adam.reload_registry().rules
    _registry.load_registry(blocked=["solo_plugin_ep"])  # a separate registry: create() unchanged
    assert "solo_rule" in vk_adam.default_registry().rules
    vk_adam.reload_registry(blocked=["solo_plugin_ep"])
    with pytest.raises(ValueError, match="unknown update rule 'solo_rule'"):
        vk_adam.create("solo_rule", [np.ones(3, np.float32)])


def _docs_blocks() -> list[tuple[str, str]]:
    return re.findall(r"^```(\w+)\n(.*?)^```", DOCS.read_text(), re.M | re.S)


@pytest.mark.slow  # builds a wheel
@pytest.mark.skipif(
    shutil.which("glslangValidator") is None or shutil.which("spirv-val") is None,
    reason="glslang-tools / spirv-tools not installed (build-time tools)",
)
def test_15_docs_plugin_builds_a_wheel_with_spirv_and_a_clean_source_tree(tmp_path):
    """The plugin on docs/plugins.md, copied block by block, builds a wheel that carries its
    SPIR-V (written to the build output, not the source tree) and passes check_rule."""
    pytest.importorskip("hatchling")
    blocks = _docs_blocks()

    def block(lang: str, marker: str) -> str:
        (found,) = [body for kind, body in blocks if kind == lang and marker in body]
        return found

    src = tmp_path / "vk-adam-signsgd"
    (src / "glsl").mkdir(parents=True)
    (src / "vk_adam_signsgd").mkdir()
    (src / "glsl" / "signsgd.comp").write_text(block("glsl", "void vk_adam_update"))
    (src / "vk_adam_signsgd" / "__init__.py").write_text(block("python", "SIGNSGD = vk_adam.UpdateRule"))
    (src / "pyproject.toml").write_text(block("toml", "[build-system]"))
    (src / "hatch_build.py").write_text(block("python", "BuildHookInterface"))
    build = subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(tmp_path / "dist")],
        cwd=src,
        capture_output=True,
        text=True,
        env=_subprocess_env(),
        timeout=300,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    assert not list(src.rglob("*.spv")), "the build hook wrote SPIR-V into the source tree"
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        assert "vk_adam_signsgd/spirv/signsgd.spv" in zf.namelist()
        zf.extractall(tmp_path / "site")
    script = textwrap.dedent(
        """
        import vk_adam
        from vk_adam.testing import check_rule
        rule = vk_adam.load_registry().get("signsgd")
        print("PLUGIN", rule.plugin, rule.distribution)
        report = check_rule(rule, sizes=(7, 256), steps=3)
        print("CHECKED", report.variants)
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=_subprocess_env(tmp_path / "site"),
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "PLUGIN signsgd vk-adam-signsgd 0.1.0" in run.stdout
    assert "CHECKED ('signsgd',)" in run.stdout
