"""What a ZeRO-1 optimizer is made of, checked and laid out before any device or collective:
the rule, each param group (options, shader, dtype, its params' slots), the buffer sets one
process would make of them (:class:`Unit`: a NumPy group's flat buffer, or one kp tensor), their
storage formats, and the shards of the world. Pure: no device, no communicator.

The checks are one process's optimizer's (``_optim.groups``), with its messages, so a ZeRO-1
optimizer refuses exactly what ``vk_adam.Optimizer`` refuses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import _formats as fmt
from .._optim import ALIGN_ELEMENTS, group_format
from .._optim.sharding import (
    Group,
    GroupFormat,
    ParamSlot,
    Storage,
    align,
    check_max_norm,
    check_options,
    check_storage,
    group_options,
    plan_flat,
    shader_spec,
)
from .._rules import UpdateRule, check_rule_object, default_registry
from .._runtime import element_count, is_kp_tensor, max_elements
from ._shard import Partition, partition


@dataclass
class Unit:
    """One buffer set of one process's optimizer, and so one range of ZeRO-1's flat vector: a
    NumPy group's flat buffer (its params at their slots), or one kp tensor of a device group
    (``tensor``; its slot at 0). ``total``: its length in the flat vector (whole blocks);
    ``n``: the length one process's buffer has, which chooses its formats."""

    group: int
    index: int  # the buffer set within its group
    first: int  # the flat index (state-dict numbering) of its first param
    slots: list[ParamSlot]
    total: int
    n: int
    dtype: str
    tensor: Any = None


@dataclass
class Plan:
    """A checked ZeRO-1 optimizer, before its device: see :func:`make_plan`."""

    rule: UpdateRule
    defaults: dict[str, Any]
    groups: list[Group]  # options (the user's param_groups dicts), shader, slots, step count
    units: list[Unit]  # the buffer sets, in one process's order (its buffer-set indices)
    formats: list[GroupFormat]  # each unit's formats, as one process chooses them
    totals: list[int]  # each unit's length in the flat vector
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


def make_plan(
    params: Iterable[Any],
    rule: str | UpdateRule,
    world: int,
    *,
    has_manager: bool,
    zero_grad: bool,
    skip_nonfinite: bool,
    clip_grad_norm: float | None,
    state_dtype: str,
    stochastic_rounding: bool,
    seed: int,
    hyper: Mapping[str, Any],
) -> Plan:
    """Check the arguments as ``vk_adam.Optimizer`` does (``has_manager``: ``manager=`` was
    given, which kp tensor params need); make the buffer sets one process makes (so each gets
    that process's formats); cut the flat vector into ``world`` shards on multiples of an 8-bit
    block (int8 state) or of 64 elements."""
    the_rule = default_registry().get(rule) if isinstance(rule, str) else rule
    check_rule_object(the_rule)
    check_options(None, None, zero_grad=zero_grad, skip_nonfinite=skip_nonfinite)
    max_norm = check_max_norm(clip_grad_norm)
    # group_options checks, once, that kp tensor params came with manager=
    defaults, options_list = group_options(the_rule, params, hyper, has_manager=has_manager)
    check_storage(state_dtype, stochastic_rounding, seed, options_list)
    storage = Storage(state_dtype, bool(stochastic_rounding), int(seed))
    block = fmt.BLOCK if state_dtype == "int8-blockwise" else ALIGN_ELEMENTS
    groups: list[Group] = []
    units: list[Unit] = []
    first = 0
    for gi, options in enumerate(options_list):
        variant = the_rule.variant_for(options)
        plist = options["params"]
        on_device = is_kp_tensor(plist[0])
        if any(is_kp_tensor(p) != on_device for p in plist):
            raise TypeError("a param group must hold either NumPy arrays or kp tensors, not both")
        spec = shader_spec(the_rule, options, bool(zero_grad))
        group = Group(options, variant, spec, [], [], not on_device)
        if on_device:  # one buffer set per tensor, as one process makes them
            for index, tensor in enumerate(plist):
                n = element_count(tensor)
                if n > max_elements():
                    raise ValueError(f"kp tensor {index} holds {n} elements; at most {max_elements()}")
                slot = ParamSlot(index, 0, n, (n,), None)
                group.slots.append(slot)
                units.append(Unit(gi, index, first + index, [slot], align(n, block), n, "float32", tensor))
        else:
            group.param_dtype = fmt.dtype_name(plist[0].dtype) or "float32"
            quantized = block == fmt.BLOCK
            group.slots, total = plan_flat(plist, max_elements(), fmt.BLOCK if quantized else None)
            units.append(Unit(gi, 0, first, group.slots, total, total, group.param_dtype))
        first += len(group.slots)
        groups.append(group)
    formats = [
        group_format(groups[u.group].variant.state, u.dtype, state_dtype, storage.stochastic_rounding, u.n)
        for u in units
    ]
    totals = [u.total for u in units]
    shards = partition(totals, world, block)
    return Plan(
        the_rule,
        defaults,
        groups,
        units,
        formats,
        totals,
        storage,
        bool(zero_grad),
        bool(skip_nonfinite),
        max_norm,
        shards,
    )
