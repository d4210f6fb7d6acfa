"""Host memory that a device reads and writes directly, for collectives over device buffers
(``vk_adam.distributed``'s ZeRO-1 over kp tensors): the host arrays themselves, and the GPU copies
between them and an application's device buffers.

Two ways, chosen per device:

* **host import** (``VK_EXT_external_memory_host``): the arrays are ordinary NumPy memory,
  page-aligned, each imported once as a storage buffer over its whole pages;
* **mapped staging** (any device): the arrays are the mapped memory of host-visible kp tensors
  (``TensorTypes.host``); no device-local memory is allocated for them.

Either way a copy is one ``vkCmdCopyBuffer`` of byte regions per device buffer, straight between
the array's memory and the device buffer, and a collective reads and writes the same memory in
place: one transfer each way, no NumPy temporary. Both need vk-adam's patched kp (region copies).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ._kp import kp_features, kp_module
from .barriers import full_barrier_op
from .external import copy_regions_op, host_read_barrier_op, import_host_range, sharing
from .sequences import rerecord

Array = npt.NDArray[Any]
#: (source byte offset, destination byte offset, bytes)
Region = tuple[int, int, int]
#: Bytes of the zero source that clears gradient buffers (copied as many times as needed).
ZERO_CHUNK_BYTES = 1 << 22
#: Alignment of arrays when the device reports none (mapped staging).
PAGE = 4096


def region_copies_available() -> bool:
    """Whether the imported kp copies byte regions between buffers (vk-adam's patched kp)."""
    return "region copies" in kp_features().patches


def check_float32(tensor: Any, what: str) -> None:
    """A kp tensor with host-visible memory must hold float32 (a storage tensor cannot tell)."""
    kp = kp_module()
    if tensor.tensor_type() != kp.TensorTypes.storage and tensor.data().dtype != np.float32:
        raise TypeError(f"{what} is a {tensor.data().dtype} kp tensor; vk-adam needs float32")


class DeviceStaging:
    """Host arrays on one ``kp.Manager``'s device that its copies read and write in place.

    ``host_import``: import NumPy memory where the device can (else, or with False, mapped
    staging). Arrays come from :meth:`zeros`; :meth:`to_host_ops` and :meth:`to_device_ops`
    build the copies of one submission each way, bracketed by memory barriers; :meth:`run`
    submits them and waits, :meth:`start` does not."""

    def __init__(self, manager: Any, *, host_import: bool = True) -> None:
        if not region_copies_available():
            raise TypeError(
                "ZeRO-1 over device buffers (kp tensors) copies byte ranges between them and host "
                "memory, which needs vk-adam's patched kp (region copies); this kp is stock. "
                "Install the kp wheel built with vk-adam, or pass NumPy params"
            )
        self._kp, self._manager = kp_module(), manager
        found = sharing(manager)
        self.imports = bool(host_import and found is not None and found.host_import)
        self._alignment = max(found.min_host_alignment if found is not None else 0, PAGE)
        # (array, the tensor over its memory, the array's first byte in it) per array made
        self._made: list[tuple[Array, Any, int]] = []
        self._tensors: list[Any] = []
        self._zero: Any = None
        self._zero_bytes = 0
        self._sequence: Any = None
        self._started: Any = None  # start()'s sequence, and whether it runs
        self._running = False

    @property
    def how(self) -> str:
        """How the arrays reach the device, in words."""
        return "host memory import" if self.imports else "mapped staging (host-visible kp tensors)"

    def zeros(self, count: int, dtype: Any) -> Array:
        """A zeroed host array of ``count`` elements that the device reads and writes in place."""
        dtype = np.dtype(dtype)
        nbytes = count * dtype.itemsize
        if nbytes == 0:
            return np.zeros(0, dtype)
        span = -(-nbytes // self._alignment) * self._alignment
        array: Array
        if self.imports:
            raw = np.zeros(span + self._alignment, np.uint8)
            start = -int(raw.ctypes.data) % self._alignment
            array = raw[start : start + nbytes].view(dtype)
            tensor, offset = import_host_range(self._manager, int(array.ctypes.data), span, self._alignment)
        else:
            tensor = self._manager.tensor(np.zeros(span // 4, np.float32), self._kp.TensorTypes.host)
            mapped: Array = tensor.data()
            array, offset = mapped.view(np.uint8)[:nbytes].view(dtype), 0
        self._tensors.append(tensor)
        self._made.append((array, tensor, offset))
        return array

    def _locate(self, array: Array) -> tuple[Any, int]:
        """The tensor over ``array`` (one made by :meth:`zeros`, or a view into one) and the
        array's first byte in it."""
        address = int(array.ctypes.data)
        for made, tensor, offset in self._made:
            start = int(made.ctypes.data)
            if start <= address and address + array.nbytes <= start + made.nbytes:
                return tensor, offset + address - start
        raise AssertionError("an array made by zeros(), or a view of one")

    def _barrier(self, tensors: Sequence[Any]) -> Any:
        """Everything after it after every earlier compute and transfer write to ``tensors``
        (and after earlier reads, for later writes)."""
        return full_barrier_op(self._kp, tensors)

    def to_host_ops(self, copies: Sequence[tuple[Any, Array, list[Region]]]) -> list[Any]:
        """One submission's ops: each ``(device tensor, host array, regions)`` copies byte regions
        (source offsets in the tensor, destination offsets in the array) into the array; the host
        may read the arrays once the submission is waited for."""
        copies = [c for c in copies if c[2]]
        if not copies:
            return []
        hosts: list[Any] = []
        ops: list[Any] = []
        for tensor, array, regions in copies:
            host, offset = self._locate(array)
            ops.append(copy_regions_op(tensor, host, [(s, offset + d, n) for s, d, n in regions]))
            if host not in hosts:
                hosts.append(host)
        sources = list({id(c[0]): c[0] for c in copies}.values())
        return [self._barrier([*sources, *hosts]), *ops, host_read_barrier_op(hosts)]

    def to_device_ops(
        self, copies: Sequence[tuple[Array, Any, list[Region]]], clear: Sequence[tuple[Any, int]] = ()
    ) -> list[Any]:
        """One submission's ops: each ``(host array, device tensor, regions)`` copies byte regions
        (source offsets in the array) into the tensor; each ``(tensor, bytes)`` of ``clear`` is
        zeroed from its start. Bracketed by barriers, so the application's later work sees it."""
        copies = [c for c in copies if c[2]]
        ops: list[Any] = []
        hosts: list[Any] = []
        targets: dict[int, Any] = {}
        for array, tensor, regions in copies:
            host, offset = self._locate(array)
            ops.append(copy_regions_op(host, tensor, [(offset + s, d, n) for s, d, n in regions]))
            hosts.append(host)
            targets[id(tensor)] = tensor
        clear = [c for c in clear if c[1] > 0]
        if clear:
            zero = self._zero_source(max(n for _, n in clear))
            for tensor, nbytes in clear:
                ops.append(copy_regions_op(zero, tensor, _chunks(nbytes, self._zero_bytes)))
                targets[id(tensor)] = tensor
        if not ops:
            return []
        devices = list(targets.values())
        return [self._barrier([*devices, *dict.fromkeys(hosts)]), *ops, self._barrier(devices)]

    def _zero_source(self, nbytes: int) -> Any:
        """A device buffer of zeros of ``nbytes`` (at most ``ZERO_CHUNK_BYTES``: larger buffers
        are cleared a chunk at a time), made and uploaded when first needed."""
        wanted = min(-(-nbytes // 4) * 4, ZERO_CHUNK_BYTES)
        if self._zero is None or self._zero_bytes < wanted:
            if self._zero is not None:  # only ever between steps: no submitted work uses it
                self._tensors.remove(self._zero)
                self._zero.destroy()
            self._zero = self._manager.tensor(np.zeros(wanted // 4, np.float32))
            self._zero_bytes = wanted
            self._tensors.append(self._zero)
            self.run([self._kp.OpTensorSyncDevice([self._zero])])
        return self._zero

    def run(self, ops: Sequence[Any]) -> None:
        """Record ``ops`` into one command buffer, submit it and wait."""
        if ops:
            self._sequence = rerecord(self._manager, self._sequence, ops)
            self._sequence.eval()

    def start(self, ops: Sequence[Any]) -> None:
        """Record ``ops`` into a command buffer of their own and submit it, without waiting:
        :meth:`wait` waits (one such submission at a time)."""
        self.wait()
        if ops:
            self._started = rerecord(self._manager, self._started, ops)
            self._started.eval_async()
            self._running = True

    def wait(self) -> None:
        """Wait for the submission :meth:`start` made, if it is still running."""
        if self._running:
            self._running = False
            self._started.eval_await()

    def close(self) -> None:
        """Free the imports and host tensors (the caller waited for the device, except for a
        :meth:`start`, waited for here)."""
        self.wait()
        tensors, self._tensors, self._made, self._zero = self._tensors, [], [], None
        sequence, self._sequence = self._sequence, None
        started, self._started = self._started, None
        for made in (sequence, started):
            if made is not None:
                made.destroy()
        for tensor in tensors:
            tensor.destroy()


def _chunks(nbytes: int, chunk: int) -> list[Region]:
    """Regions that write bytes ``0 .. nbytes`` from a source of ``chunk`` bytes (its start)."""
    return [(0, at, min(chunk, nbytes - at)) for at in range(0, nbytes, chunk)]


__all__ = ["DeviceStaging", "check_float32", "region_copies_available"]
