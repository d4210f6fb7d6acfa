"""ZeRO-1's partition, as pure arithmetic: where each param group lies in one flat vector, the
contiguous shard of it each rank owns, the pieces of groups a shard holds, the padded layout the
collectives move, and which Vulkan device a rank opens. No device, no communicator.

The flat vector is the single-process layout, group after group: each group's params packed as
one optimizer packs them (``_optim.layout.plan_flat``: each param starts on 64 elements, or on
an 8-bit block of 256), so a group's length is a whole number of blocks. Shards are cut on block
boundaries and balanced to within one block; a block never spans two ranks, so 8-bit state's
block maxima, and every elementwise rule, give what one process gives.

The collectives move shards padded to the longest one: rank ``r``'s elements sit at
``r * max_shard`` of a buffer of ``world * max_shard`` (the padding is zeros), so a reduce-scatter
and an all-gather of equal parts serve uneven shards.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

#: Environment variables that name a process's rank among those of its host.
LOCAL_RANK_ENV = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID")


@dataclass(frozen=True)
class Piece:
    """The part of param group ``group`` a shard holds: its elements ``lo .. hi`` (group-local),
    at ``at`` in the shard."""

    group: int
    lo: int
    hi: int
    at: int

    @property
    def size(self) -> int:
        return self.hi - self.lo


@dataclass(frozen=True)
class Partition:
    """Groups of ``totals`` elements, one after the other, cut into ``world`` shards on
    multiples of ``block`` elements. ``shards[r]``: the flat range rank ``r`` owns."""

    totals: tuple[int, ...]
    starts: tuple[int, ...]
    shards: tuple[tuple[int, int], ...]
    block: int

    @property
    def length(self) -> int:
        return sum(self.totals)

    @property
    def world(self) -> int:
        return len(self.shards)

    @property
    def max_shard(self) -> int:
        """The longest shard: the part each rank sends and receives in the collectives."""
        return max(hi - lo for lo, hi in self.shards)

    def pieces(self, rank: int) -> list[Piece]:
        """The groups rank ``rank``'s shard holds a part of, in flat order (none for an empty shard)."""
        lo, hi = self.shards[rank]
        out = []
        for group, (start, total) in enumerate(zip(self.starts, self.totals, strict=True)):
            a, b = max(lo, start), min(hi, start + total)
            if a < b:
                out.append(Piece(group, a - start, b - start, a - lo))
        return out

    def segments(self, group: int, lo: int, hi: int) -> Iterator[tuple[int, int, int]]:
        """Where elements ``lo .. hi`` of group ``group`` sit in the padded layout of the
        collectives: ``(padded position, offset from lo, count)`` per shard they fall in."""
        a, b = self.starts[group] + lo, self.starts[group] + hi
        for rank, (s_lo, s_hi) in enumerate(self.shards):
            x, y = max(a, s_lo), min(b, s_hi)
            if x < y:
                yield rank * self.max_shard + (x - s_lo), x - a, y - x


def partition(totals: Sequence[int], world: int, block: int) -> Partition:
    """The shards of groups of ``totals`` elements (each a multiple of ``block``) over ``world``
    ranks: contiguous, in rank order, each a whole number of blocks, and the shares of blocks
    differing by at most one (the first ranks take the extra blocks)."""
    if world < 1:
        raise ValueError(f"the world size must be at least 1 (got {world})")
    if block < 1 or any(t <= 0 or t % block for t in totals):
        raise ValueError(f"every group's length must be a positive multiple of {block} (got {list(totals)})")
    starts, offset = [], 0
    for total in totals:
        starts.append(offset)
        offset += total
    base, extra = divmod(offset // block, world)
    shards, lo = [], 0
    for rank in range(world):
        hi = lo + (base + (1 if rank < extra else 0)) * block
        shards.append((lo, hi))
        lo = hi
    return Partition(tuple(totals), tuple(starts), tuple(shards), block)


def local_rank(environ: Mapping[str, str] | None = None) -> int | None:
    """This process's rank among those of its host, from the launcher's environment (torchrun's
    ``LOCAL_RANK``, Open MPI's ``OMPI_COMM_WORLD_LOCAL_RANK``, MPICH's, Slurm's), or None."""
    env = os.environ if environ is None else environ
    for name in LOCAL_RANK_ENV:
        value = env.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return None


def device_for_rank(local: int, hardware: Sequence[int], env_choice: str | None) -> int | None:
    """The Vulkan device index a rank opens, or None for vk-adam's usual choice.

    ``$VK_ADAM_DEVICE`` (``env_choice``) wins, as for any optimizer (None is returned, and the
    usual choice reads it). Otherwise, with several hardware GPUs (``hardware``: their indices),
    local rank ``k`` takes the ``k``-th, round robin; with one or none, every rank takes the usual
    choice (the GPU, else lavapipe), so ranks on one host share it."""
    if env_choice or len(hardware) < 2:
        return None
    return hardware[local % len(hardware)]
