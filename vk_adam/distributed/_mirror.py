"""The whole optimizer state on the host, laid out as one process holds it: what
``consolidate_state_dict`` assembles from every rank's shard, and what ``load_state_dict``
checks a state dict against before each rank takes its shard of it.

A :class:`StateMirror` has the single-process optimizer's groups and buffer sets, with host
arrays (:class:`HostWords`) in place of device buffers, so ``_optim.state_dict`` reads and
writes it exactly as it reads and writes an optimizer: one layout, one set of checks and
messages. A shard's state moves in and out of it as slices of each state buffer (elements of
fp32, bf16 or 8-bit codes, whole blocks of absmax, and the fp32 master copy of 16-bit params).
A piece belongs to one buffer set (``_plan.Unit``): a NumPy group's, or one kp tensor's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import _formats as fmt
from .._optim import ABSMAX_SUFFIX, MASTER_KEY
from .._optim.sharding import BufferSet, Group, GroupFormat, Storage, initial_state, value_words
from .._rules import UpdateRule
from .._runtime import host_view
from ._plan import Unit
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
    """The runtime of a mirror: its buffers are host arrays, read and written in place."""

    def host_words(self, tensors: Sequence[Any]) -> list[Array]:
        return [host_view(t) for t in tensors]

    def write_words(self, writes: Sequence[tuple[Any, Any, int, Array]]) -> None:
        for tensor, dtype, offset, value in writes:
            host_view(tensor).view(dtype)[offset : offset + value.size] = value


@dataclass
class StateMirror:
    """The whole state on the host (an ``_optim.state_dict.StateHolder``)."""

    rule: UpdateRule
    groups: list[Group]
    storage: Storage
    zero_grad: bool
    seed: int
    #: per buffer set of the flat vector (``Piece.group``): its (group, buffer set in the group)
    where: list[tuple[int, int]] = field(default_factory=list)
    rt: NoDevice = field(default_factory=NoDevice)

    def buffer_set(self, piece: Piece) -> tuple[Group, BufferSet]:
        """The group and buffer set ``piece`` is a part of."""
        group, index = self.where[piece.group]
        return self.groups[group], self.groups[group].sets[index]


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
    units: Sequence[Unit],
    formats: Sequence[GroupFormat],
    storage: Storage,
    zero_grad: bool,
    seed: int,
) -> StateMirror:
    """A mirror of ``groups`` (their options and step counts copied, so a failed load changes
    nothing), one buffer set per unit, with every state buffer at its initial value and the
    master copy of 16-bit params at the params' current values."""
    mirror_groups = []
    for group in groups:
        copy = Group(dict(group.options), group.variant, group.spec, group.slots, [], True, group.step)
        copy.param_dtype = group.param_dtype
        mirror_groups.append(copy)
    for index, (unit, form) in enumerate(zip(units, formats, strict=True)):
        total = unit.total
        bset = BufferSet(None, None, {}, total, index, form)
        for s, code in zip(groups[unit.group].variant.state, form.state, strict=True):
            words, absmax = initial_state(code, s, total)
            bset.state[s.name] = HostWords(words)
            if absmax is not None:
                bset.absmax[s.name] = HostWords(absmax)
        if form.has_master:  # 16-bit params: NumPy, with host arrays
            flat = np.zeros(total, np.float32)
            for slot in unit.slots:
                flat[slot.offset : slot.offset + slot.size] = np.asarray(slot.host, np.float32).reshape(-1)
            bset.master = HostWords(value_words(flat, "float32"))
        mirror_groups[unit.group].sets.append(bset)
    where = [(u.group, u.index) for u in units]
    return StateMirror(rule, mirror_groups, storage, zero_grad, seed, where)


def shard_entry(mirror: StateMirror, piece: Piece) -> dict[str, Any]:
    """A piece's state as the state-dict entry of a param holding exactly those elements
    (what the rank's own optimizer loads), copied out of the mirror."""
    group, bset = mirror.buffer_set(piece)
    entry: dict[str, Any] = {"step": float(group.step)}
    for s, code in zip(group.variant.state, bset.format.state, strict=True):
        entry[s.name] = element_view(host_view(bset.state[s.name]), code)[piece.lo : piece.hi].copy()
        if s.name in bset.absmax:
            first, last = piece.lo // fmt.BLOCK, piece.hi // fmt.BLOCK
            entry[s.name + ABSMAX_SUFFIX] = host_view(bset.absmax[s.name])[first:last].copy()
    if bset.master is not None:
        entry[MASTER_KEY] = host_view(bset.master).view(np.float32)[piece.lo : piece.hi].copy()
    return entry


def fill_from_entry(mirror: StateMirror, piece: Piece, entry: Mapping[str, Any]) -> None:
    """Copy a rank's state-dict entry for ``piece`` (from :func:`shard_entry`'s layout, as the
    rank's own optimizer saves it) into the mirror."""
    group, bset = mirror.buffer_set(piece)
    for s, code in zip(group.variant.state, bset.format.state, strict=True):
        element_view(host_view(bset.state[s.name]), code)[piece.lo : piece.hi] = entry[s.name]
        if s.name in bset.absmax:
            first, last = piece.lo // fmt.BLOCK, piece.hi // fmt.BLOCK
            host_view(bset.absmax[s.name])[first:last] = entry[s.name + ABSMAX_SUFFIX]
    if bset.master is not None:
        host_view(bset.master).view(np.float32)[piece.lo : piece.hi] = entry[MASTER_KEY]
