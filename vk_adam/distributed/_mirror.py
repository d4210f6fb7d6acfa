"""The whole optimizer state on the host, laid out as one process holds it: what
``consolidate_state_dict`` assembles from every rank's shard, and what ``load_state_dict``
checks a state dict against before each rank takes its shard of it.

A :class:`StateMirror` has the single-process optimizer's groups and buffer sets, with host
arrays (:class:`HostWords`) in place of device buffers, so ``_optim.state_dict`` reads and
writes it exactly as it reads and writes an optimizer: one layout, one set of checks and
messages. A shard's state moves in and out of it as slices of each state buffer (elements of
fp32, bf16 or 8-bit codes, whole blocks of absmax, and the fp32 master copy of 16-bit params).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import _formats as fmt
from .._optim.buffers import BufferSet, Group
from .._optim.state_dict import ABSMAX_SUFFIX, MASTER_KEY
from .._optim.storage import GroupFormat, Storage, initial_state, value_words
from .._rules.rule import UpdateRule
from ._shard import Piece

Array = npt.NDArray[Any]


class HostWords:
    """A host array standing in for a device buffer: ``data()`` returns its words, as a kp
    tensor's ``data()`` returns its staging memory."""

    __slots__ = ("words",)

    def __init__(self, words: Array) -> None:
        self.words = words

    def data(self) -> Array:
        return self.words


class NoDevice:
    """The runtime of a mirror: there is nothing to upload or download."""

    def run(self, ops: Sequence[Any], *, timestamps: bool = False) -> list[int] | None:
        return None

    def upload_op(self, buffers: Sequence[Any]) -> Any:
        return None

    def download_op(self, buffers: Sequence[Any]) -> Any:
        return None


@dataclass
class StateMirror:
    """The whole state on the host (an ``_optim.state_dict.StateHolder``)."""

    rule: UpdateRule
    groups: list[Group]
    storage: Storage
    zero_grad: bool
    seed: int
    rt: NoDevice = field(default_factory=NoDevice)


def element_view(words: Array, code: int) -> Array:
    """A state buffer's words as one value per element: float32, bfloat16 or uint8 codes."""
    if code == fmt.STATE_F32:
        return words.view(np.float32)
    if code == fmt.STATE_BF16:
        return words.view(fmt.BFLOAT16)
    return words.view(np.uint8)


def build_mirror(
    rule: UpdateRule,
    groups: Sequence[Group],
    formats: Sequence[GroupFormat],
    totals: Sequence[int],
    storage: Storage,
    zero_grad: bool,
    seed: int,
) -> StateMirror:
    """A mirror of ``groups`` (their options and step counts copied, so a failed load changes
    nothing) with every state buffer at its initial value and the master copy of 16-bit params
    at the params' current values."""
    mirror_groups = []
    for index, (group, form, total) in enumerate(zip(groups, formats, totals, strict=True)):
        bset = BufferSet(None, None, {}, total, index, form)
        for s, code in zip(group.variant.state, form.state, strict=True):
            words, absmax = initial_state(code, s, total)
            bset.state[s.name] = HostWords(words)
            if absmax is not None:
                bset.absmax[s.name] = HostWords(absmax)
        if form.has_master:
            flat = np.zeros(total, np.float32)
            for slot in group.slots:
                flat[slot.offset : slot.offset + slot.size] = np.asarray(slot.host, np.float32).reshape(-1)
            bset.master = HostWords(value_words(flat, "float32"))
        copy = Group(dict(group.options), group.variant, group.spec, group.slots, [bset], True, group.step)
        copy.param_dtype = group.param_dtype
        mirror_groups.append(copy)
    return StateMirror(rule, mirror_groups, storage, zero_grad, seed)


def shard_entry(mirror: StateMirror, piece: Piece) -> dict[str, Any]:
    """A piece's state as the state-dict entry of a param holding exactly those elements
    (what the rank's own optimizer loads), copied out of the mirror."""
    group = mirror.groups[piece.group]
    bset = group.sets[0]
    entry: dict[str, Any] = {"step": float(group.step)}
    for s, code in zip(group.variant.state, bset.format.state, strict=True):
        entry[s.name] = element_view(bset.state[s.name].data(), code)[piece.lo : piece.hi].copy()
        if s.name in bset.absmax:
            first, last = piece.lo // fmt.BLOCK, piece.hi // fmt.BLOCK
            entry[s.name + ABSMAX_SUFFIX] = bset.absmax[s.name].data()[first:last].copy()
    if bset.master is not None:
        entry[MASTER_KEY] = bset.master.data().view(np.float32)[piece.lo : piece.hi].copy()
    return entry


def fill_from_entry(mirror: StateMirror, piece: Piece, entry: Mapping[str, Any]) -> None:
    """Copy a rank's state-dict entry for ``piece`` (from :func:`shard_entry`'s layout, as the
    rank's own optimizer saves it) into the mirror."""
    group = mirror.groups[piece.group]
    bset = group.sets[0]
    for s, code in zip(group.variant.state, bset.format.state, strict=True):
        element_view(bset.state[s.name].data(), code)[piece.lo : piece.hi] = entry[s.name]
        if s.name in bset.absmax:
            first, last = piece.lo // fmt.BLOCK, piece.hi // fmt.BLOCK
            bset.absmax[s.name].data()[first:last] = entry[s.name + ABSMAX_SUFFIX]
    if bset.master is not None:
        bset.master.data().view(np.float32)[piece.lo : piece.hi] = entry[MASTER_KEY]
