"""ZeRO-1 over device buffers: the kp tensor params of one rank (an application's own buffers on
its ``kp.Manager``, or a LoRA adapter's flat buffer), and the GPU copies that move them.

The collectives and the shard's update stay on the host path (``_staging``, ``_zero``); what
changes is how the device buffers reach it. The host buffers the collectives run on (every
gradient in the reduce-scatter's layout, every rank's updated params in the all-gather's) and the
pieces of this rank's shard are host memory that the GPU reads and writes directly
(``_runtime.collective_memory``: imported, else mapped), made once. A step then takes:

* before the reduce-scatter: each device gradient (a kp tensor passed to ``step``, or the
  buffer :meth:`grad_buffer` gave) copied by byte ranges into the gradient buffer, and this
  rank's shard of each device param into its piece, in two submissions: the other ranks'
  parts of the gradients first; the rest runs while the reduce-scatter's messages move;
* one submission after the all-gather: every rank's updated shard copied from the gathered
  buffer into each device param, and the device gradients read cleared (``zero_grad``, as one
  process's step clears them).

No NumPy copy of a device buffer is made on the way.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .._inputs import env_int
from .._optim import HOST_IMPORT_ENV
from .._runtime import (
    DeviceStaging,
    Region,
    Runtime,
    check_float32,
    check_one_allocation,
    device_limits,
    element_count,
    refuse_unwritten,
)
from ._plan import Unit
from ._shard import Partition
from ._staging import ShardStaging

Array = npt.NDArray[Any]


def adapter_params(params: Any, manager: Any) -> Any:
    """A ``vk_adam.lora.LoRAAdapter`` as the params it stands for, as ``adapter.optimizer``
    takes it: with ``manager``, its weights moved to that device (``adapter.device_params``,
    from ``flat_params``), else its host buffer ``flat_params``. Anything else as it is."""
    lora = sys.modules.get("vk_adam.lora.adapter")  # an adapter exists only if this was imported
    if lora is None or not isinstance(params, lora.LoRAAdapter):
        return params
    if manager is None:
        return [params.flat_params]
    # as LoRAAdapter.optimizer(manager=) places it: pull_params() and PEFT saves then read it back
    return [params.to_device(manager)]


def make_staging(
    units: Sequence[Unit], partition: Partition, rank: int, manager: Any
) -> tuple[ShardStaging, DeviceParams | None]:
    """A rank's step buffers; with device params (kp tensor units), host memory the device
    reads and writes in place (imported unless ``$VK_ADAM_HOST_IMPORT`` is 0, else mapped),
    and the device side that copies to and from it."""
    slots, dtypes = [u.slots for u in units], [u.dtype for u in units]
    if all(u.tensor is None for u in units):
        return ShardStaging(partition, rank, slots, dtypes), None
    check_collective_buffer(manager, partition, "on kp tensor params")
    device = DeviceParams(manager, units, host_import=env_int(HOST_IMPORT_ENV, 1, (0, 1)) == 1)
    try:
        staging = ShardStaging(partition, rank, slots, dtypes, device.alloc)
        device.bind(staging, partition)
    except BaseException:
        device.close()
        raise
    return staging, device


def check_collective_buffer(manager: Any, partition: Partition, how: str) -> None:
    """Device paths hold every rank's gradients (``world * max_shard`` float32) in one buffer
    the device reads: refuse, by name, one larger than the device allocates at once."""
    check_one_allocation(
        device_limits(manager),
        4 * partition.max_shard * partition.world,
        f"ZeRO-1 {how} keeps every rank's gradients in one device buffer",
        "pass the params as NumPy arrays (their shards step in pieces of one allocation each), "
        "or fewer elements in all",
    )


def taken_grad_buffers(device: DeviceParams | None, count: int) -> list[Any]:
    """What ``step()`` without grads reads: the gradient buffer of every param (``count`` buffer
    sets, all kp tensors), each taken with ``grad_buffer()``; else the error."""
    if device is None or len(device.units) != count:
        raise ValueError(
            "step() without grads on NumPy params: pass this rank's gradients, step(grads), one per "
            "param in param order (ZeRO-1 keeps no device gradient buffer for NumPy params)"
        )
    missing = next((u for i, u in device.units.items() if not device.taken(i)), None)
    if missing is not None:
        raise ValueError(
            f"step() without grads reads opt.grad_buffer({missing.group}, {missing.index}), which "
            "was never taken: take it and write the gradients there on the device, or pass step(grads)"
        )
    return [device.grad_buffer(i) for i in device.units]


class DeviceParams:
    """The device units (kp tensors) of a ZeRO-1 optimizer on ``manager``, and their copies to
    and from the host buffers of ``staging`` (made by :attr:`alloc`, so call :meth:`bind` once
    the staging exists). ``host_import``: import host memory where the device can."""

    def __init__(
        self, manager: Any, units: Sequence[Unit], *, host_import: bool, how: str | None = None
    ) -> None:
        self.manager = manager
        self._how = how
        self.units = {i: u for i, u in enumerate(units) if u.tensor is not None}
        for unit in self.units.values():
            check_float32(unit.tensor, f"param {unit.index} of group {unit.group}")
        self._copies = DeviceStaging(manager, host_import=host_import)
        self.alloc = self._copies.zeros
        self._rt: Runtime | None = None  # the gradient buffers' runtime, when one is taken
        self._grad_buffers: dict[int, Any] = {}
        self._params_in: list[tuple[Any, Array, list[Region]]] = []
        self._grads_in: dict[int, tuple[Array, list[Region]]] = {}
        self._params_out: list[tuple[Array, Any, list[Region]]] = []
        # (the gradients it reads, its ops for the other ranks' parts, the rest of its ops),
        # built when the gradient tensors change
        self._pull: tuple[list[Any], list[Any], list[Any]] | None = None
        self._own = (0, 0)  # this rank's part of the gradient buffer, in bytes
        self._push: tuple[bool, list[Any]] | None = None  # (clears them?, its ops)

    @property
    def how(self) -> str:
        return self._how or self._copies.how

    def bind(self, staging: ShardStaging, partition: Partition) -> None:
        """The byte ranges of each device unit in ``staging``'s buffers (fixed for good)."""
        wire = staging.param_recv.dtype.itemsize
        assert wire == 4, "device params are float32: the all-gather moves 4-byte words"
        part = 4 * partition.max_shard
        self._own = (staging.rank * part, staging.rank * part + part)
        for piece, array in zip(staging.pieces, staging.piece_params, strict=True):
            unit = self.units.get(piece.group)
            if unit is not None and piece.lo < unit.n:  # the padding past n stays zero
                count = min(piece.hi, unit.n) - piece.lo
                self._params_in.append((unit.tensor, array, [(4 * piece.lo, 0, 4 * count)]))
        for i, unit in self.units.items():
            segments = list(partition.segments(i, 0, unit.n))
            self._grads_in[i] = (staging.grad_send, [(4 * o, 4 * at, 4 * c) for at, o, c in segments])
            out = [(wire * at, 4 * o, 4 * c) for at, o, c in segments]
            self._params_out.append((staging.param_recv, unit.tensor, out))

    # -- the gradients ---------------------------------------------------------------------------

    def grad_buffer(self, unit: int) -> Any:
        """The device gradient buffer of unit ``unit`` (made, zeroed, when first asked for)."""
        buffer = self._grad_buffers.get(unit)
        if buffer is None:
            if self._rt is None:
                self._rt = Runtime(manager=self.manager)
            buffer = self._rt.buffer(np.zeros(self.units[unit].n, np.float32))
            self._rt.run([self._rt.upload_op([buffer])])
            self._grad_buffers[unit] = buffer
        return buffer

    def taken(self, unit: int) -> bool:
        return unit in self._grad_buffers

    def refuse_unwritten(self) -> None:
        """A param never written on the device is refused, as one process refuses it."""
        for unit in self.units.values():
            refuse_unwritten(unit.tensor, f"param {unit.index} of group {unit.group}")

    # -- one submission each way --------------------------------------------------------------------

    def pull(self, grads: Sequence[Sequence[Any]]) -> None:
        """Copy each device gradient (``grads``: per unit, kp tensors or NumPy arrays, which the
        host stages) into the gradient buffer and this rank's shard of every device param into
        its piece, in two submissions: the other ranks' parts of the gradients first, waited
        for (the reduce-scatter sends them); then the rest, not waited for: :meth:`pulled`
        waits (the reduce-scatter before it reads this rank's own part), so that copy runs
        under the messages."""
        tensors = [None if isinstance(grads[i][0], np.ndarray) else grads[i][0] for i in self.units]
        if self._pull is None or any(a is not b for a, b in zip(self._pull[0], tensors, strict=True)):
            lo, hi = self._own
            theirs, rest = [], list(self._params_in)
            for i, tensor in zip(self.units, tensors, strict=True):
                if tensor is not None:
                    array, regions = self._grads_in[i]
                    theirs.append((tensor, array, [r for r in regions if not lo <= r[1] < hi]))
                    rest.append((tensor, array, [r for r in regions if lo <= r[1] < hi]))
            self._pull = (tensors, self._copies.to_host_ops(theirs), self._copies.to_host_ops(rest))
            self._push = None  # the gradients it clears changed
        self._copies.run(self._pull[1])
        self._copies.start(self._pull[2])

    def pulled(self) -> None:
        """Wait for the rest of the last :meth:`pull`: this rank's part of the gradients and its
        shard of the params."""
        self._copies.wait()

    def push(self, clear: bool) -> None:
        """Copy every rank's updated shard (the all-gather's buffer) into each device param;
        with ``clear``, zero the device gradients the last :meth:`pull` read; wait."""
        self.pulled()
        if self._push is None or self._push[0] != clear:
            read = self._pull[0] if self._pull is not None and clear else []
            sizes = [(t, 4 * element_count(t)) for t in read if t is not None]
            self._push = (clear, self._copies.to_device_ops(self._params_out, sizes))
        self._copies.run(self._push[1])

    def close(self) -> None:
        """Free the host buffers' imports, the copies' buffers and the gradient buffers."""
        self._pull = self._push = None
        self._copies.close()
        if self._rt is not None:
            self._rt.close()
            self._rt = None
        self._grad_buffers.clear()
