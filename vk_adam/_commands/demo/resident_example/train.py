"""A GPU-resident LoRA fine-tune: forward, loss, backward and the optimizer step all on Vulkan.

An application's view of vk-adam (copy this folder to start your own). The application owns
the ``kp.Manager``, its data, frozen weights and saved activations (kp tensors) and its shaders
(``shaders/*.comp``, compiled to ``spirv/`` by the build: ``python build_shaders.py``); vk-adam
owns the LoRA weights, their gradients and the optimizer state, in its flat buffers:

* the forward pass reads the LoRA weights from ``opt.param_buffer()`` (= ``adapter.device_params``),
* the backward pass writes their gradients into ``opt.grad_buffer()`` at ``adapter.slices()``,
* ``opt.record_step(seq)`` records the update into the application's own ``kp.Sequence``,

so many whole training steps are recorded back to back and submitted at once. The host uploads
the data set once and reads back only the loss (once per submission) and, at the end, the adapter.

The model: residual blocks ``h + lin_n(relu(... relu(lin_1(h))))`` of frozen square linear maps
``W [out, in]``, each with LoRA: ``lin(z) = z W^T + s (z A^T) B^T``. Loss: mean squared error.
A step is two dispatches of the application's shaders, whatever the depth of the network:

1. ``forward_backward.comp``, one workgroup per row of the batch: the forward pass, the loss and
   the backward pass through the activations (all row-wise), saving what the LoRA gradients need;
2. ``weight_grads.comp``, one thread per LoRA gradient element: the sums over the batch, written
   into the optimizer's gradient buffer, and the step's loss;

with a memory barrier after each, then ``opt.record_step(seq)`` (clipping and AdamW).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kp
import numpy as np

SPIRV_DIR = Path(__file__).resolve().parent / "spirv"
#: forward_backward.comp's workgroup size: the threads that carry its rows of the batch through
#: the whole network (a power of two: the loss's tree reduction halves it). On a GPU, as many as
#: the device allows up to ROW_THREADS_GPU (the faster on the GPUs measured by
#: benchmarks/resident_step.py); on a CPU driver ROW_THREADS.
ROW_THREADS, ROW_THREADS_GPU = 256, 1024
#: Batch rows per workgroup of forward_backward.comp: every weight a thread loads serves that
#: many rows. A GPU wants many workgroups in flight (the batch spread over its multiprocessors);
#: a CPU driver such as lavapipe runs a few workgroups at a time and pays for every load.
ROWS_GPU, ROWS_CPU = 1, 8
#: weight_grads.comp's workgroup size (one thread per gradient element).
GRAD_THREADS = 256
#: Shared memory forward_backward.comp may use, in floats: 16 KiB, the least any Vulkan device
#: offers (maxComputeSharedMemorySize); with one row per workgroup, dims up to about 900 fit.
SHARED_FLOATS = 4096
#: VkPhysicalDeviceType of a CPU implementation (lavapipe, SwiftShader).
DEVICE_TYPE_CPU = 4


def load_spirv(name: str) -> bytes:
    path = SPIRV_DIR / f"{name}.spv"
    if not path.exists():
        raise FileNotFoundError(
            f"{path} is missing: the example's shaders are compiled at build time; run "
            "`python build_shaders.py` (or `pip install -e .`) in the repository"
        )
    return path.read_bytes()


def words(*values: int | float) -> np.ndarray:
    """Push or specialization constants as kp takes them (float32), ints as their bit patterns."""
    out = np.zeros(len(values), np.uint32)
    for i, v in enumerate(values):
        if isinstance(v, float):
            out.view(np.float32)[i] = v
        else:
            out[i] = v
    return out.view(np.float32)


def splits(dim: int, rank: int, threads: int = ROW_THREADS) -> tuple[int, int]:
    """How many partial sums forward_backward.comp splits each dot product into: a DIM-output
    product (``z W^T``, ``dy W``) fills the workgroup; a RANK-output one (``z A^T``, ``dy B``)
    takes about sqrt(dim) chunks of about sqrt(dim), the shortest chain of chunk-then-combine."""
    split_d = max(1, min(threads // dim, dim))
    split_r = max(1, min(threads // rank, math.isqrt(dim)))
    return split_d, split_r


def shared_floats(dim: int, rank: int, rows: int, threads: int = ROW_THREADS) -> int:
    """Shared memory forward_backward.comp declares, in floats (its ``vec``, ``lowrank``, ``part``)."""
    split_d, split_r = splits(dim, rank, threads)
    return rows * (3 * dim + rank) + max(rows * (split_d * dim + split_r * rank), threads)


def default_threads(manager: Any, dim: int, rank: int) -> int:
    """forward_backward.comp's workgroup size for this device: ``ROW_THREADS`` on a CPU driver;
    on a GPU the largest power of two up to ``ROW_THREADS_GPU`` that the device allows and whose
    shared memory (one row) fits."""
    props = manager.get_device_properties()
    if int(props.get("device_type", -1)) == DEVICE_TYPE_CPU:
        return ROW_THREADS
    threads = ROW_THREADS_GPU
    while threads > 1 and (
        threads > int(props["max_work_group_invocations"])
        or shared_floats(dim, rank, 1, threads) > SHARED_FLOATS
    ):
        threads //= 2
    return threads


def default_rows(manager: Any, dim: int, rank: int, threads: int = ROW_THREADS) -> int:
    """Rows per workgroup for this device: ``ROWS_CPU`` on a CPU driver, else ``ROWS_GPU``;
    fewer if the shared memory would not hold them."""
    cpu = int(manager.get_device_properties().get("device_type", -1)) == DEVICE_TYPE_CPU
    rows = ROWS_CPU if cpu else ROWS_GPU
    while rows > 1 and shared_floats(dim, rank, rows, threads) > SHARED_FLOATS:
        rows //= 2
    return rows


@dataclass(frozen=True)
class SavedLayout:
    """The "saved" buffer (shaders/saved.glsl): what the forward/backward pass leaves for the
    weight-gradient pass, per module and batch row: input z, output gradient dy, t and dt, and
    one loss partial per workgroup (at most one per row)."""

    modules: int
    batch: int
    dim: int
    rank: int

    @property
    def size(self) -> int:
        m, b = self.modules, self.batch
        return 2 * m * b * self.dim + 2 * m * b * self.rank + b


class ResidentTrainer:
    """Records whole training steps (forward, loss, backward, update) into kp sequences: two
    dispatches of the application's shaders per step, then the optimizer's ``record_step``."""

    def __init__(
        self,
        manager: Any,
        adapter: Any,
        optimizer: Any,
        blocks: Sequence[Sequence[str]],
        base: dict[str, np.ndarray],
        x: np.ndarray,
        y: np.ndarray,
        *,
        rows_per_group: int | None = None,
        row_threads: int | None = None,
    ) -> None:
        """``rows_per_group``: batch rows per workgroup of forward_backward.comp (default:
        ``default_rows``); ``row_threads``: its workgroup size (a power of two the device allows;
        default: ``default_threads``). Both set summation orders, so runs compare bit for bit
        only at the same values."""
        self.mgr, self.adapter, self.opt = manager, adapter, optimizer
        self.blocks = [list(b) for b in blocks]
        self.steps, self.batch, self.dim = x.shape
        self.rank, self.scale = adapter.rank, float(adapter.scale)
        limit = int(manager.get_device_properties()["max_work_group_invocations"])
        if row_threads is None:
            row_threads = default_threads(manager, x.shape[2], adapter.rank)
        if row_threads < 1 or row_threads & (row_threads - 1) or row_threads > limit:
            raise ValueError(f"row_threads must be a power of two up to {limit} (got {row_threads})")
        self.threads = row_threads
        self.rows = rows_per_group or default_rows(manager, self.dim, self.rank, row_threads)
        need = shared_floats(self.dim, self.rank, self.rows, row_threads)
        if self.rows < 1 or need > SHARED_FLOATS:
            raise ValueError(
                f"dim {self.dim}, rank {self.rank}, {self.rows} rows per workgroup: needs {need} floats "
                f"of shared memory per workgroup; this example keeps to {SHARED_FLOATS} (16 KiB)"
            )
        keys = adapter.slices()  # PEFT key -> (offset, shape) in the flat buffers

        def lora(path: str, which: str) -> int:
            return int(
                next(off for key, (off, _) in keys.items() if key.endswith(f"{path}.lora_{which}.weight"))
            )

        # The module table (saved.glsl): where each module's A and B live, and its place in its block.
        modules = [(path, i == 0, i == len(b) - 1) for b in self.blocks for i, path in enumerate(b)]
        table = np.zeros((len(modules), 4), np.uint32)
        frozen = np.zeros((len(modules), 2, self.dim, self.dim), np.float32)
        for m, (path, first, last) in enumerate(modules):
            table[m, :3] = lora(path, "A"), lora(path, "B"), int(first) | (int(last) << 1)
            frozen[m] = base[path].T, base[path]  # W^T for the forward pass, W for the backward
        self.layout = SavedLayout(len(modules), self.batch, self.dim, self.rank)
        self.frozen, self.table = manager.tensor(frozen.reshape(-1)), manager.tensor_t(table.reshape(-1))
        self.xs = manager.tensor(np.ascontiguousarray(x, np.float32).reshape(-1))
        self.ys = manager.tensor(np.ascontiguousarray(y, np.float32).reshape(-1))
        self.saved = manager.tensor(np.zeros(self.layout.size, np.float32))
        self.losses = manager.tensor(np.zeros(self.steps, np.float32))
        self.params, self.grads = optimizer.param_buffer(), optimizer.grad_buffer()
        shape = (self.dim, self.rank, self.batch, len(modules), self.rows)  # saved.glsl's ids 1..5
        self.forward_backward = manager.algorithm(
            [self.frozen, self.xs, self.ys, self.params, self.table, self.saved],
            load_spirv("forward_backward"),
            [-(-self.batch // self.rows), 1, 1],  # rows_per_group rows of the batch each
            words(row_threads, *shape, *splits(self.dim, self.rank, row_threads)),
            words(0, 0.0, 0.0),
        )
        grad_elements = len(modules) * 2 * self.dim * self.rank
        self.weight_grads = manager.algorithm(
            [self.saved, self.table, self.grads, self.losses],
            load_spirv("weight_grads"),
            [-(-grad_elements // GRAD_THREADS), 1, 1],  # one thread per gradient element
            words(GRAD_THREADS, *shape),
            words(0, 0.0),
        )
        # The barriers after each dispatch (see gradient_ops): the same every step, built once.
        self.after_forward_backward = self._barrier([self.saved])
        self.after_weight_grads = self._barrier([self.saved, self.losses])
        self.seq = manager.sequence()
        # The data set and the frozen weights: uploaded once.
        self.seq.eval(
            kp.OpTensorSyncDevice([self.frozen, self.table, self.xs, self.ys, self.saved, self.losses])
        )

    # -- one training step, as dispatches -----------------------------------------------------

    def _barrier(self, tensors: list[Any]) -> Any:
        """Later compute reads and writes of ``tensors`` wait for earlier compute writes to them."""
        a, s = kp.AccessFlagBits, kp.PipelineStageFlagBits
        return kp.OpMemoryBarrier(
            tensors, a.shader_write, a.shader_read | a.shader_write, s.compute_shader, s.compute_shader
        )

    def gradient_ops(self, step: int) -> list[Any]:
        """Forward, loss and backward of one step: the LoRA gradients land in the optimizer's
        gradient buffer, the loss in ``losses[step]``. Two dispatches and two barriers."""
        n = self.batch * self.dim
        return [
            kp.OpAlgoDispatch(self.forward_backward, words(step, self.scale, 2.0 / n)),
            # weight_grads.comp reads what forward_backward.comp saved.
            self.after_forward_backward,
            kp.OpAlgoDispatch(self.weight_grads, words(step, self.scale)),
            # The next step's forward_backward.comp overwrites `saved` (read just now: the
            # barrier orders it after those reads) and its weight_grads.comp writes `losses`
            # again (a write after this write: the barrier makes this one available first).
            # The gradients need none here: record_step's first barrier covers its buffers.
            self.after_weight_grads,
        ]

    def record_step(self, step: int) -> None:
        """Record one whole training step into the current sequence."""
        for op in self.gradient_ops(step):
            self.seq.record(op)
        # Clipping and AdamW, bracketed by vk-adam's own barriers: it starts after the gradients
        # are written, and the next step's forward_backward.comp sees the updated params.
        self.opt.record_step(self.seq)

    # -- the loop -------------------------------------------------------------------------------

    def run(
        self,
        start: int,
        stop: int,
        *,
        lr: Callable[[int], float] | None = None,
        on_step: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        """Record steps ``start .. stop - 1`` into one sequence, submit it once, and return their
        losses (the only download). ``lr(step)`` sets the learning rate of each recorded step;
        ``on_step(step)`` runs after a step is recorded (e.g. a schedule's ``step()``)."""
        self.seq.clear()
        for step in range(start, stop):
            if lr is not None:
                self.opt.param_groups[0]["lr"] = lr(step)
            self.record_step(step)
            if on_step is not None:
                on_step(step)
        self.seq.record(kp.OpTensorSyncLocal([self.losses]))
        self.seq.eval()
        return np.array(self.losses.data()[start:stop], dtype=np.float32)

    def gradients_for(self, step: int) -> np.ndarray:
        """Forward, loss and backward of one step (no update); the flat gradients (for tests)."""
        self.seq.clear()
        for op in self.gradient_ops(step):
            self.seq.record(op)
        self.seq.record(kp.OpTensorSyncLocal([self.grads, self.losses]))
        self.seq.eval()
        return np.array(self.grads.data(), dtype=np.float32)

    def close(self) -> None:
        """Free the trainer's kp objects (its sequence, pipelines and tensors)."""
        for obj in (self.seq, self.forward_backward, self.weight_grads):
            obj.destroy()
        for tensor in (self.frozen, self.table, self.xs, self.ys, self.saved, self.losses):
            tensor.destroy()
