"""What a ZeRO-1 optimizer is made of, checked and laid out before any device or collective:
the rule, each param group (options, shader, dtype, the slots of one process's flat buffer, its
storage formats), and the shards of the world. Pure: no device, no communicator.

The checks are one process's optimizer's (``_optim.groups``), with its messages, so a ZeRO-1
optimizer refuses exactly what ``vk_adam.Optimizer`` refuses, plus kp tensors (ranks hold
NumPy copies of the params).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import _formats as fmt
from .._optim.buffers import Group
from .._optim.clipping import check_harness, check_max_norm
from .._optim.groups import check_options, check_storage, group_options, shader_spec
from .._optim.layout import ALIGN_ELEMENTS, plan_flat
from .._optim.storage import GroupFormat, Storage, group_format
from .._rules.checks import check_rule_object
from .._rules.registry import default_registry
from .._rules.rule import UpdateRule
from .._runtime import MAX_ELEMENTS, is_kp_tensor
from ._shard import Partition, partition


@dataclass
class Plan:
    """A checked ZeRO-1 optimizer, before its device: see :func:`make_plan`."""

    rule: UpdateRule
    defaults: dict[str, Any]
    groups: list[Group]  # options (the user's param_groups dicts), shader, slots, step count
    formats: list[GroupFormat]  # each group's formats, as one process chooses them
    totals: list[int]  # each group's flat length
    storage: Storage
    zero_grad: bool
    skip_nonfinite: bool
    max_norm: float | None
    partition: Partition

    def signature(self) -> tuple[Any, ...]:
        """What every rank must agree on: the rule, the layout, the options."""
        groups = tuple(
            (
                g.param_dtype,
                tuple(s.shape for s in g.slots),
                repr(sorted((k, g.options[k]) for k in self.rule.defaults)),
            )
            for g in self.groups
        )
        flags = (self.zero_grad, self.skip_nonfinite, self.max_norm)
        return (self.rule.name, tuple(self.totals), groups, repr(self.storage), flags)


def _holds_kp(params: Any) -> bool:
    return is_kp_tensor(params) or (isinstance(params, (list, tuple)) and any(map(is_kp_tensor, params)))


def make_plan(
    params: Iterable[Any],
    rule: str | UpdateRule,
    world: int,
    *,
    zero_grad: bool,
    skip_nonfinite: bool,
    clip_grad_norm: float | None,
    state_dtype: str,
    stochastic_rounding: bool,
    seed: int,
    hyper: Mapping[str, Any],
) -> Plan:
    """Check the arguments as ``vk_adam.Optimizer`` does; pack each group as one process packs
    it (so it gets that process's formats); cut the flat vector into ``world`` shards on
    multiples of an 8-bit block (int8 state) or of 64 elements."""
    the_rule = default_registry().get(rule) if isinstance(rule, str) else rule
    check_rule_object(the_rule)
    check_options(None, None, zero_grad=zero_grad, skip_nonfinite=skip_nonfinite)
    max_norm = check_max_norm(clip_grad_norm)
    if isinstance(params, (list, tuple)) and any(
        _holds_kp(p.get("params") if isinstance(p, Mapping) else p) for p in params
    ):
        raise TypeError(
            "ZeroRedundancyOptimizer takes NumPy params (replicated on every rank, updated in "
            "place); kp tensors are not supported"
        )
    defaults, options_list = group_options(the_rule, params, hyper, has_manager=False)
    if max_norm is not None:
        check_harness(the_rule.variant_for(g) for g in options_list)
    check_storage(state_dtype, stochastic_rounding, seed, options_list)
    storage = Storage(state_dtype, bool(stochastic_rounding), int(seed))
    quantized = state_dtype == "int8-blockwise"
    groups, formats, totals = [], [], []
    for options in options_list:
        variant = the_rule.variant_for(options)
        group = Group(options, variant, shader_spec(the_rule, options, bool(zero_grad)), [], [], True)
        group.param_dtype = fmt.dtype_name(options["params"][0].dtype) or "float32"
        group.slots, total = plan_flat(options["params"], MAX_ELEMENTS, fmt.BLOCK if quantized else None)
        groups.append(group)
        totals.append(total)
        formats.append(
            group_format(variant.state, group.param_dtype, state_dtype, storage.stochastic_rounding, total)
        )
    shards = partition(totals, world, fmt.BLOCK if quantized else ALIGN_ELEMENTS)
    return Plan(
        the_rule,
        defaults,
        groups,
        formats,
        totals,
        storage,
        bool(zero_grad),
        bool(skip_nonfinite),
        max_norm,
        shards,
    )
