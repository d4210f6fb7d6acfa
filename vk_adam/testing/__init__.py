"""Conformance checks for plugin authors: does a rule's shader do what its reference says?

    from vk_adam.testing import check_rule
    check_rule(MY_RULE)                     # raises RuleConformanceError with the details
    check_rule(MY_RULE, seed=range(100))    # a sweep: the same checks on 100 seeds' inputs

The inputs are random but fixed by ``seed`` (default :data:`DEFAULT_SEED`): two runs check the
same values, and a failure names its seed, its variant and format, and the one call that
replays that check alone (each check draws from its own generator, seeded by ``seed`` and what
the check is). By default every shader variant (and every value of each specialization constant) that the
rule can reach is tested (see ``vk_adam._rules.rule.variant_settings``). Each check starts the GPU
and the float64 reference from the same float32 params and state, takes one step, compares,
and continues from the GPU's result, so errors do not compound and a wrong shader is caught
on its first step.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import numpy as np

from .._optim import FormatReference
from .._rules import UpdateRule, check_rule_object, variant_settings
from .._runtime import Runtime
from ._compare import RuleConformanceError
from ._compare import nonfinite_detail as _nonfinite_detail
from ._float32 import check_float32, check_skip_flag
from ._format_check import FORMAT_CHECK_SIZE, FormatCheck
from ._replay import check_replay

__all__ = [
    "DEFAULT_SEED",
    "FORMAT_CASES",
    "FORMAT_CHECK_SIZE",
    "ConformanceReport",
    "FormatReference",
    "RuleConformanceError",
    "_nonfinite_detail",
    "check_rule",
]

#: The storage formats :func:`check_rule` runs each rule under, beyond float32 everything:
#: (param dtype, stochastic rounding, state dtype). Every pairing of param dtype and state dtype,
#: and both ways a 16-bit param takes an update (fp32 master copy, stochastic rounding).
FORMAT_CASES: tuple[tuple[str, bool, str], ...] = (
    ("float32", False, "bfloat16"),
    ("float32", False, "int8-blockwise"),
    ("float16", False, "float32"),
    ("float16", True, "bfloat16"),
    ("float16", False, "int8-blockwise"),
    ("bfloat16", True, "float32"),
    ("bfloat16", False, "bfloat16"),
    ("bfloat16", True, "int8-blockwise"),
)


#: The seed :func:`check_rule` draws its inputs from when none is given.
DEFAULT_SEED = 0


@dataclass(frozen=True)
class ConformanceReport:
    """What :func:`check_rule` ran: ``cases`` (hyperparameter settings x sizes, plus settings x
    formats, for each seed), the shader variants and hyperparameter overrides covered, the
    worst agreeing error, the seeds the inputs came from, and ``replays``: how many of the
    float32 cases (settings x sizes) were also replayed as captured steps (rules that declare it)."""

    rule: str
    cases: int
    worst_error: float  # max |gpu - reference| relative to the tensor's scale, over all checks
    variants: tuple[str, ...] = ()  # the shader variants the checks ran, in order
    hyper: tuple[Mapping[str, Any], ...] = ()  # the overrides tested, each over the defaults
    seeds: tuple[int, ...] = ()  # the seeds of the inputs, in order
    replays: int = 0  # replay checks run besides the cases (rules that declare captured steps)


def _default_hyper(rule: UpdateRule) -> list[Mapping[str, Any]]:
    """Overrides that reach every variant of ``rule``; RuleConformanceError when one is unreachable."""
    settings = variant_settings(rule)
    missed = sorted(set(rule.variants) - {s.variant for s in settings})
    if missed:
        raise RuleConformanceError(
            f"rule {rule.name!r}: no hyperparameters check_rule tried select variant(s) {missed} "
            "(it flips boolean options and moves numeric ones to or from zero, singly and in "
            "pairs); pass hyper=[{...}, ...] with settings that select every variant"
        )
    return [dict(s.overrides) for s in settings]


def check_rule(
    rule: UpdateRule,
    *,
    sizes: Iterable[int] = (1, 7, 256, 1029),
    steps: int = 5,
    hyper: Iterable[Mapping[str, Any]] | None = None,
    rtol: float = 2e-6,
    allowed_mismatch_fraction: float = 1e-3,
    seed: int | Iterable[int] | None = DEFAULT_SEED,
    formats: Iterable[tuple[str, bool, str]] = FORMAT_CASES,
    device: int | str | None = None,
) -> ConformanceReport:
    """Run ``rule``'s shader against its reference on random inputs; raise on disagreement.

    ``seed``: the inputs' seed (default :data:`DEFAULT_SEED`: every run checks the same
    values); a sequence of seeds (``range(1000)``) runs every check once per seed, a sweep for
    CI; ``None`` draws a fresh seed. A failure is a :class:`RuleConformanceError` whose message
    ends with its seed, variant and format and the one call that replays that check alone, e.g.
    ``check_rule(rule, hyper=[{}], sizes=(), steps=3, formats=[('float32', False,
    'int8-blockwise')], seed=7)``.

    ``hyper``: hyperparameter overrides to test (each merged over the rule's defaults). By
    default (``None``): the defaults plus settings that reach every shader variant and every
    value of each specialization constant (e.g. SGD with and without momentum, Nesterov,
    maximize); a variant no such setting reaches is a :class:`RuleConformanceError` that asks
    for explicit ``hyper``.
    ``device``: the Vulkan device (as ``Optimizer``'s); one is opened for all the checks.
    Elements agree when ``|gpu - ref| <= rtol * max|ref|`` plus, per element, a few times how far
    ``ref`` moves when each input of the step (param, grad, each state buffer) moves by one
    float32 rounding: a result that cancels (``g + wd * p`` with ``g`` near ``-wd * p``) keeps its
    operands' rounding. Rules with discontinuities (sign,
    clipping) may flip an element whose input rounds across the edge in float32; up to
    ``allowed_mismatch_fraction`` of the elements (at least one) may differ for that reason.
    Also checks that the shader honours the skip flag (binding 2), the registration rules,
    and that ``reference`` does not modify ``grad`` (it gets a read-only array). A rule that
    declares captured steps (``capturable_constants``) is also replayed: ``steps`` evaluations
    of one recorded step (``capturable=True``) must each be the reference's next step, from the
    GPU's last values, with the device's step count and an lr changed between evaluations.

    Then, for each storage format of ``formats`` (default :data:`FORMAT_CASES`: every pairing
    of param and state dtype, 16-bit params with a master copy and with stochastic rounding), the same
    one-step checks against :class:`FormatReference`, the reference with the harness's exact
    quantization and rounding. A stored 16-bit value or 8-bit code equals the reference's,
    except where the reference's float64 value lies within ``rtol`` (of the buffer's scale) of
    a rounding boundary, and there it may be what the other side of that band stores (float64
    math often lands exactly on a tie: 0.001 * g**2 for a 16-bit g). fp32 buffers (master
    copy, fp32 state) agree within ``rtol``. Up to ``allowed_mismatch_fraction`` of the
    elements may break this, as above.

    A NaN or Inf anywhere, on the GPU or in the reference, fails at once, whatever the
    tolerances: the message gives the counts of NaN and Inf on both sides, the buffer, the
    format and the step, and (under a compressed format) the usual remedies: a clamp,
    ``StateBuffer(nonnegative=True)`` or ``StateBuffer(keep_fp32=True)``.
    """
    check_rule_object(rule)
    seeds = _seeds(seed)
    sizes, formats = tuple(sizes), tuple(formats)
    # One device for every optimizer the checks make (opening a Vulkan device per optimizer
    # is slow, and some drivers limit how many a process may open).
    runtime = Runtime(device=device)
    manager = runtime.manager
    replay = _Replay(rule, steps, rtol, allowed_mismatch_fraction)
    try:
        tested = list(_default_hyper(rule) if hyper is None else hyper)
        worst, cases, variants, replays = 0.0, 0, [], 0
        for s in seeds:
            for overrides in tested:
                variant = rule.select_variant({**rule.defaults, **overrides})
                variants += [variant] if variant not in variants else []
                for n in sizes:
                    cases += 1
                    where = replay.at(s, variant, overrides, n=n)
                    rng = _check_rng(s, "float32", n, overrides)
                    args = (rule, manager, overrides, n, steps, rtol, allowed_mismatch_fraction, rng)
                    worst = max(worst, where.run(check_float32, *args))
                    rng = _check_rng(s, "skip", n, overrides)
                    where.run(check_skip_flag, rule, manager, overrides, n, rng)
                    if rule.capturable:  # N evaluations of one recording are N steps
                        replays += 1
                        rng = _check_rng(s, "replay", n, overrides)
                        args = (rule, runtime, overrides, n, steps, rtol, allowed_mismatch_fraction, rng)
                        worst = max(worst, where.run(check_replay, *args))
            for overrides in tested:
                variant = rule.select_variant({**rule.defaults, **overrides})
                for case in formats:
                    cases += 1
                    format_check = FormatCheck(rule, overrides, case, rtol, allowed_mismatch_fraction)
                    rng = _check_rng(s, "format", case, overrides)
                    where = replay.at(s, variant, overrides, case=case)
                    worst = max(worst, where.run(format_check.run, manager, steps, rng))
    finally:
        runtime.close()
    return ConformanceReport(
        rule.name, cases, worst, tuple(variants), tuple(dict(h) for h in tested), tuple(seeds), replays
    )


def _seeds(seed: int | Iterable[int] | None) -> list[int]:
    """The seeds to run: one, each of a sequence, or a fresh one for None."""
    if seed is None:
        return [secrets.randbits(32)]
    given: object = seed
    seeds: list[object] = (
        [given] if isinstance(given, int) or not isinstance(given, Iterable) else list(given)
    )
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise ValueError(
                f"check_rule: seed={s!r} is not a seed; give a non-negative int, a sequence of them "
                "(a sweep, e.g. range(100)), or None for a fresh one"
            )
    if not seeds:
        raise ValueError("check_rule: seed is an empty sequence; give at least one seed")
    return [s for s in seeds if isinstance(s, int)]  # every one, checked above


def _check_rng(seed: int, kind: str, size: object, overrides: Mapping[str, Any]) -> np.random.Generator:
    """The generator of one check: ``seed`` and what the check is (its kind, its size or format,
    its hyperparameters), so a check draws the same inputs alone as among all the others."""
    what = repr((kind, size, sorted(dict(overrides).items(), key=lambda item: str(item[0]))))
    words = np.frombuffer(hashlib.sha256(what.encode()).digest()[:16], np.uint32)
    return np.random.default_rng([seed, *(int(w) for w in words)])


_T = TypeVar("_T")
_P = ParamSpec("_P")


@dataclass(frozen=True)
class _Replay:
    """The arguments of a :func:`check_rule` call that a failed check's replay keeps."""

    rule: UpdateRule
    steps: int
    rtol: float
    allowed: float

    def at(
        self,
        seed: int,
        variant: str,
        overrides: Mapping[str, Any],
        *,
        n: int | None = None,
        case: tuple[str, bool, str] | None = None,
    ) -> _Check:
        return _Check(self, seed, variant, dict(overrides), n, case)


