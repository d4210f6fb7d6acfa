"""Lion through the registry, as a user of the installed plugin would use it.

Random inputs come from ``vk_seed``, vk-adam's pytest plugin's per-test seed (derived from
``VK_ADAM_TEST_SEED`` and the test's node id): a failure prints the command that replays it."""

import numpy as np
import pytest

import vk_adam
from vk_adam.testing import FORMAT_CASES, check_rule


def test_lion_is_registered_from_its_distribution():
    rule = vk_adam.default_registry().get("lion")
    assert rule.distribution.startswith("vk-adam-lion")


def test_lion_conforms_to_its_reference(vk_seed):
    rule = vk_adam.default_registry().get("lion")
    # sign(u) flips where u = beta1*m + (1-beta1)*g cancels to about zero; with 16-bit params and
    # state such exact cancellations are common (0.8*m == -0.2*g), so allow 0.5% of elements
    report = check_rule(
        rule,
        hyper=[{"lr": 0.01}, {"lr": 0.003, "weight_decay": 0.1, "betas": (0.8, 0.95)}],
        allowed_mismatch_fraction=5e-3,
        seed=vk_seed,
    )
    assert report.cases == 2 * (4 + len(FORMAT_CASES))


def test_lion_over_100_steps_matches_reference(vk_seed):
    rule = vk_adam.default_registry().get("lion")
    rng = np.random.default_rng(vk_seed)
    p = rng.standard_normal(999).astype(np.float32)
    ref = p.astype(np.float64)
    hyper = {**rule.defaults, "lr": 1e-3, "weight_decay": 0.01}
    state = {"exp_avg": np.zeros(999)}
    mismatched = 0
    with vk_adam.create("lion", [p], lr=1e-3, weight_decay=0.01) as opt:
        for t in range(1, 101):
            g = rng.standard_normal(999).astype(np.float32)
            opt.step([g])
            rule.reference(ref, g.astype(np.float64), state, hyper, t)
    # sign() may flip where its argument rounds across zero in float32: allow a handful.
    mismatched = np.count_nonzero(np.abs(p - ref) > 1e-5)
    assert mismatched <= 3, mismatched


def test_lion_errors():
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        vk_adam.create("lion", [np.zeros(4, np.float32)], lr=-1)
