"""``check_rule`` says what it saw: NaN and Inf are named, counted and located, with the buffer,
the format and the step, and (under a compressed format) the remedies docs/plugins.md describes.

The plugin under test is centered RMSprop (Graves 2013; ``torch.optim.RMSprop(centered=True)``),
whose update divides by ``sqrt(E[g^2] - E[g]^2) + eps``. The difference is a variance, never
negative in exact arithmetic and in float32, but under 8-bit blockwise state ``E[g^2]`` and
``E[g]`` are quantized independently and a small element's difference goes negative: the GPU
takes the square root of a negative number and writes NaN. ``alpha=0.15`` (most weight on the
newest gradient) keeps the variance small enough for that to happen within a few steps.
Measured on lavapipe over 200 seeds: 8-bit state gives NaN within 5 steps for 95% of them and
within 40 steps for all; float32 everything, bfloat16 state and 16-bit params over float32 or
bfloat16 state for none; the clamped shader (``max(..., 0.0)``) passes every format for all.
The tests take 40 steps where they need the NaN, and one fixed seed, so that they do not
depend on that chance.

The shaders are compiled here, at test time, with vk-adam's own driver (``vk_adam.shaderc``),
as a plugin's build hook does.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vk_adam import ShaderVariant, StateBuffer, UpdateRule
from vk_adam.shaderc import compile_shaders
from vk_adam.testing import DEFAULT_SEED, FORMAT_CASES, RuleConformanceError, check_rule

SEED = 20240611
INT8_CASES = [case for case in FORMAT_CASES if case[2] == "int8-blockwise"]
OTHER_CASES = [case for case in FORMAT_CASES if case[2] != "int8-blockwise"]

_HEADER = """#version 450
#extension GL_GOOGLE_include_directive : require
#define VK_ADAM_STATE_COUNT {states}   // s[0] = E[g], s[1] = E[g^2]{extra}
#define VK_ADAM_HYPER_COUNT 4   // lr, alpha, 1 - alpha, eps
#include "vk_adam_rule.glsl"

