"""One rank of the reduce-scatter exchange over a real engine, for tests/distributed/test_zero1_shard.py.

``python tests/distributed/exchange_worker.py torch|mpi OUT_DIR``, launched by torchrun (gloo) or mpirun
(mpi4py). The rank's communicator (``vk_adam.distributed._comm``, its own post and take, or
``Sendrecv``) runs the exchange in messages of 997 values, so 71 of them cross per part and
every landing buffer is taken again while others are added; twice, as steps reuse them. The
rank writes its mean to OUT_DIR/rank<r>.npy.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from vk_adam.distributed._comm import make_communicator
from vk_adam.distributed._exchange import ExchangeReduceScatter

N = 70_001
MESSAGE = 997


def sends(rank: int, world: int) -> np.ndarray:
    """Rank ``rank``'s float32 values: ``world`` parts of ``N``, over many magnitudes."""
    rng = np.random.default_rng([11, rank])
    return (rng.standard_normal(world * N) * 10.0 ** rng.integers(-3, 4, world * N)).astype(np.float32)


def main(launcher: str, out: Path) -> None:
    if launcher == "torch":
        import torch.distributed as dist

        dist.init_process_group("gloo")
        comm = make_communicator(None, None)
    else:
        from mpi4py import MPI

        comm = make_communicator(MPI.COMM_WORLD, None)
    comm._exchange = ExchangeReduceScatter(MESSAGE)  # type: ignore[attr-defined]
    send = sends(comm.rank, comm.size)
    recv = np.full(N, np.nan, np.float32)
    for _ in range(2):
        recv[...] = np.nan
        comm.reduce_scatter_mean(send.copy(), recv)
    np.save(out / f"rank{comm.rank}.npy", recv)
    comm.close()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
