"""vk-adam over several processes: ZeRO stage 1, optimizer state sharded across ranks.

Params are replicated; each rank keeps the optimizer state of one contiguous, balanced shard of
the flat param vector and updates that shard on its own Vulkan device. A step reduce-scatters
the mean of the ranks' gradients, updates the shard, and all-gathers the params, so every rank
ends with the params one process gets from the mean gradient. The collectives run on
``torch.distributed`` (gloo, or NCCL where torch has CUDA) or on MPI through ``mpi4py``::

    import vk_adam.distributed as vkd
    opt = vkd.ZeroRedundancyOptimizer(params, rule="adamw", lr=1e-3)       # torch's default group
    opt = vkd.ZeroRedundancyOptimizer(params, rule="adamw", comm=MPI.COMM_WORLD, lr=1e-3)
    opt.step(local_grads)                  # this rank's own gradients, in the order of the params
    opt.consolidate_state_dict(to=0)       # on every rank; then on rank 0:
    sd = opt.state_dict()                  # the layout of one process's optimizer
    opt.load_state_dict(sd)                # at any world size: re-sharded

Importing this module imports neither torch nor mpi4py; making an optimizer imports the one it
uses. docs/distributed.md has the semantics, the failure behaviour and the measurements.
"""

from __future__ import annotations

from ._zero import ZeroRedundancyOptimizer

__all__ = ["ZeroRedundancyOptimizer"]