void vk_adam_update(inout vec4 p, vec4 g, inout vec4 s[VK_ADAM_STATE_SLOTS]) {{
    s[0] = HYPER(1) * s[0] + HYPER(2) * g;
    s[1] = HYPER(1) * s[1] + HYPER(2) * g * g;
"""
SHADERS = {
    # The plugin as first written: NaN under int8-blockwise state.
    "centered_rmsprop": _HEADER.format(states=2, extra="")
    + "    p -= HYPER(0) * g / (sqrt(s[1] - s[0] * s[0]) + HYPER(3));\n}\n",
    # The fix: clamp the difference of the two quantized averages.
    "centered_rmsprop_clamped": _HEADER.format(states=2, extra="")
    + "    p -= HYPER(0) * g / (sqrt(max(s[1] - s[0] * s[0], 0.0)) + HYPER(3));\n}\n",
    # Clamped for the update, but it also keeps the unclamped RMS in a third state buffer:
    # the NaN lands in a state buffer, not in the param.
    # The plugin guide's trap: 1 - HYPER(1) computed in the shader, off by 1.3e-5 for 0.999.
    "ema_in_shader": "#version 450\n#extension GL_GOOGLE_include_directive : require\n"
    '#define VK_ADAM_STATE_COUNT 1\n#define VK_ADAM_HYPER_COUNT 2\n#include "vk_adam_rule.glsl"\n'
    "void vk_adam_update(inout vec4 p, vec4 g, inout vec4 s[VK_ADAM_STATE_SLOTS]) {\n"
    "    s[0] = HYPER(1) * s[0] + (1.0 - HYPER(1)) * g * g;\n    p -= HYPER(0) * g;\n}\n",
    "centered_rmsprop_rms_state": _HEADER.format(states=3, extra=", s[2] = the RMS")
    + "    s[2] = sqrt(s[1] - s[0] * s[0]);\n"
    + "    p -= HYPER(0) * g / (sqrt(max(s[1] - s[0] * s[0], 0.0)) + HYPER(3));\n}\n",
}


@pytest.fixture(scope="module")
def spirv(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if shutil.which("glslangValidator") is None or shutil.which("spirv-val") is None:
        pytest.skip("glslangValidator and spirv-val are needed to compile the test plugin's shaders")
    src = tmp_path_factory.mktemp("glsl")
    for name, text in SHADERS.items():
        (src / f"{name}.comp").write_text(text)
    return {path.stem: path for path in compile_shaders(src, tmp_path_factory.mktemp("spirv"))}


def centered_rmsprop(
    spv: Path,
    *,
    clamp: bool = False,
    rms_state: bool = False,
    lr_factor: float = 1.0,
    name: str = "centered_rmsprop",
) -> UpdateRule:
    """The rule over ``spv``; its reference clamps the variance when ``clamp``, keeps the RMS in a
    third state buffer when ``rms_state``, and (to make a plainly wrong reference) multiplies
    the learning rate by ``lr_factor``."""

    def reference(param: Any, grad: Any, state: dict[str, Any], h: Any, step: int) -> None:
        m, v = state["grad_avg"], state["square_avg"]
        m[...] = h["alpha"] * m + (1.0 - h["alpha"]) * grad
        v[...] = h["alpha"] * v + (1.0 - h["alpha"]) * grad * grad
        var = v - m * m
        with np.errstate(invalid="ignore", divide="ignore"):
            if rms_state:
                state["rms"][...] = np.sqrt(var)
            if clamp:
                var = np.maximum(var, 0.0)
            param -= lr_factor * h["lr"] * grad / (np.sqrt(var) + h["eps"])

    state = (StateBuffer("grad_avg"), StateBuffer("square_avg"))
    if rms_state:
        state += (StateBuffer("rms", nonnegative=True),)
    return UpdateRule(
        name=name,
        defaults={"lr": 1e-3, "alpha": 0.15, "eps": 1e-3},
        variants={"centered": ShaderVariant(spv, state, hyper_count=4)},
        select_variant=lambda h: "centered",
        push_constants=lambda h, step: (h["lr"], h["alpha"], 1.0 - h["alpha"], h["eps"]),
        reference=reference,
    )


def _format_label(case: tuple[str, bool, str]) -> str:
    param_dtype, stochastic, state_dtype = case
    return f"(param {param_dtype}, stochastic_rounding={stochastic}, state {state_dtype}, hyper={{}})"


REMEDIES = (
    "A rule that is finite in float32 but not under a compressed format usually takes a square "
    "root or a log of a difference of quantized values: clamp it (max(x, 0.0)), declare the buffer "
    "StateBuffer(name, nonnegative=True) if it never goes below zero, or keep it float32 with "
    "StateBuffer(name, keep_fp32=True)"
)


# -- NaN only under 8-bit state ---------------------------------------------------------------


def test_the_unclamped_rule_is_finite_without_8_bit_state(spirv):
    """The premise: float32 everything (the plain checks) and every format without 8-bit state
    pass, so the failures below are the quantization's."""
    rule = centered_rmsprop(spirv["centered_rmsprop"])
    report = check_rule(rule, hyper=[{}], formats=OTHER_CASES, seed=SEED)
    assert report.cases == 4 + len(OTHER_CASES)


@pytest.mark.parametrize("case", INT8_CASES, ids=lambda c: "-".join(map(str, c)))
def test_nan_under_8_bit_state_is_counted_with_buffer_format_and_step(spirv, case):
    rule = centered_rmsprop(spirv["centered_rmsprop"])
    with pytest.raises(RuleConformanceError) as err:
        check_rule(rule, hyper=[{}], sizes=(), steps=40, formats=[case], seed=SEED)
    message = str(err.value)
    print(message)
    pattern = (
        r"rule 'centered_rmsprop': param is not finite at step (?P<step>\d+) "
        + re.escape(_format_label(case))
        + r": the GPU has (?P<nan>\d+) NaN and (?P<inf>\d+) Inf, the format reference "
        r"(?P<ref_nan>\d+) NaN and (?P<ref_inf>\d+) Inf; first at element (?P<at>\d+) "
        r"\(GPU nan, format reference (?P<ref_at>\S+)\)\. "
    )
    found = re.match(pattern, message)
    assert found, message
    # Step 1 starts from zero state, which every format stores exactly: no quantization yet.
    assert 2 <= int(found["step"]) <= 40
    assert int(found["nan"]) >= 1 and int(found["inf"]) == 0
    # The reference (the same math in float64, from the same quantized state) has NaN too.
    assert int(found["ref_nan"]) >= 1 and int(found["ref_inf"]) == 0
    assert 0 <= int(found["at"]) < 4 * 256 * 4 + 103
    assert REMEDIES in message
    assert "(this variant's state: 'grad_avg', 'square_avg')" in message
    assert "docs/plugins.md" in message
    assert "elements beyond" not in message  # the old message: "0 elements beyond rtol"


def test_nan_in_a_state_buffer_names_the_state_buffer(spirv):
    """The param stays finite (its update clamps); the RMS kept as state does not."""
    rule = centered_rmsprop(spirv["centered_rmsprop_rms_state"], clamp=True, rms_state=True)
    with pytest.raises(RuleConformanceError) as err:
        check_rule(rule, hyper=[{}], sizes=(), steps=40, formats=[INT8_CASES[0]], seed=SEED)
    message = str(err.value)
    print(message)
    assert re.match(
        r"rule 'centered_rmsprop': state 'rms' is not finite at step \d+ "
        + re.escape(_format_label(INT8_CASES[0]))
        + r": the GPU has \d+ NaN and \d+ Inf, the format reference [1-9]\d* NaN and 0 Inf; "
        r"first at element \d+ \(GPU \S+, format reference nan\)\. ",
        message,
    ), message
    assert REMEDIES in message


def test_nan_only_in_the_reference_is_reported_too(spirv):
    """A clamped shader with an unclamped reference: the GPU is finite, the reference is not.
    Before, NaN in the reference compared false with every tolerance, and the check passed."""
    rule = centered_rmsprop(spirv["centered_rmsprop_clamped"], clamp=False)
    with pytest.raises(RuleConformanceError) as err:
        check_rule(rule, hyper=[{}], sizes=(), steps=40, formats=[INT8_CASES[0]], seed=SEED)
    message = str(err.value)
    print(message)
    assert re.match(
        r"rule 'centered_rmsprop': param is not finite at step \d+ "
        + re.escape(_format_label(INT8_CASES[0]))
        + r": the GPU has 0 NaN and 0 Inf, the format reference [1-9]\d* NaN and 0 Inf; "
        r"first at element \d+ \(GPU -?\d\S*, format reference nan\)\. ",
        message,
    ), message


def test_non_finite_in_float32_names_the_plain_check_and_its_hint(spirv):
    """alpha=0 and eps=0: the variance of one gradient is 0, so the reference divides by zero at
    every element (Inf); float32 everything, so the message has no compressed-format remedies."""
    rule = centered_rmsprop(spirv["centered_rmsprop"])
    with pytest.raises(RuleConformanceError) as err:
        check_rule(rule, hyper=[{"alpha": 0.0, "eps": 0.0}], sizes=(7,), steps=1, formats=[], seed=SEED)
    message = str(err.value)
    print(message)
    assert re.match(
        r"rule 'centered_rmsprop': param is not finite at step 1 \(param float32, state float32, "
        r"n=7, hyper=\{'alpha': 0\.0, 'eps': 0\.0\}\): the GPU has \d+ NaN and \d+ Inf, the "
        r"reference 0 NaN and 7 Inf; first at element 0 \(GPU \S+, reference -?inf\)\. Both sides",
        message,
    ), message
    assert "compressed format" not in message


# -- the remedies pass -------------------------------------------------------------------------


def test_the_clamped_rule_passes_every_format(spirv):
    rule = centered_rmsprop(spirv["centered_rmsprop_clamped"], clamp=True)
    report = check_rule(rule, hyper=[{}], seed=SEED)
    assert report.cases == 4 + len(FORMAT_CASES)


def test_the_unclamped_rule_with_fp32_state_passes_every_format(spirv):
    """The other remedy: keep both averages float32 (keep_fp32=True) under any state_dtype."""
    rule = centered_rmsprop(spirv["centered_rmsprop"])
    (variant,) = rule.variants.values()
    fp32 = tuple(dataclasses.replace(s, keep_fp32=True) for s in variant.state)
    rule = dataclasses.replace(rule, variants={"centered": dataclasses.replace(variant, state=fp32)})
    check_rule(rule, hyper=[{}], sizes=(7,), steps=40, formats=INT8_CASES, seed=SEED)


# -- a plain mismatch keeps its message --------------------------------------------------------


def test_a_wrong_reference_still_reports_elements_beyond_rtol(spirv):
    rule = centered_rmsprop(spirv["centered_rmsprop_clamped"], clamp=True, lr_factor=1.5)
    with pytest.raises(RuleConformanceError) as err:
        check_rule(rule, hyper=[{}], sizes=(7,), formats=[], seed=SEED)
    message = str(err.value)
    print(message)
    assert re.fullmatch(
        r"rule 'centered_rmsprop': param differs from the reference at step 1 \(n=7, hyper=\{\}\): "
        r"7 of 7 elements beyond rtol=2e-06, worst \d\.\d{3}e[-+]\d+\n"
        rf"seed {SEED}, variant 'centered', format: float32 everything\.\n"
        r"replay this check alone: check_rule\(rule, hyper=\[\{\}\], sizes=\(7,\), steps=1, formats=\[\], "
        rf"seed={SEED}\)  \(rule: the UpdateRule 'centered_rmsprop'\)",
        message,
    ), message


@pytest.mark.parametrize(
    "case, detail",
    [
        (("float32", False, "int8-blockwise"), r"(?P<count>\d+) of 4199 elements beyond rtol=2e-06, worst "),
        (("bfloat16", False, "bfloat16"), r"(?P<count>\d+) of 4199 stored values differ beyond rounding"),
    ],
    ids=["fp32-param", "bf16-param"],
)
def test_a_wrong_reference_under_a_format_reports_how_many_differ(spirv, case, detail):
    rule = centered_rmsprop(spirv["centered_rmsprop_clamped"], clamp=True, lr_factor=1.5)
    with pytest.raises(RuleConformanceError) as err:
        check_rule(rule, hyper=[{}], sizes=(), formats=[case], seed=SEED)
    message = str(err.value)
    print(message)
    found = re.match(
        r"rule 'centered_rmsprop': param differs from the format reference at step 1 "
        + re.escape(_format_label(case))
        + ": "
        + detail,
        message,
    )
    assert found, message
    assert int(found["count"]) > 4  # more than allowed_mismatch_fraction lets through
    assert "not finite" not in message and "NaN" not in message


def _ema_rule(spv: Path) -> UpdateRule:
    def reference(param: Any, grad: Any, state: dict[str, Any], h: Any, step: int) -> None:
        state["sq"][...] = h["beta"] * state["sq"] + (1.0 - h["beta"]) * grad * grad
        param -= h["lr"] * grad

    return UpdateRule(
        name="ema_in_shader",
        defaults={"lr": 1e-3, "beta": 0.999},
        variants={"main": ShaderVariant(spv, (StateBuffer("sq"),), hyper_count=2)},
        select_variant=lambda h: "main",
        push_constants=lambda h, step: (h["lr"], h["beta"]),
        reference=reference,
    )


def test_a_small_disagreement_names_float32_cancellation_in_the_shader(spirv):
    with pytest.raises(RuleConformanceError) as err:
        check_rule(_ema_rule(spirv["ema_in_shader"]), hyper=[{}], sizes=(1029,), formats=[], seed=SEED)
    message = str(err.value)
    found = re.match(
        r"rule 'ema_in_shader': sq differs from the reference at step 1 .* worst (\S+)\. ", message
    )
    assert found and 2e-6 < float(found[1]) <= 1e-4, message
    assert (
        "float32 cancellation in `1.0 - HYPER(k)`" in message and "push `1 - beta` from the host" in message
    )


def test_a_large_disagreement_gets_no_cancellation_hint(spirv):
    rule = centered_rmsprop(spirv["centered_rmsprop_clamped"], clamp=True, lr_factor=1.5)
    with pytest.raises(RuleConformanceError) as err:
        check_rule(rule, hyper=[{}], sizes=(1029,), formats=[], seed=SEED)
    assert "cancellation" not in str(err.value)


def test_invalid_rule_error_is_public():
    import vk_adam
    from vk_adam._rules.checks import InvalidRuleError

    assert "InvalidRuleError" in vk_adam.__all__ and vk_adam.InvalidRuleError is InvalidRuleError
    rule = dataclasses.replace(_ema_rule(Path("unused.spv")), name="not an identifier")
    with pytest.raises(vk_adam.InvalidRuleError, match="must be a non-empty identifier"):
        check_rule(rule)


# -- reproducible to the seed ------------------------------------------------------------------


def _replayed(rule: UpdateRule, call: str) -> str:
    """The message of the failure that ``call`` (a failure's replay line) raises."""
    with pytest.raises(RuleConformanceError) as err:
        eval(call, {"check_rule": check_rule, "rule": rule})
    return str(err.value)


def test_the_planted_failure_is_the_same_twice_and_its_replay_call_reproduces_it(spirv):
    """The unclamped sqrt(E[g^2] - E[g]^2) under check_rule's defaults: the same failure, seed and
    message on every run (before, the inputs came from a fresh seed and the failure came and
    went), and the message's last line is a call that replays that one check alone."""
    rule = centered_rmsprop(spirv["centered_rmsprop"])
    errors = []
    for _ in range(2):
        with pytest.raises(RuleConformanceError) as err:
            check_rule(rule)
        errors.append(err.value)
    first, second = errors
    message = str(first)
    print(message)
    assert str(second) == message
    assert first.seed == second.seed == DEFAULT_SEED
    assert re.match(r"rule 'centered_rmsprop': param is not finite at step \d+ \(param ", message), message
    assert first.format is not None and first.format[2] == "int8-blockwise"
    found = re.search(
        rf"\nseed {DEFAULT_SEED}, variant 'centered', format: param (\w+), state int8-blockwise, "
        r"stochastic_rounding=(True|False)\.\nreplay this check alone: (check_rule\(rule, .*\))  "
        r"\(rule: the UpdateRule 'centered_rmsprop'\)$",
        message,
    )
    assert found, message
    assert found[3] == first.replay
    assert found[3] == (
        f"check_rule(rule, hyper=[{{}}], sizes=(), steps={first.step}, formats=[{first.format!r}], "
        f"seed={DEFAULT_SEED})"
    )
    assert _replayed(rule, first.replay) == message


def test_a_sweep_names_the_seed_that_failed_and_its_replay_reproduces_it(spirv):
    """A sweep over seeds (as a plugin's CI runs one) stops at the first seed that fails; the
    replay of a float32 check names its size."""
    rule = centered_rmsprop(spirv["centered_rmsprop"])
    with pytest.raises(RuleConformanceError) as err:
        check_rule(rule, hyper=[{}], sizes=(7,), steps=40, formats=INT8_CASES[:1], seed=range(5, 50))
    message = str(err.value)
    assert err.value.seed is not None and 5 <= err.value.seed < 50
    assert f"seed={err.value.seed})" in message and f"\nseed {err.value.seed}, variant 'centered'" in message
    assert _replayed(rule, err.value.replay) == message
    # A seed before it passed: the sweep ran in order.
    if err.value.seed > 5:
        check_rule(
            rule, hyper=[{}], sizes=(7,), steps=40, formats=INT8_CASES[:1], seed=range(5, err.value.seed)
        )
    with pytest.raises(RuleConformanceError) as plain:  # a float32 failure's replay: its size, no format
        check_rule(rule, hyper=[{"alpha": 0.0, "eps": 0.0}], sizes=(1, 7), steps=1, formats=[], seed=[3])
    assert (
        plain.value.replay
        == "check_rule(rule, hyper=[{'alpha': 0.0, 'eps': 0.0}], sizes=(1,), steps=1, formats=[], seed=3)"
    )
    assert _replayed(rule, plain.value.replay) == str(plain.value)


def test_same_seed_same_report_and_bad_seeds_are_refused(spirv):
    rule = centered_rmsprop(spirv["centered_rmsprop_clamped"], clamp=True)
    reports = [
        check_rule(rule, hyper=[{}], sizes=(7, 256), formats=INT8_CASES[:1], seed=11) for _ in range(2)
    ]
    assert reports[0] == reports[1] and reports[0].seeds == (11,)
    other = check_rule(rule, hyper=[{}], sizes=(7, 256), formats=INT8_CASES[:1], seed=12)
    assert other.worst_error != reports[0].worst_error  # other inputs
    assert check_rule(rule, hyper=[{}], sizes=(7,), formats=[], seed=range(3)).seeds == (0, 1, 2)
    assert len(check_rule(rule, hyper=[{}], sizes=(7,), formats=[], seed=None).seeds) == 1
    for bad in (-1, 1.5, True, [], ["3"]):
        with pytest.raises(ValueError, match="seed"):
            check_rule(rule, hyper=[{}], sizes=(7,), formats=[], seed=bad)


# -- the counting itself -----------------------------------------------------------------------


def test_the_counts_are_exact():
    from vk_adam.testing import _nonfinite_detail

    got = np.array([1.0, np.nan, np.inf, np.nan, -np.inf, 5.0], np.float32)
    want = np.array([1.0, 0.0123, 3.0, np.nan, -70000.0, np.inf])
    assert _nonfinite_detail(got, want, "reference") == (
        "the GPU has 2 NaN and 2 Inf, the reference 1 NaN and 1 Inf; first at element 1 "
        "(GPU nan, reference 0.0123)"
    )
    assert _nonfinite_detail(got, want, "format reference", "float16") == (
        "the GPU has 2 NaN and 2 Inf, the format reference 1 NaN and 1 Inf; first at element 1 "
        "(GPU nan, format reference 0.0123); 1 of the GPU's Inf are format reference values beyond "
        "the largest float16 (65504), so they overflow its storage"
    )
    assert _nonfinite_detail(np.ones(3, np.float32), np.ones(3), "reference") is None
