"""NumPy params back from the device into the user's arrays: the host's side of the way back,
once the GPU is done (the GPU's side, the copies out of the device buffers, is recorded in the
step: ``to_device`` plans both).

After a synchronous step's wait, :meth:`DeviceToHost.finish` waits for the chunked uploads
submitted before the step (done once the step is), scatters the params that came back through
staging memory into the arrays, and downloads the sets copied in chunks chunk by chunk
(``staging``), scattering each chunk as it lands. After an asynchronous step, :func:`copy_back`
scatters every param of a group from its staging memory (the step downloaded it whole) when its
handle is waited for. A param the GPU wrote where it lies (an import) needs nothing here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..._runtime import Pending, Runtime
from ..buffers import Group
from ..layout import ParamSlot
from .copy_threads import PARALLEL_COPY_BYTES, copy_into
from .staging import download_in_chunks

F32 = npt.NDArray[np.float32]


def scatter(slots: Sequence[ParamSlot], flat: F32) -> None:
    """Copy ``flat`` back into each slot's host array at the slot's offset (a small one here, a
    large one over the copy threads)."""
    for slot in slots:
        assert slot.host is not None
        dst, src = slot.host.reshape(-1), flat[slot.offset : slot.offset + slot.size]
        if dst.nbytes < PARALLEL_COPY_BYTES:
            np.copyto(dst, src, casting="unsafe")
        else:
            copy_into(dst, src)


def copy_back(group: Group) -> None:
    """Copy a NumPy group's updated params from staging memory into the user's arrays (an
    asynchronous step's, once it finished)."""
    if group.host_mode:
        for k, staging in enumerate(group.param_staging):
            scatter([part for _, part in group.parts(k)], staging)


@dataclass
class DeviceToHost:
    """What a synchronous step of NumPy groups leaves the host to do once its wait returned,
    written by ``HostToDevice.stage`` before the step (every buffer set of every NumPy group)."""

    rt: Runtime
    #: (slots, the set's param staging memory they come back through): scattered
    scatters: list[tuple[list[ParamSlot], Any]] = field(default_factory=list)
    #: (param tensor, its staging memory, slots, chunks): downloaded in chunks and scattered
    chunked: list[tuple[Any, Any, list[ParamSlot], list[tuple[int, int]]]] = field(default_factory=list)
    #: the step's chunked uploads, submitted before it (``staging``): waited for
    uploading: list[Pending] = field(default_factory=list)

    def settle(self) -> None:
        """Wait for the chunked uploads submitted before the step (done once the step is)."""
        uploading, self.uploading = self.uploading, []
        for pending in uploading:
            pending.wait()

    def finish(self) -> None:
        """After a synchronous step's wait: copy what came back through staging into the arrays."""
        self.settle()
        for slots, staging in self.scatters:
            scatter(slots, staging)
        chunked, self.chunked = self.chunked, []
        for tensor, staging, slots, chunks in chunked:
            download_in_chunks(self.rt, tensor, staging, slots, chunks)

    def close(self) -> None:
        self.settle()
        self.scatters, self.chunked = [], []
