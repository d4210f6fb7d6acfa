"""What a user reads of a ZeRO-1 optimizer: its clipping bound and last global norm, its
shard, its communicator, its device and memory, and the device buffers of kp tensor params. A
base class of ``ZeroRedundancyOptimizer``, as ``_optim.access`` is of ``vk_adam.Optimizer``.
And what benchmarks that time a step's pieces use of it (:class:`ShardInternals`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._optim import Optimizer
from .._optim.sharding import Group, check_max_norm
from ._comm import Communicator
from ._device import DeviceParams
from ._nccl import NcclOnVulkan
from ._plan import Unit
from ._shard import Partition


@dataclass(frozen=True)
class ShardInternals:
    """The parts of one rank's ZeRO-1 step, for benchmarks that run and time them one at a time
    (``benchmarks/h200/``): reached by :meth:`ShardAccess.internals`, as
    ``vk_adam.Optimizer.internals()`` reaches an optimizer's. Applications have no need of it,
    and it may change between releases."""

    #: The step over NCCL on the Vulkan buffers (``_nccl.NcclOnVulkan``: ``pull``,
    #: ``reduce_scatter``, ``record_update``, ``run_update``, ``all_gather``, ``push``,
    #: ``finish``, ``recordings``, ``submissions``); None on the other paths.
    nccl: NcclOnVulkan | None
    #: The communicator the collectives run on (``_comm.Communicator``).
    comm: Communicator
    #: This rank's shard optimizer (a :class:`vk_adam.Optimizer`); None if it owns nothing.
    shard: Optimizer | None
    #: Copies the param groups' hyperparameters (a schedule may have changed them) into the
    #: shard's, as each step does before its update.
    sync_hyper: Callable[[], None]


class ShardAccess:
    """Clipping, shard, communicator, device and memory of a ``ZeroRedundancyOptimizer``."""

    rank: int
    partition: Partition
    _comm: Communicator
    _inner: Optimizer | None
    _device: DeviceParams | None
    _groups: list[Group]
    _units: list[Unit]
    _max_norm: float | None
    _last_norm: float
    _nccl: NcclOnVulkan | None

    def _check_open(self) -> None:
        raise NotImplementedError

    def _sync_hyper(self) -> None:
        raise NotImplementedError

    def internals(self) -> ShardInternals:
        """The parts of this rank's step (:class:`ShardInternals`), for benchmarks that time them
        apart. Advanced: applications need none of it, and it may change between releases."""
        return ShardInternals(self._nccl, self._comm, self._inner, self._sync_hyper)

    @property
    def clip_grad_norm(self) -> float | None:
        """The max norm of the global gradient (None: no clipping); may change between steps."""
        return self._max_norm

    @clip_grad_norm.setter
    def clip_grad_norm(self, value: float) -> None:
        if self._max_norm is None:
            raise ValueError("clipping is chosen at construction: create the optimizer with clip_grad_norm=")
        max_norm = check_max_norm(value)
        if max_norm is None:
            raise ValueError("clip_grad_norm cannot be turned off after construction")
        self._max_norm = max_norm

    def last_grad_norm(self) -> float:
        """The global norm of the last step's mean gradient (before clipping), over every rank."""
        self._check_open()
        if self._max_norm is None:
            raise ValueError("last_grad_norm() needs an optimizer created with clip_grad_norm=...")
        return self._last_norm

    @property
    def shard(self) -> tuple[int, int]:
        """The elements of the flat param vector (groups one after the other) this rank owns."""
        return self.partition.shards[self.rank]

    @property
    def communicator(self) -> str:
        """The engine and transport the collectives run on."""
        if getattr(self, "_nccl", None) is not None:  # the step's collectives need no staging
            return f"torch.distributed nccl on the Vulkan buffers, {self._comm.size} ranks"
        return self._comm.describe()

    @property
    def device_staging(self) -> str | None:
        """How kp tensor params reach the collectives: "host memory import" or "mapped staging
        (host-visible kp tensors)"; None without kp tensor params."""
        return self._device.how if self._device is not None else None

    def param_buffer(self, group: int = 0, index: int = 0) -> Any:
        """The kp tensor of param ``index`` of a device param group: the application's own buffer
        (or a LoRA adapter's ``device_params``), which every step updates in place."""
        self._check_open()
        return self._units[self._unit_of(group, index, "param_buffer")].tensor

    def grad_buffer(self, group: int = 0, index: int = 0) -> Any:
        """A device buffer (kp tensor on ``manager``, float32, the param's size) for the gradient of
        param ``index`` of a device param group: write it with your own shaders, then call
        ``step()`` without grads, which reads it (and zeroes it with ``zero_grad``). Made, zeroed,
        the first time it is asked for; the same buffer after that."""
        self._check_open()
        unit = self._unit_of(group, index, "grad_buffer")
        assert self._device is not None
        return self._device.grad_buffer(unit)

    def _unit_of(self, group: int, index: int, what: str) -> int:
        """The buffer set of a device param, or the error for one that is not."""
        if not 0 <= group < len(self._groups) or not 0 <= index < len(self._groups[group].slots):
            raise IndexError(f"{what}({group}, {index}): no such param")
        if self._groups[group].host_mode:
            raise TypeError(
                f"{what}() is for kp tensor params; param group {group} holds NumPy arrays, which "
                "step(grads) takes and updates in place"
            )
        return next(i for i, u in enumerate(self._units) if (u.group, u.index) == (group, index))

    @property
    def device(self) -> Any:
        """The Vulkan device (``vk_adam.DeviceInfo``) of this rank's shard; None if it owns none."""
        return self._inner.device if self._inner is not None else None

    def memory_bytes(self) -> dict[str, int]:
        """Device memory of this rank's shard optimizer by kind, as ``vk_adam.Optimizer.memory_bytes``:
        about 1/world of one process's."""
        self._check_open()
        if self._inner is None:
            return dict.fromkeys(("param", "grad", "master", "state", "absmax", "other", "total"), 0)
        return self._inner.memory_bytes()
