"""The one memory barrier vk-adam records between its own steps of work, defined once.

Every ordering point inside a submission (before and after a step's dispatches, between two
copies that share a buffer, around host copies) is the same full dependency: every earlier
compute or transfer write to the buffers happens before, and is visible to, every later
compute or transfer read or write of them. One mask set for all keeps the reasoning in one
place; narrower masks would save nothing measurable on the drivers tested.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def full_barrier_masks(kp: Any) -> tuple[int, int, int, int]:
    """(source access, destination access, source stages, destination stages) of the full
    compute + transfer barrier, as kp's ``OpMemoryBarrier`` takes them."""
    access, stage = kp.AccessFlagBits, kp.PipelineStageFlagBits
    writes = int(access.shader_write) | int(access.transfer_write)
    uses = writes | int(access.shader_read) | int(access.transfer_read)
    stages = int(stage.compute_shader) | int(stage.transfer)
    return writes, uses, stages, stages


def full_barrier_op(kp: Any, buffers: Sequence[Any]) -> Any:
    """A kp op ordering everything after it after every earlier compute and transfer write
    to ``buffers`` (and after earlier reads of them, for later writes). A buffer listed twice
    (a step's param is also the param its pipeline binds) gets one buffer barrier: a second,
    identical one in the same command would be recorded, and replayed, for nothing."""
    src_access, dst_access, src_stage, dst_stage = full_barrier_masks(kp)
    unique = list({id(b): b for b in buffers}.values())
    return kp.OpMemoryBarrier(unique, src_access, dst_access, src_stage, dst_stage)


__all__ = ["full_barrier_masks", "full_barrier_op"]
