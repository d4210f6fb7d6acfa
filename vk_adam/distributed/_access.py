"""What a user reads of a ZeRO-1 optimizer: its clipping bound and last global norm, its
shard, its communicator, its device and memory. A base class of ``ZeroRedundancyOptimizer``,
as ``_optim.access`` is of ``vk_adam.Optimizer``."""

from __future__ import annotations

from typing import Any

from .._optim.clipping import check_max_norm
from .._optim.optimizer import Optimizer
from ._comm import Communicator
from ._shard import Partition


class ShardAccess:
    """Clipping, shard, communicator, device and memory of a ``ZeroRedundancyOptimizer``."""

    rank: int
    partition: Partition
    _comm: Communicator
    _inner: Optimizer | None
    _max_norm: float | None
    _last_norm: float

    def _check_open(self) -> None:
        raise NotImplementedError

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
        return self._comm.describe()

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
