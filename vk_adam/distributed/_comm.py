"""The collectives ZeRO-1 runs, behind one small interface, on two existing engines:
``torch.distributed`` (gloo on CPUs, NCCL where torch has CUDA) and MPI through ``mpi4py``.

Both move host NumPy arrays. torch's gloo and MPI read and write them in place (a torch CPU
tensor made by ``torch.from_numpy`` shares the array's memory); with NCCL each collective copies
its input into a CUDA staging tensor, runs on the GPU and copies the result back (counted in
``staging_seconds``). torch and mpi4py are imported only when a communicator is made, so
``import vk_adam`` imports neither.

:func:`agree` is how a collective call keeps its contract: every rank checks its own inputs,
then one small all-reduce tells every rank whether any rank failed, before anything changes;
if one did, every rank raises the same error.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from .. import _errors
from ._exchange import ExchangeReduceScatter
from ._shard import local_rank

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
Array = npt.NDArray[Any]


class Communicator(Protocol):
    """What ZeRO-1 needs of a distributed engine: collectives over host NumPy arrays, with
    equal parts on every rank."""

    rank: int
    size: int
    #: The rank among this host's ranks (None when the launcher does not say).
    local_rank: int | None
    #: Seconds spent copying between host arrays and the engine's own buffers (NCCL: CUDA).
    staging_seconds: float

    def describe(self) -> str: ...
    def reduce_scatter_mean(self, send: F32, recv: F32, own_ready: Callable[[], None] | None = None) -> None:
        """``recv`` (n values) = the mean over ranks of their ``send[rank * n : rank * n + n]``:
        their float32 sum divided by the rank count in float32; ``send`` may be overwritten.
        ``own_ready``: called before this rank's own part of ``send`` is read (until then only
        the other parts need to be there)."""

    def all_gather(self, send: Array, recv: Array) -> None:
        """``recv`` (C-contiguous, ``size`` times ``send``'s bytes) = every rank's ``send``, in rank order."""

    def all_reduce_sum(self, values: F64) -> F64:
        """The sum over ranks of ``values`` (a few float64 numbers)."""

    def all_gather_object(self, obj: Any) -> list[Any]: ...
    def gather_object(self, obj: Any, root: int) -> list[Any] | None:
        """Every rank's ``obj`` on ``root`` (None on the others)."""

    def close(self) -> None:
        """Free what the collectives keep between calls (not collective)."""


class TorchCommunicator:
    """``torch.distributed`` over a process group (None: the default group). Host staging
    through CPU tensors that share the NumPy arrays' memory, for gloo (and MPI backends of
    torch); CUDA staging tensors on ``torch.cuda.current_device()`` when the group's backend is
    NCCL (one GPU per rank, as NCCL requires: call ``torch.cuda.set_device(local_rank)`` first)."""

    def __init__(self, group: Any = None) -> None:
        try:
            import torch
            import torch.distributed as dist
        except ImportError as exc:
            raise ImportError(
                "vk_adam.distributed needs torch.distributed (pip install torch) or mpi4py "
                "(pass comm=MPI.COMM_WORLD)"
            ) from exc
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError(
                "torch.distributed is not initialized: call torch.distributed.init_process_group("
                "'gloo') first (torchrun sets its environment), or pass comm=MPI.COMM_WORLD to use MPI"
            )
        self._torch, self._dist, self._group = torch, dist, group
        self.rank = int(dist.get_rank(group))
        self.size = int(dist.get_world_size(group))
        self.backend = str(dist.get_backend(group))
        self.local_rank = local_rank()
        self.staging_seconds = 0.0
        self._exchange = ExchangeReduceScatter()
        #: NCCL moves CUDA tensors only: stage through them.
        self.cuda = "nccl" in self.backend and bool(torch.cuda.is_available())
        self._device = torch.device("cuda", torch.cuda.current_device()) if self.cuda else None
        # torch 2.13 names them *_single; older releases *_tensor / *_into_tensor.
        self._reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        self._all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

    def describe(self) -> str:
        staging = "CUDA staging tensors" if self.cuda else "host staging"
        return f"torch.distributed {self.backend} ({staging}), {self.size} ranks"

    def close(self) -> None:
        self._exchange.close()

    def _to_engine(self, array: Array) -> Any:
        tensor = self._torch.from_numpy(array)
        if self._device is None:
            return tensor
        started = time.perf_counter()
        moved = tensor.to(self._device)
        self.staging_seconds += time.perf_counter() - started
        return moved

    def _back(self, tensor: Any, out: Array) -> None:
        if self._device is not None:
            started = time.perf_counter()
            out[...] = tensor.cpu().numpy()
            self.staging_seconds += time.perf_counter() - started

    def reduce_scatter_mean(self, send: F32, recv: F32, own_ready: Callable[[], None] | None = None) -> None:
        if self._device is None and self.backend == "gloo":
            # gloo's reduce-scatter is several times slower than point-to-point
            torch, dist, group = self._torch, self._dist, self._group

            def post(part: F32, peer: int) -> Any:
                return dist.isend(torch.from_numpy(part), self._global_rank(peer), group=group)

            def take(into: F32, peer: int) -> None:
                dist.recv(torch.from_numpy(into), self._global_rank(peer), group=group)

            self._exchange(
                send, recv, self.rank, self.size, post=post, take=take, mean=True, own_ready=own_ready
            )
            return
        if own_ready is not None:
            own_ready()
        out = self._to_engine(recv)
        self._reduce_scatter(out, self._to_engine(send), group=self._group)
        self._back(out, recv)
        np.divide(recv, np.float32(self.size), out=recv)

    def all_gather(self, send: Array, recv: Array) -> None:
        if self._device is None and self.backend == "gloo":
            # likewise its all-gather against one broadcast per rank
            size, raw = send.nbytes, recv.view(np.uint8)
            raw[self.rank * size : self.rank * size + size] = send.view(np.uint8).reshape(-1)
            for root in range(self.size):
                part = self._torch.from_numpy(raw[root * size : root * size + size])
                self._dist.broadcast(part, src=self._global_rank(root), group=self._group)
            return
        out = self._to_engine(recv.view(np.uint8))
        self._all_gather(out, self._to_engine(send.view(np.uint8)), group=self._group)
        self._back(out, recv.view(np.uint8))

    def _global_rank(self, rank: int) -> int:
        """``rank`` of this group as a rank of the default group (what ``broadcast(src=)`` takes)."""
        if self._group is None:
            return rank
        return int(self._dist.get_global_rank(self._group, rank))

    def all_reduce_sum(self, values: F64) -> F64:
        out = np.array(values, np.float64)
        tensor = self._to_engine(out)
        self._dist.all_reduce(tensor, group=self._group)
        self._back(tensor, out)
        return out

    # -- torch tensors already on the engine's device (NCCL on Vulkan buffers: ``_nccl``) --------

    def cuda_ordinal(self) -> int | None:
        """The CUDA device NCCL runs on (None: not NCCL)."""
        return self._device.index if self._device is not None else None

    def reduce_scatter_tensors(self, send: Any, recv: Any) -> None:
        self._reduce_scatter(recv, send, group=self._group)

    def all_gather_tensors(self, send: Any, recv: Any) -> None:
        self._all_gather(recv, send, group=self._group)

    def all_reduce_tensor(self, values: Any) -> F64:
        """The sum over ranks of a few float64 values (a torch tensor), back on the host."""
        self._dist.all_reduce(values, group=self._group)
        return np.asarray(values.cpu().numpy(), np.float64)

    def all_gather_object(self, obj: Any) -> list[Any]:
        out: list[Any] = [None] * self.size
        self._dist.all_gather_object(out, obj, group=self._group)
        return out

    def gather_object(self, obj: Any, root: int) -> list[Any] | None:
        out: list[Any] | None = [None] * self.size if self.rank == root else None
        self._dist.gather_object(obj, out, dst=root, group=self._group)
        return out


class MpiCommunicator:
    """MPI through an ``mpi4py`` intracommunicator (e.g. ``MPI.COMM_WORLD``): buffers are the
    NumPy arrays themselves. The local rank comes from a shared-memory split of the communicator."""

    def __init__(self, comm: Any) -> None:
        from mpi4py import MPI

        self._mpi, self._comm = MPI, comm
        self.rank, self.size = int(comm.Get_rank()), int(comm.Get_size())
        node = comm.Split_type(MPI.COMM_TYPE_SHARED)
        self.local_rank: int | None = int(node.Get_rank())
        node.Free()
        self.staging_seconds = 0.0
        self._exchange = ExchangeReduceScatter(message=None)  # one Sendrecv per peer: see there

    def describe(self) -> str:
        library = str(self._mpi.Get_library_version()).split(",")[0].strip()
        return f"MPI through mpi4py ({library}), {self.size} ranks"

    def close(self) -> None:
        self._exchange.close()

    def reduce_scatter_mean(self, send: F32, recv: F32, own_ready: Callable[[], None] | None = None) -> None:
        # Open MPI's Reduce_scatter_block is several times slower than point-to-point
        comm = self._comm

        def swap(part: F32, to: int, into: F32, source: int) -> None:
            comm.Sendrecv(part, dest=to, sendtag=_TAG, recvbuf=into, source=source, recvtag=_TAG)

        self._exchange(send, recv, self.rank, self.size, swap=swap, mean=True, own_ready=own_ready)

    def all_gather(self, send: Array, recv: Array) -> None:
        self._comm.Allgather(send.view(np.uint8), recv.view(np.uint8))

    def all_reduce_sum(self, values: F64) -> F64:
        values = np.ascontiguousarray(values, np.float64)
        out = np.empty_like(values)
        self._comm.Allreduce(values, out, op=self._mpi.SUM)
        return out

    def all_gather_object(self, obj: Any) -> list[Any]:
        return list(self._comm.allgather(obj))

    def gather_object(self, obj: Any, root: int) -> list[Any] | None:
        out = self._comm.gather(obj, root=root)
        return None if out is None else list(out)


#: The MPI tag of the reduce-scatter's messages.
_TAG = 0x7A


def is_mpi_comm(obj: object) -> bool:
    """An mpi4py communicator, recognised without importing mpi4py."""
    return any(c.__module__ == "mpi4py.MPI" and c.__name__ == "Comm" for c in type(obj).__mro__)


def make_communicator(comm: Any, process_group: Any) -> Communicator:
    """``comm`` (an mpi4py communicator) or ``process_group`` (a torch group; None with no
    ``comm``: torch's default group)."""
    if comm is not None and process_group is not None:
        raise TypeError("pass comm= (MPI) or process_group= (torch.distributed), not both")
    if comm is not None:
        if not is_mpi_comm(comm):
            raise TypeError(
                f"comm must be an mpi4py communicator such as MPI.COMM_WORLD (got {type(comm).__name__}); "
                "for torch.distributed pass process_group= or nothing"
            )
        return MpiCommunicator(comm)
    return TorchCommunicator(process_group)


#: Errors that keep their type when every rank raises a failing rank's error.
_ERROR_TYPES: dict[str, type[Exception]] = {
    "TypeError": TypeError,
    "ValueError": ValueError,
    "OptimizerClosedError": _errors.OptimizerClosedError,
    "NoVulkanDeviceError": _errors.NoVulkanDeviceError,
    "ShaderMissingError": _errors.ShaderMissingError,
    "DeviceCapabilityError": _errors.DeviceCapabilityError,
}


def agree(comm: Communicator, error: BaseException | None, what: str, same: float = 0.0) -> None:
    """Raise on every rank if any rank's checks failed (``error``) or if ``same`` differs
    between ranks; otherwise return. One all-reduce of three numbers when every rank is fine.

    The error raised names the lowest failing rank and carries its message, with its type when
    it is a TypeError, ValueError or one of vk-adam's errors (else RuntimeError)."""
    if comm.size == 1:  # nothing to agree with: no collective
        if error is None:
            return
        failed, reports = 1.0, [(type(error).__name__, str(error))]
    else:
        flags = comm.all_reduce_sum(np.array([error is not None, same, same * same], np.float64))
        failed, total, squares = (float(x) for x in flags)
        if failed == 0 and squares * comm.size == total * total:
            return
        if failed == 0:
            raise ValueError(f"{what}: the ranks passed different values ({same!r} on rank {comm.rank})")
        reports = comm.all_gather_object(None if error is None else (type(error).__name__, str(error)))
    rank, (kind, message) = next((r, e) for r, e in enumerate(reports) if e is not None)
    cls = _ERROR_TYPES.get(kind, RuntimeError)
    others = "" if failed == 1 else f" (and {int(failed) - 1} other rank(s))"
    raise cls(f"{what} on rank {rank}{others} of {comm.size}: {message}") from error
