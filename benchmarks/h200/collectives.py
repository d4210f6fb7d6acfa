"""gloo and MPI on 64 MiB of float32 at 2 ranks: each collective ZeRO-1 could build its
reduce-scatter and all-gather from, median ms of 10 (after 2 warm-ups). Run under torchrun
(gloo) or mpirun (MPI, argument "mpi")."""

import sys
import time

import numpy as np

from vk_adam.distributed._exchange import ExchangeReduceScatter

N = 1 << 24


def timed(name, f, barrier, rank):
    s = []
    for _ in range(12):
        barrier()
        a = time.perf_counter()
        f()
        barrier()
        s.append(time.perf_counter() - a)
    if rank == 0:
        print(f"{name}: {1e3 * np.median(s[2:]):.1f} ms", flush=True)


if sys.argv[1:] == ["mpi"]:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    send = np.ones(N, np.float32)
    recv = np.empty(N // world, np.float32)
    full = np.empty(N, np.float32)
    part = N // world
    tmp = np.empty(part, np.float32)

    def pairwise_rs():
        # exchange with every peer in turn: send it its part, receive mine; add
        recv[:] = send[rank * part : (rank + 1) * part]
        for k in range(1, world):
            to, frm = (rank + k) % world, (rank - k) % world
            comm.Sendrecv(send[to * part : (to + 1) * part], to, 7, tmp, frm, 7)
            recv.__iadd__(tmp)

    timed(
        "MPI Reduce_scatter_block", lambda: comm.Reduce_scatter_block(send, recv, MPI.SUM), comm.Barrier, rank
    )
    timed("MPI Allreduce in place", lambda: comm.Allreduce(MPI.IN_PLACE, send, MPI.SUM), comm.Barrier, rank)
    timed("MPI pairwise Sendrecv + add", pairwise_rs, comm.Barrier, rank)

    def swap(part, to, into, source):
        comm.Sendrecv(part, dest=to, sendtag=7, recvbuf=into, source=source, recvtag=7)

    for mib in (None, 16, 4):  # values per message: a whole part, 16 MiB, 4 MiB
        exchange = ExchangeReduceScatter(None if mib is None else mib << 18)
        name = (
            f"MPI vk-adam's exchange, Sendrecv in {'one message' if mib is None else f'{mib} MiB messages'}"
        )
        timed(
            name + " + mean",
            lambda exchange=exchange: exchange(send, recv, rank, world, swap=swap, mean=True),
            comm.Barrier,
            rank,
        )
        exchange.close()
    timed("MPI Allgather", lambda: comm.Allgather(recv, full), comm.Barrier, rank)

    def paired_ag():  # every rank's part, 4 MiB at a time, by Sendrecv with rank + k and rank - k
        full[rank * part : (rank + 1) * part] = recv
        for at in range(0, part, 1 << 20):
            for k in range(1, world):
                to, frm = (rank + k) % world, (rank - k) % world
                into = full[frm * part + at : frm * part + min(at + (1 << 20), part)]
                comm.Sendrecv(recv[at : at + (1 << 20)], to, 8, into, frm, 8)

    timed("MPI all-gather by Sendrecv (4 MiB messages)", paired_ag, comm.Barrier, rank)
else:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    part = N // world
    send = torch.ones(N)
    recv = torch.empty(part)
    full = torch.empty(N)
    tmp = torch.empty(part)

    def pairwise_rs():
        recv.copy_(send[rank * part : (rank + 1) * part])
        for k in range(1, world):
            to, frm = (rank + k) % world, (rank - k) % world
            reqs = [dist.isend(send[to * part : (to + 1) * part], to), dist.irecv(tmp, frm)]
            for r in reqs:
                r.wait()
            recv.add_(tmp)

    def broadcasts():
        for r in range(world):
            dist.broadcast(full[r * part : (r + 1) * part], r)

    def exchange_ag():
        full[rank * part : (rank + 1) * part].copy_(recv)
        reqs = [dist.isend(recv, r) for r in range(world) if r != rank]
        reqs += [dist.irecv(full[r * part : (r + 1) * part], r) for r in range(world) if r != rank]
        for q in reqs:
            q.wait()

    timed("gloo reduce_scatter_tensor", lambda: dist.reduce_scatter_tensor(recv, send), dist.barrier, rank)
    timed("gloo all_reduce in place", lambda: dist.all_reduce(send), dist.barrier, rank)
    timed("gloo pairwise isend/irecv + add", pairwise_rs, dist.barrier, rank)
    sent, got = send.numpy(), recv.numpy()
    post = lambda part, peer: dist.isend(torch.from_numpy(part), peer)  # noqa: E731
    take = lambda into, peer: dist.recv(torch.from_numpy(into), peer)  # noqa: E731
    for mib in (16, 4, 1):
        exchange = ExchangeReduceScatter(mib << 18)
        name = f"gloo vk-adam's exchange, every isend then recv, {mib} MiB messages, adds on a thread + mean"
        timed(
            name,
            lambda exchange=exchange: exchange(sent, got, rank, world, post=post, take=take, mean=True),
            dist.barrier,
            rank,
        )
        exchange.close()
    timed("gloo all_gather_into_tensor", lambda: dist.all_gather_into_tensor(full, recv), dist.barrier, rank)
    timed("gloo broadcast per rank", broadcasts, dist.barrier, rank)
    timed("gloo isend/irecv with every peer (all-gather)", exchange_ag, dist.barrier, rank)

    def messages_ag():  # every send posted, then every receive, 4 MiB at a time
        full[rank * part : (rank + 1) * part].copy_(recv)
        peers, step = [r for r in range(world) if r != rank], 1 << 20
        reqs = [dist.isend(recv[at : at + step], r) for at in range(0, part, step) for r in peers]
        for at in range(0, part, step):
            for r in peers:
                dist.recv(full[r * part + at : r * part + min(at + step, part)], r)
        for q in reqs:
            q.wait()

    timed("gloo all-gather by isend, then recv (4 MiB messages)", messages_ag, dist.barrier, rank)

    def async_broadcasts():  # every broadcast started (gloo runs them on its threads), then waited for
        step = 1 << 20
        works = [
            dist.broadcast(full[r * part + at : r * part + min(at + step, part)], r, async_op=True)
            for r in range(world)
            for at in range(0, part, step)
        ]
        for work in works:
            work.wait()

    timed(
        "gloo broadcast per rank, 4 MiB at a time, all started then waited",
        async_broadcasts,
        dist.barrier,
        rank,
    )
    dist.destroy_process_group()
