"""A 2-rank fine-tune with vk-adam's ZeRO-1: each rank keeps half of AdamW's state on its own
Vulkan device (lavapipe here), the params are replicated, and every rank ends with the same
weights as one process given the mean gradient.

The model is a small MLP (``in -> tanh(hidden) -> out``) that starts from "pre-trained" weights
and is fine-tuned, data parallel, towards a slightly different teacher: each rank draws its own
batches and computes its own gradients in NumPy; ``opt.step(grads)`` reduce-scatters their mean,
updates this rank's shard on the GPU and all-gathers the params. Global-norm clipping and a
warm-up + cosine schedule run as in one process.

Run it (from the repository root):
    bash scripts/zero1-demo.sh                       # set-up, then torchrun with 2 ranks (gloo)
    bash scripts/zero1-demo.sh --mpi                 # the same through mpirun and mpi4py
or directly:
    python -m torch.distributed.run --nproc_per_node 2 examples/zero1/train.py --steps 200
    mpirun -n 2 python -m mpi4py examples/zero1/train.py --steps 200
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pickle
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

import vk_adam.distributed as vkd
from vk_adam.schedules import CosineDecay


class Engine:
    """The launcher's distributed engine: torch.distributed (gloo) under torchrun, MPI under mpirun."""

    def __init__(self) -> None:
        if "OMPI_COMM_WORLD_SIZE" in os.environ or "PMI_SIZE" in os.environ:
            from mpi4py import MPI

            self.comm: Any = MPI.COMM_WORLD
            self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
            self._mpi = MPI
        else:
            import torch.distributed as dist

            # a short timeout: a rank that stops taking part ends the others' wait with an error
            dist.init_process_group("gloo", timeout=timedelta(seconds=120))
            self.comm, self.rank, self.size, self._dist = None, dist.get_rank(), dist.get_world_size(), dist

    def close(self) -> None:
        if self.comm is None:  # torch.distributed: end the process group before the interpreter exits
            self._dist.destroy_process_group()

    def mean(self, value: float) -> float:
        if self.comm is not None:
            return float(self.comm.allreduce(value)) / self.size
        import torch

        t = torch.tensor([value], dtype=torch.float64)
        self._dist.all_reduce(t)
        return float(t.item()) / self.size

    def gather(self, obj: Any) -> list[Any]:
        if self.comm is not None:
            return list(self.comm.allgather(obj))
        out: list[Any] = [None] * self.size
        self._dist.all_gather_object(out, obj)
        return out


def mlp(params: list[np.ndarray], x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w1, b1, w2, b2 = params
    h = np.tanh(x @ w1 + b1)
    return h @ w2 + b2, h


def loss_and_grads(params: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> tuple[float, list[np.ndarray]]:
    """Mean squared error and its gradient, by hand (float64, handed over as float32)."""
    wide = [p.astype(np.float64) for p in params]
    w2 = wide[2]
    pred, h = mlp(wide, x)
    err = pred - y
    d_pred = 2.0 * err / err.size
    d_h = (d_pred @ w2.T) * (1.0 - h * h)
    grads = [x.T @ d_h, d_h.sum(0), h.T @ d_pred, d_pred.sum(0)]
    return float(np.mean(err * err)), [g.astype(np.float32) for g in grads]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=64, help="examples per rank and step")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--out", default="vk-adam-out/zero1")
    args = parser.parse_args()
    engine = Engine()
    dims = (16, args.hidden, 4)

    # "pre-trained" weights, the same on every rank; the teacher is a nearby model
    init = np.random.default_rng(0)
    params = [
        (init.standard_normal((dims[0], dims[1])) / np.sqrt(dims[0])).astype(np.float32),
        np.zeros(dims[1], np.float32),
        (init.standard_normal((dims[1], dims[2])) / np.sqrt(dims[1])).astype(np.float32),
        np.zeros(dims[2], np.float32),
    ]
    teacher = [
        p.astype(np.float64) + 0.3 * init.standard_normal(p.shape) / np.sqrt(p.shape[0]) for p in params
    ]

    opt = vkd.ZeroRedundancyOptimizer(params, "adamw", comm=engine.comm, lr=args.lr, clip_grad_norm=1.0)
    sched = CosineDecay(opt, warmup_steps=args.steps // 10, total_steps=args.steps)
    if engine.rank == 0:
        total = sum(p.size for p in params)
        print(
            f"{engine.size} ranks ({opt.communicator}); {total} params; this rank's shard {opt.shard}, "
            f"state {opt.memory_bytes()['state']} bytes on {opt.device.name if opt.device else 'no device'}"
        )
    data = np.random.default_rng(1000 + engine.rank)  # each rank its own batches
    first = last = 0.0
    for step in range(args.steps):
        x = data.standard_normal((args.batch, dims[0]))
        y, _ = mlp(teacher, x)
        loss, grads = loss_and_grads(params, x, y)
        opt.step(grads)
        sched.step()
        loss = engine.mean(loss)
        first = loss if step == 0 else first
        last = loss
        if engine.rank == 0 and (step % 50 == 0 or step == args.steps - 1):
            lr = opt.param_groups[0]["lr"]
            print(f"step {step:4d}  loss {loss:.5f}  grad norm {opt.last_grad_norm():.4f}  lr {lr:.2e}")

    digests = engine.gather(hashlib.sha256(b"".join(p.tobytes() for p in params)).hexdigest())
    opt.consolidate_state_dict(to=0)
    if engine.rank == 0:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "optimizer.pkl").write_bytes(pickle.dumps(opt.state_dict()))  # one process's layout
        np.savez(out / "params.npz", *params)
        print(
            f"loss {first:.5f} -> {last:.5f} ({first / last:.0f}x lower); params identical on every rank: "
            f"{len(set(digests)) == 1}; wrote {out}/optimizer.pkl, {out}/params.npz"
        )
    opt.close()
    engine.close()


if __name__ == "__main__":
    main()
