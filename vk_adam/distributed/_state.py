"""The state dict of a ZeRO-1 optimizer: consolidated on one rank in the layout of one process's
optimizer, and loaded at any world size by each rank taking its shard of it.

A base class of :class:`ZeroRedundancyOptimizer`, as ``_optim.access`` is of ``Optimizer``:
both directions go through a :class:`_mirror.StateMirror` of the whole state, which
``_optim.state_dict`` reads and checks exactly as it reads and checks one process's optimizer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._optim import Optimizer
from .._optim.sharding import Group, GroupFormat, Storage, read_state_dict, write_state_dict
from .._rules import UpdateRule
from ._comm import Communicator, agree
from ._mirror import StateMirror, build_mirror, fill_from_entry, shard_entry
from ._plan import Unit
from ._staging import ShardStaging


class ShardedStateDict:
    """``consolidate_state_dict``, ``state_dict`` and ``load_state_dict`` over the shards."""

    rule: UpdateRule
    zeroes_grad: bool
    world_size: int
    _comm: Communicator
    _groups: list[Group]
    _units: list[Unit]
    _formats: list[GroupFormat]
    _storage: Storage
    _staging: ShardStaging
    _inner: Optimizer | None
    _consolidated: StateMirror | None

    def _check_open(self) -> None:
        raise NotImplementedError

    def _mirror(self) -> StateMirror:
        return build_mirror(
            self.rule,
            self._groups,
            self._units,
            self._formats,
            self._storage,
            self.zeroes_grad,
            self._storage.seed,
        )

    def consolidate_state_dict(self, to: int = 0) -> None:
        """Gather every rank's shard of the state on rank ``to``, whose :meth:`state_dict` then
        returns the whole of it (until the next step). Collective: every rank calls it, with the
        same ``to``."""
        error: BaseException | None = None
        entries: list[Any] = []
        try:
            self._check_open()
            if isinstance(to, bool) or not isinstance(to, int) or not 0 <= to < self.world_size:
                raise ValueError(f"to must be a rank from 0 to {self.world_size - 1} (got {to!r})")
            if self._inner is not None:
                state = self._inner.state_dict()["state"]
                entries = [(p, state.get(j)) for j, p in enumerate(self._staging.pieces)]
        except Exception as exc:
            error = exc
        agree(self._comm, error, "consolidate_state_dict()", float(to) if isinstance(to, int) else -1.0)
        gathered = self._comm.gather_object(entries, to)
        self._consolidated = None
        if gathered is not None:
            mirror = self._mirror()
            for rank_entries in gathered:
                for piece, entry in rank_entries:
                    if entry is not None:
                        fill_from_entry(mirror, piece, entry)
            self._consolidated = mirror

    def state_dict(self, *, float32: bool = False) -> dict[str, Any]:
        """On the rank :meth:`consolidate_state_dict` gathered to: the whole state in the
        layout of one process's optimizer (``vk_adam.Optimizer.state_dict``, with ``float32``
        as there), which any world size loads. Elsewhere, or before consolidation, RuntimeError."""
        self._check_open()
        if self._consolidated is None:
            raise RuntimeError(
                "the state is sharded: call consolidate_state_dict(to=rank) on every rank first "
                "(after the last step), then state_dict() on that rank"
            )
        return read_state_dict(self._consolidated, float32=float32)

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Load a state dict in one process's layout (:meth:`state_dict`, or a
        ``vk_adam.Optimizer``'s), saved at any world size: each rank takes its shard of it.
        Collective: every rank passes the same state dict. It is checked on every rank first
        (the checks and messages of ``vk_adam.Optimizer.load_state_dict``); if any rank refuses
        it, every rank raises and nothing changes."""
        error: BaseException | None = None
        mirror = None
        try:
            self._check_open()
            mirror = self._mirror()
            write_state_dict(mirror, state_dict, lambda: None)
        except Exception as exc:
            error = exc
        agree(self._comm, error, "load_state_dict()")
        assert mirror is not None
        for group, loaded in zip(self._groups, mirror.groups, strict=True):
            group.options.update({k: v for k, v in loaded.options.items() if k != "params"})
            group.step = loaded.step
        self._consolidated = None
        st = self._storage
        self._storage = Storage(st.state_dtype, st.stochastic_rounding, mirror.seed)
        if self._inner is None:
            return
        self._staging.refresh_pieces()  # a master copy not in the state dict starts at the params
        pieces = self._staging.pieces
        owners = [self._units[p.group].group for p in pieces]
        state = {j: shard_entry(mirror, p) for j, p in enumerate(pieces) if mirror.groups[owners[j]].step}
        hyper = [{k: self._groups[g].options[k] for k in self.rule.defaults} for g in owners]
        groups = [{**h, "params": [j], "seed": mirror.seed} for j, h in enumerate(hyper)]
        self._inner.load_state_dict({"state": state, "param_groups": groups})
