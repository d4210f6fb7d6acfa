"""A GPU-resident LoRA fine-tune: forward, loss, backward and the optimizer step all on Vulkan.

An application's view of vk-adam (copy this folder to start your own). The application owns
the ``kp.Manager``, its data, frozen weights and saved activations (kp tensors) and its shaders
(``shaders/*.comp``, compiled to ``spirv/`` by the build: ``python build_shaders.py``); vk-adam
owns the LoRA weights, their gradients and the optimizer state, in its flat buffers:

* the forward pass reads the LoRA weights from ``opt.param_buffer()`` (= ``adapter.device_params``),
* the backward pass writes their gradients into ``opt.grad_buffer()`` at ``adapter.slices()``,
* ``opt.record_step(seq)`` records the update into the application's own ``kp.Sequence``.

**Record once, evaluate in a loop.** ``B`` whole training steps are recorded into one sequence
once, and every evaluation of it trains the next ``B`` steps; nothing is recorded again. That
needs every value a step depends on to live on the device, not in push constants frozen at
record time: the optimizer is made with ``capturable=True`` (its step count, bias corrections
and lr are on the device; a ``vk_adam.schedules`` schedule runs there with
``opt.schedule_on_device``), and the application keeps its own step counter, a one-word kp
tensor: the k-th step of a recording trains on batch ``counter + k`` of the data set, and the
recording's last dispatch (``advance.comp``) adds ``B``. The host uploads the data set once and
reads back only the losses (once per evaluation) and, at the end, the adapter.

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
import time
from collections.abc import Sequence
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
    """forward_backward.comp's workgroup size for this device: the largest power of two up to
    ``ROW_THREADS`` (CPU driver) or ``ROW_THREADS_GPU`` (GPU) that the device allows and whose
    shared memory (one row) fits."""
    props = manager.get_device_properties()
    cpu = int(props.get("device_type", -1)) == DEVICE_TYPE_CPU
    threads = ROW_THREADS if cpu else ROW_THREADS_GPU
    # A CPU driver is held to the device's limits too: a profile (or a small device) may
    # allow fewer invocations, or a smaller x size, than ROW_THREADS.
    limit = min(int(props["max_work_group_invocations"]), int(props["max_work_group_size"][0]))
    while threads > 1 and (threads > limit or shared_floats(dim, rank, 1, threads) > SHARED_FLOATS):
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
    """Whole training steps (forward, loss, backward, update) recorded once into kp sequences
    and evaluated again and again: two dispatches of the application's shaders per step, then
    the optimizer's ``record_step``. The optimizer must be capturable (``capturable=True``)."""

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
        if not getattr(optimizer, "capturable", False):
            raise ValueError(
                "ResidentTrainer records its steps once and evaluates them again and again, so "
                "the optimizer must keep its step count and lr on the device: make it with "
                "capturable=True (adapter.optimizer(rule, manager=mgr, capturable=True, ...))"
            )
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
        # The application's step counter: the batch the next evaluation starts on (always below
        # self.steps; advance.comp wraps it). The host knows its value without reading it back.
        self.counter = manager.tensor_t(np.zeros(1, np.uint32))
        self.position = 0
        self.params, self.grads = optimizer.param_buffer(), optimizer.grad_buffer()
        shape = (self.dim, self.rank, self.batch, len(modules), self.rows)  # saved.glsl's ids 1..5
        self.forward_backward = manager.algorithm(
            [self.frozen, self.xs, self.ys, self.params, self.table, self.saved, self.counter],
            load_spirv("forward_backward"),
            [-(-self.batch // self.rows), 1, 1],  # rows_per_group rows of the batch each
            words(row_threads, *shape, *splits(self.dim, self.rank, row_threads)),
            words(0, 0, 0.0, 0.0),
        )
        grad_elements = len(modules) * 2 * self.dim * self.rank
        self.weight_grads = manager.algorithm(
            [self.saved, self.table, self.grads, self.losses, self.counter],
            load_spirv("weight_grads"),
            [-(-grad_elements // GRAD_THREADS), 1, 1],  # one thread per gradient element
            words(GRAD_THREADS, *shape),
            words(0, 0, 0.0),
        )
        self.advance = manager.algorithm([self.counter], load_spirv("advance"), [1, 1, 1], [], words(0, 0))
        # The barriers after each dispatch (see gradient_ops): the same every step, built once.
        self.after_forward_backward = self._barrier([self.saved])
        self.after_weight_grads = self._barrier([self.saved, self.losses])
        # Around the counter's one write per evaluation (see recording).
        self.counter_barrier = self._barrier([self.counter])
        #: One recording per number of steps an evaluation takes (see recording): usually one.
        self.recordings: dict[int, Any] = {}
        #: Evaluations of the recordings so far, and the seconds the last one took (submission,
        #: device work, wait, loss download), for the bench.
        self.evaluations = 0
        self.last_eval_seconds = 0.0
        # The data set, the frozen weights and the counter: uploaded once.
        self._once(
            [
                kp.OpTensorSyncDevice(
                    [self.frozen, self.table, self.xs, self.ys, self.saved, self.losses, self.counter]
                )
            ]
        )

    # -- one training step, as dispatches -----------------------------------------------------

    def _barrier(self, tensors: list[Any]) -> Any:
        """Later compute reads and writes of ``tensors`` wait for earlier compute writes to them."""
        a, s = kp.AccessFlagBits, kp.PipelineStageFlagBits
        return kp.OpMemoryBarrier(
            tensors, a.shader_write, a.shader_read | a.shader_write, s.compute_shader, s.compute_shader
        )

    def _once(self, ops: list[Any]) -> None:
        """Run ``ops`` in a sequence of their own, once (uploads, tests' one-off passes)."""
        seq = self.mgr.sequence()
        try:
            for op in ops:
                seq.record(op)
            seq.eval()
        finally:
            seq.destroy()

    def gradient_ops(self, offset: int) -> list[Any]:
        """Forward, loss and backward of the step ``offset`` places into a recording: it trains
        on batch ``counter + offset`` (the counter as the evaluation finds it, modulo the data
        set), its LoRA gradients land in the optimizer's gradient buffer, its loss in
        ``losses`` at the batch's index. Two dispatches and two barriers."""
        n = self.batch * self.dim
        return [
            kp.OpAlgoDispatch(self.forward_backward, words(offset, self.steps, self.scale, 2.0 / n)),
            # weight_grads.comp reads what forward_backward.comp saved.
            self.after_forward_backward,
            kp.OpAlgoDispatch(self.weight_grads, words(offset, self.steps, self.scale)),
            # The next step's forward_backward.comp overwrites `saved` (read just now: the
            # barrier orders it after those reads) and its weight_grads.comp writes `losses`
            # again (a write after this write: the barrier makes this one available first).
            # The gradients need none here: record_step's first barrier covers its buffers.
            self.after_weight_grads,
        ]

    def recording(self, steps: int) -> Any:
        """The sequence that trains ``steps`` steps each time it is evaluated, recorded on first
        use and kept: every step's batch, lr, step number and bias corrections come from the
        device when it runs, so the same commands serve every evaluation."""
        if steps in self.recordings:
            return self.recordings[steps]
        if not 1 <= steps <= self.steps:
            raise ValueError(
                f"an evaluation trains 1 to {self.steps} steps (the data set's batches: each step "
                f"writes its loss at its batch's index, read back once per evaluation); got {steps}"
            )
        seq = self.mgr.sequence()
        # The previous evaluation's advance.comp wrote the counter; this one's shaders read it.
        # A barrier's first scope is everything submitted before it on the queue, so this makes
        # that write visible here (a fence wait on the host does not make device writes visible
        # to later device reads; a seek's upload is covered by each dispatch's own barrier).
        seq.record(self.counter_barrier)
        for offset in range(steps):
            for op in self.gradient_ops(offset):
                seq.record(op)
            # Clipping and AdamW, bracketed by vk-adam's own barriers: it starts after the
            # gradients are written, and the next step's forward_backward.comp sees the updated
            # params. Captured (capturable=True): recorded once, it steps at every evaluation.
            self.opt.record_step(seq)
        # Every step read the counter; advance.comp writes it: a write after reads, which needs
        # an execution dependency. record_step's last barrier gives one already (it covers every
        # buffer's accesses in its stages); this one keeps the recording right without it.
        seq.record(self.counter_barrier)
        seq.record(kp.OpAlgoDispatch(self.advance, words(steps, self.steps)))
        seq.record(kp.OpTensorSyncLocal([self.losses]))  # the only download
        self.recordings[steps] = seq
        return seq

    def seek(self, step: int) -> None:
        """Set the counter so the next evaluation starts on batch ``step`` (a resumed run, or a
        run that does not go on from where the last one stopped): one small upload, only when
        the counter is elsewhere."""
        batch = step % self.steps
        if batch != self.position:
            self.counter.data()[0] = batch
            self._once([kp.OpTensorSyncDevice([self.counter])])
            self.position = batch

    # -- the loop -------------------------------------------------------------------------------

    def run(self, start: int, stop: int) -> np.ndarray:
        """Train steps ``start .. stop - 1`` (at most the data set's length) with one evaluation of
        the recording of ``stop - start`` steps, and return their losses (the only download).
        Step ``t`` trains on batch ``t % steps``. The lr is the optimizer's: its device schedule
        (``opt.schedule_on_device``), or ``param_groups[0]["lr"]`` as set before the call."""
        seq = self.recording(stop - start)
        self.seek(start)
        t0 = time.perf_counter()
        seq.eval()
        self.last_eval_seconds = time.perf_counter() - t0
        self.evaluations += 1
        self.position = stop % self.steps
        batches = np.arange(start, stop) % self.steps
        return np.array(self.losses.data()[batches], dtype=np.float32)

    def gradients_for(self, step: int) -> np.ndarray:
        """Forward, loss and backward of step ``step`` (no update); the flat gradients (for tests)."""
        self.seek(step)
        self._once([*self.gradient_ops(0), kp.OpTensorSyncLocal([self.grads, self.losses])])
        return np.array(self.grads.data(), dtype=np.float32)

    def close(self) -> None:
        """Free the trainer's kp objects (its recordings, pipelines and tensors)."""
        for seq in self.recordings.values():
            seq.destroy()
        self.recordings.clear()
        for obj in (self.forward_backward, self.weight_grads, self.advance):
            obj.destroy()
        for tensor in (self.frozen, self.table, self.xs, self.ys, self.saved, self.losses, self.counter):
            tensor.destroy()
