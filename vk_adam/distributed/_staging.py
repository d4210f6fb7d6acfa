"""The host buffers of one rank's ZeRO-1 step, and the copies between them and the params:
pure NumPy, no device and no communicator.

Each entry of ``slots`` is one buffer set of the flat vector (``_plan.Unit``): a NumPy group's
params, or one kp tensor, whose slot has no host array (``host`` None). Those a device copies
itself, straight into and out of these buffers (``_device``), which ``alloc`` then makes (host
memory the device reads and writes in place); the copies here skip them.

* ``grad_send`` (float32, ``world * max_shard``): every gradient, in the padded layout of the
  collectives (``_shard``), what the reduce-scatter reads; ``grad_recv``: this rank's shard of
  the mean (the communicator's reduce-scatter divides).
* ``pieces``: this rank's shard of the params, one array per piece of a param group, the params
  of the rank's own optimizer (refreshed from the rank's params before each step, so an edit
  of the params between steps is taken, as one process takes it); views of ``param_send``
  when every group has one width.
* ``param_send`` / ``param_recv``: the updated shard and every rank's, what the all-gather
  moves: the params' own bits when every group has one width (uint32 or uint16 words), else
  float32 values (16-bit values widen and narrow back exactly).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import _formats as fmt
from .._optim.sharding import ParamSlot
from ._shard import Partition

Array = npt.NDArray[Any]


class ShardStaging:
    """One rank's step buffers for buffer sets of ``slots`` (their host arrays are the params;
    None for a kp tensor), ``dtypes`` (each one's param dtype name) under ``partition``.
    ``alloc(count, dtype)``: a zeroed array; the gradients and params that collectives move, and
    the pieces of this rank's shard, are made by it."""

    def __init__(
        self,
        partition: Partition,
        rank: int,
        slots: Sequence[Sequence[ParamSlot]],
        dtypes: Sequence[str],
        alloc: Callable[[int, Any], Array] = np.zeros,
    ):
        self.partition, self.rank, self.slots = partition, rank, slots
        self.pieces = partition.pieces(rank)
        size, world = partition.max_shard, partition.world
        self.grad_send = alloc(size * world, np.float32)  # padding stays zero
        self.grad_recv = np.zeros(size, np.float32)
        widths = {np.dtype(fmt.NUMPY_DTYPES[d]).itemsize for d in dtypes}
        self.raw: Any = {4: np.uint32, 2: np.uint16}[widths.pop()] if len(widths) == 1 else None
        wire = self.raw or np.float32
        self.param_send = alloc(size, wire)
        self.param_recv = alloc(size * world, wire)
        # With one width the pieces are views of param_send: the updated shard is sent in place.
        self.piece_params: list[Array] = [
            self.param_send[p.at : p.at + p.size].view(fmt.NUMPY_DTYPES[dtypes[p.group]])
            if self.raw
            else alloc(p.size, fmt.NUMPY_DTYPES[dtypes[p.group]])
            for p in self.pieces
        ]
        self._grad_views = [self.grad_recv[p.at : p.at + p.size] for p in self.pieces]

    def stage_grads(self, grads: Sequence[Sequence[Any]]) -> None:
        """Every host gradient (per buffer set, per param) into ``grad_send``, as float32; others
        (kp tensors) are the device's to copy."""
        part, buffer = self.partition, self.grad_send
        for gi, group in enumerate(self.slots):
            for slot, grad in zip(group, grads[gi], strict=True):
                if not isinstance(grad, np.ndarray):
                    continue
                flat = grad.reshape(-1)
                for at, offset, count in part.segments(gi, slot.offset, slot.offset + slot.size):
                    buffer[at : at + count] = flat[offset : offset + count]

    def shard_grads(self) -> list[Array]:
        """Each piece's mean gradient, in its params' dtype: float32 pieces get the same views of
        ``grad_recv`` every step (so the shard's optimizer can keep a host import of them)."""
        return [
            view if a.dtype == np.float32 else view.astype(a.dtype)
            for view, a in zip(self._grad_views, self.piece_params, strict=True)
        ]

    def refresh_pieces(self) -> None:
        """This rank's params (its own host copies) into the pieces."""
        for piece, array in zip(self.pieces, self.piece_params, strict=True):
            for slot in self.slots[piece.group]:
                a, b = max(piece.lo, slot.offset), min(piece.hi, slot.offset + slot.size)
                if a < b and slot.host is not None:
                    source = slot.host.reshape(-1)
                    array[a - piece.lo : b - piece.lo] = source[a - slot.offset : b - slot.offset]

    def fill_param_send(self) -> None:
        """The pieces (updated) into ``param_send`` (where they are not views of it)."""
        if self.raw:
            return
        for piece, array in zip(self.pieces, self.piece_params, strict=True):
            values = array.view(self.raw) if self.raw else array
            self.param_send[piece.at : piece.at + piece.size] = values

    def scatter_params(self) -> None:
        """Every rank's updated shard (``param_recv``) into this rank's host params."""
        recv = self.param_recv
        for gi, group in enumerate(self.slots):
            for slot in group:
                if slot.host is None:
                    continue
                flat = slot.host.reshape(-1)
                flat = flat.view(self.raw) if self.raw else flat
                for at, offset, count in self.partition.segments(gi, slot.offset, slot.offset + slot.size):
                    flat[offset : offset + count] = recv[at : at + count]
