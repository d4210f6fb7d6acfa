"""The shared keyword options, defined once (``_optim/options.py``): every front lists them with
their defaults, refuses others as Python would, and shares one lifetime (``close``, ``with``)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import vk_adam
from vk_adam._optim.options import DEFAULTS, SHARD_OPTIONS, OptimizerOptions
from vk_adam.distributed import ZeroRedundancyOptimizer

FRONTS = [vk_adam.Adam, vk_adam.AdamW, vk_adam.SGD, vk_adam.Optimizer]


def test_the_options_are_defined_once_and_typed():
    assert list(DEFAULTS) == list(OptimizerOptions.__annotations__)


@pytest.mark.parametrize("front", [*FRONTS, ZeroRedundancyOptimizer], ids=lambda f: f.__name__)
def test_help_lists_every_option_with_its_default(front):
    parameters = inspect.signature(front).parameters
    names = SHARD_OPTIONS if front is ZeroRedundancyOptimizer else tuple(DEFAULTS)
    for name in names:
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY
        assert parameters[name].default == DEFAULTS[name], name  # type: ignore[literal-required]
    for name in names:  # and the docstring names them
        assert f"``{name}``" in (front.__doc__ or "") or front is ZeroRedundancyOptimizer


@pytest.mark.parametrize("front", FRONTS[:3], ids=lambda f: f.__name__)
def test_presets_refuse_unknown_keywords_as_python_does(front):
    message = rf"{front.__name__}.__init__\(\) got an unexpected keyword argument 'clip'"
    with pytest.raises(TypeError, match=message):
        front([np.zeros(4, np.float32)], clip=1.0)


def test_options_reach_the_optimizer(rng):
    p = rng.standard_normal(64).astype(np.float32)
    with vk_adam.AdamW([p], zero_grad=False, skip_nonfinite=True, clip_grad_norm=2.0) as opt:
        assert (opt.zeroes_grad, opt.skip_nonfinite, opt.clip_grad_norm) == (False, True, 2.0)
        assert not opt.closed
    assert opt.closed
    with pytest.raises(vk_adam.OptimizerClosedError):
        opt.step([np.ones(64, np.float32)])
