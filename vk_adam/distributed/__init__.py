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
    opt = vkd.ZeroRedundancyOptimizer(kp_tensors, "adamw", manager=mgr)   # device buffers
    opt = vkd.ZeroRedundancyOptimizer(lora_adapter, "adamw", manager=mgr) # a LoRA adapter's
    opt.step()                             # device params: reads opt.grad_buffer(group, index)

Device params (kp tensors, a LoRA adapter's buffer) are updated in place in every rank's own
buffers; the GPU copies them to and from the collectives' host memory directly (``_device``).
Importing this module imports neither torch nor mpi4py; making an optimizer imports the one it
uses. docs/distributed.md has the semantics, the failure behaviour and the measurements.
"""

from __future__ import annotations

from ._comm import agree as agree
from ._comm import make_communicator as make_communicator
from ._shard import device_for_rank as device_for_rank
from ._zero import ZeroRedundancyOptimizer

# The public name is the optimizer; the communicator helpers are for vk-adam's own ZeRO bench
# (``_commands/bench/zero_worker``), which may import only this face.
__all__ = ["ZeroRedundancyOptimizer"]
