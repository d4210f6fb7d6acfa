"""The sub-face ZeRO-1 (``vk_adam.distributed``) is built on: the one module below ``_optim``'s
face that another package may import, and only ``distributed/`` (the architecture test holds
both).

Why a sub-face, not the face: ZeRO-1 re-plans, on every rank, what one process's optimizer
plans — the same param-group checks and messages, the same flat layout, storage formats and
state dicts — before any optimizer exists (a rank may own nothing, and so have none), and then
builds one optimizer over its shard's windows. It needs those building blocks themselves:
behind an optimizer's :class:`~.access.WrapperAccess` they would not exist yet, and copied into
``distributed/`` they would drift from the optimizer's. No other package needs any of them, so
the face (``__init__.py``), which every package reads, does not carry them.

What an optimizer *instance* offers a wrapper (the gradient scale, the status buffer, the
buffer sets) is not here: it is :meth:`vk_adam.Optimizer.internals`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .._rules import UpdateRule
from .buffers import BufferSet, Group
from .clipping import check_max_norm
from .groups import check_options, check_storage, group_options, prepare_grads, revalidate, shader_spec
from .inflight import InFlight
from .layout import ParamSlot, align, plan_flat
from .optimizer import Optimizer
from .options import SHARD_OPTIONS, spell_out_options, split_options
from .state_dict import read_state_dict, write_state_dict
from .storage import GroupFormat, Storage, Window, initial_state, value_words

__all__ = [
    "SHARD_OPTIONS",
    "BufferSet",
    "Group",
    "GroupFormat",
    "InFlight",
    "ParamSlot",
    "Storage",
    "Window",
    "align",
    "check_max_norm",
    "check_options",
    "check_storage",
    "group_options",
    "initial_state",
    "plan_flat",
    "prepare_grads",
    "read_state_dict",
    "revalidate",
    "shader_spec",
    "shard_optimizer",
    "spell_out_options",
    "split_options",
    "value_words",
    "write_state_dict",
]


def shard_optimizer(
    params: Iterable[Any], rule: str | UpdateRule, windows: Sequence[Window], **options: Any
) -> Optimizer:
    """An :class:`Optimizer` over one ZeRO-1 shard: param group ``i`` of ``params`` is window
    ``windows[i]`` (:class:`Window`) of a larger buffer set — its elements ``offset .. offset +
    n`` of ``total`` — so its storage formats are chosen for the whole buffer and its
    stochastic-rounding stream is the whole buffer's from ``offset`` on, and the shard takes
    exactly the update one process's whole buffer would. One window per param group (else
    ValueError). ``options``: :class:`Optimizer`'s keywords and hyperparameters."""
    return Optimizer(params, rule, _windows=windows, **options)