@dataclass(frozen=True)
class _Check:
    """One check: a float32 check of ``n`` elements, or a format check of ``case``."""

    replay: _Replay
    seed: int
    variant: str
    overrides: dict[str, Any]
    n: int | None
    case: tuple[str, bool, str] | None

    def run(self, check: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """Run ``check``; a failure gains its seed, variant, format and replay call."""
        try:
            return check(*args, **kwargs)
        except RuleConformanceError as exc:
            if exc.replay is not None:
                raise
            raise self._replayable(exc) from None

    def _replayable(self, exc: RuleConformanceError) -> RuleConformanceError:
        r = self.replay
        steps = exc.step if exc.step is not None else r.steps
        if self.case is None:
            where, formats, fmt = f"sizes=({self.n},), steps={steps}, formats=[]", "float32 everything", None
        else:
            param, stochastic, state = self.case
            where = f"sizes=(), steps={steps}, formats=[{self.case!r}]"
            formats = f"param {param}, state {state}, stochastic_rounding={stochastic}"
            fmt = self.case
        extra = f", rtol={r.rtol!r}" if r.rtol != 2e-6 else ""
        extra += f", allowed_mismatch_fraction={r.allowed!r}" if r.allowed != 1e-3 else ""
        call = f"check_rule(rule, hyper=[{self.overrides!r}], {where}{extra}, seed={self.seed})"
        error = RuleConformanceError(
            f"{exc}\nseed {self.seed}, variant {self.variant!r}, format: {formats}.\n"
            f"replay this check alone: {call}  (rule: the UpdateRule {r.rule.name!r})",
            step=exc.step,
        )
        error.seed, error.variant, error.format, error.replay = self.seed, self.variant, fmt, call
        return error
