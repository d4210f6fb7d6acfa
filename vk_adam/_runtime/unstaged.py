"""Buffers with no host staging copy: kp storage tensors, device-local memory only.

A kp device tensor keeps a host-visible staging copy as large as itself, for its whole life. The
optimizer's state (and the fp32 master copy of 16-bit params) never needs one between steps: it
is filled once, and read or written only by checkpoints. So it lives in storage tensors, and
those rare transfers go through one transient host-visible buffer of at most
:data:`CHUNK_BYTES`, a chunk at a time. That halves what a large optimizer holds in host memory.

A chunk is one ``vkCmdCopyBuffer`` of byte regions (vk-adam's patched kp, "region copies"),
bracketed by memory barriers. Chunks that repeat the one before (a state buffer's initial value)
are copied from the same staged bytes in one submission.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .barriers import full_barrier_op
from .external import copy_regions_op, host_read_barrier_op

Array = npt.NDArray[Any]
#: The most bytes one transfer through host memory moves (the transient buffer's size).
CHUNK_BYTES = 1 << 26
#: One write: (buffer, its first byte written, the bytes).
Write = tuple[Any, int, npt.NDArray[np.uint8]]


#: Records ops into one submission and waits (the runtime's ``run``; passed to each call, not
#: held, so that the runtime that holds this object is freed without the cycle collector).
Run = Callable[[Sequence[Any]], object]


class DeviceOnly:
    """Makes device-only buffers on ``manager`` and moves bytes between them and the host."""

    def __init__(self, manager: Any, kp: Any) -> None:
        self._manager, self._kp = manager, kp
        # each buffer's words (kp 0.9.0's binding cannot report a tensor's data type)
        self._dtypes: dict[int, np.dtype[Any]] = {}

    def holds(self, tensor: Any) -> bool:
        """Whether ``tensor`` is a buffer :meth:`make` made (and :meth:`forget` did not drop)."""
        return id(tensor) in self._dtypes

    def forget(self, tensor: Any) -> None:
        self._dtypes.pop(id(tensor), None)

    def make(self, flat: Array, run: Run) -> Any:
        """A storage tensor holding ``flat`` (float32 or uint32 words)."""
        # np.zeros: pages the kernel maps only when touched; a storage tensor copies nothing.
        kind = self._kp.TensorTypes.storage
        tensor = self._manager.tensor_t(np.zeros(flat.size, flat.dtype), tensor_type=kind)
        try:
            self.write([(tensor, 0, flat.reshape(-1).view(np.uint8))], run)
        except BaseException:
            tensor.destroy()
            raise
        self._dtypes[id(tensor)] = flat.dtype
        return tensor

    def _staging(self, nbytes: int) -> Any:
        words = -(-min(nbytes, CHUNK_BYTES) // 4)
        return self._manager.tensor_t(np.zeros(words, np.uint32), tensor_type=self._kp.TensorTypes.host)

    def write(self, writes: Sequence[Write], run: Run) -> None:
        """Copy each write's bytes into its buffer at its byte offset."""
        total = max((w[2].size for w in writes), default=0)
        if not total:
            return
        staging = self._staging(total)
        try:
            room = staging.data().view(np.uint8)
            for tensor, offset, data in writes:
                staged = -1  # bytes of the chunk staged now (-1: none)
                regions: list[tuple[int, int, int]] = []
                for at in range(0, data.size, CHUNK_BYTES):
                    chunk = data[at : at + CHUNK_BYTES]
                    if staged != chunk.size or not np.array_equal(room[: chunk.size], chunk):
                        self._flush(staging, tensor, regions, run)
                        room[: chunk.size] = chunk
                        staged = chunk.size
                    regions.append((0, offset + at, chunk.size))
                self._flush(staging, tensor, regions, run)
        finally:
            staging.destroy()

    def _flush(self, staging: Any, tensor: Any, regions: list[tuple[int, int, int]], run: Run) -> None:
        if regions:
            barrier = full_barrier_op(self._kp, [tensor])
            run([barrier, copy_regions_op(staging, tensor, regions), barrier])
            regions.clear()

    def read(self, tensor: Any, run: Run) -> Array:
        """A copy of the words of ``tensor`` (a buffer :meth:`make` made), in a new array."""
        dtype = self._dtypes[id(tensor)]
        out = np.empty(int(tensor.size()), dtype)
        nbytes = out.nbytes
        flat = out.view(np.uint8)
        staging = self._staging(nbytes)
        try:
            room = staging.data().view(np.uint8)
            for at in range(0, nbytes, CHUNK_BYTES):
                size = min(CHUNK_BYTES, nbytes - at)
                run(
                    [
                        full_barrier_op(self._kp, [tensor]),
                        copy_regions_op(tensor, staging, [(at, 0, size)]),
                        host_read_barrier_op([staging]),
                    ]
                )
                flat[at : at + size] = room[:size]
        finally:
            staging.destroy()
        return out
