"""A GPU-resident LoRA fine-tune: forward, loss, backward and the optimizer step all on Vulkan.

An application's view of vk-adam (copy this folder to start your own). The application owns
the ``kp.Manager``, its data and activations (one workspace buffer) and its shaders
(``shaders/*.comp``, compiled to ``spirv/`` by the build: ``python build_shaders.py``); vk-adam
owns the LoRA weights, their gradients and the optimizer state, in its flat buffers:

* the forward pass reads the LoRA weights from ``opt.param_buffer()`` (= ``adapter.device_params``),
* the backward pass writes their gradients into ``opt.grad_buffer()`` at ``adapter.slices()``,
* ``opt.record_step(seq)`` records the update into the application's own ``kp.Sequence``,

so many whole training steps are recorded back to back and submitted at once. The host uploads
the data set once and reads back only the loss (once per submission) and, at the end, the adapter.

The model: residual blocks ``h + lin_n(relu(... relu(lin_1(h))))`` of frozen square linear maps
``W [out, in]``, each with LoRA: ``lin(z) = z W^T + s (z A^T) B^T``. Loss: mean squared error.
Every matmul is one dispatch of ``matmul.comp``; the loss and its gradient one of ``mse_loss.comp``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kp
import numpy as np

SPIRV_DIR = Path(__file__).resolve().parent / "spirv"
TILE = 16  # matmul.comp's tile (its local size)
GRID = 32  # matmul workgroups: they stride over the output tiles, so one pipeline fits every shape
WS, PRM, GRD = 0, 1, 2  # matmul.comp's buffers: workspace, LoRA params, LoRA grads


def load_spirv(name: str) -> bytes:
    path = SPIRV_DIR / f"{name}.spv"
    if not path.exists():
        raise FileNotFoundError(
            f"{path} is missing: the example's shaders are compiled at build time; run "
            "`python build_shaders.py` (or `pip install -e .`) in the repository"
        )
    return path.read_bytes()


def push(*values: int | float) -> np.ndarray:
    """Push constants as kp takes them (float32), ints carried as their bit patterns."""
    words = np.zeros(len(values), np.uint32)
    for i, v in enumerate(values):
        if isinstance(v, float):
            words.view(np.float32)[i] = v
        else:
            words[i] = v
    return words.view(np.float32)


@dataclass(frozen=True)
class Operand:
    """A matrix read through strides: element (i, k) at ``buf[off + i * rs + k * cs]``."""

    buf: int
    off: int
    rs: int
    cs: int


def matmul(
    m: int,
    n: int,
    k: int,
    a: Operand,
    b: Operand,
    c: tuple[int, int],
    *,
    alpha: float = 1.0,
    beta: float = 0.0,
    d_off: int = 0,
    mode: int = 0,
    mask_off: int = 0,
) -> np.ndarray:
    """Push constants of ``C = epilogue(alpha A B + beta D)`` (see matmul.comp); C row-major."""
    tiles_n = (n + TILE - 1) // TILE
    return push(
        m,
        n,
        k,
        a.buf,
        a.off,
        a.rs,
        a.cs,
        b.buf,
        b.off,
        b.rs,
        b.cs,
        c[0],
        c[1],
        n,
        d_off,
        mode,
        mask_off,
        tiles_n,
        float(alpha),
        float(beta),
    )


class Workspace:
    """Offsets of the application's arrays inside one flat float32 device buffer."""

    def __init__(self) -> None:
        self.size = 0

    def alloc(self, *shape: int) -> int:
        offset = self.size
        self.size += int(np.prod(shape))
        return offset


class ResidentTrainer:
    """Records whole training steps (forward, loss, backward, update) into kp sequences."""

    def __init__(
        self,
        manager: Any,
        adapter: Any,
        optimizer: Any,
        blocks: Sequence[Sequence[str]],
        base: dict[str, np.ndarray],
        x: np.ndarray,
        y: np.ndarray,
    ) -> None:
        self.mgr, self.adapter, self.opt = manager, adapter, optimizer
        self.blocks = [list(b) for b in blocks]
        self.steps, self.batch, self.dim = x.shape
        self.rank, self.scale = adapter.rank, float(adapter.scale)
        keys = adapter.slices()  # PEFT key -> (offset, shape) in the flat buffers
        self.lora = {
            (path, which): next(
                off for key, (off, _) in keys.items() if key.endswith(f"{path}.lora_{which}.weight")
            )
            for block in self.blocks
            for path in block
            for which in ("A", "B")
        }
        ws = Workspace()
        bd, br = (self.batch, self.dim), (self.batch, self.rank)
        self.w = {path: ws.alloc(self.dim, self.dim) for block in self.blocks for path in block}
        self.x_off, self.y_off = ws.alloc(*x.shape), ws.alloc(*y.shape)
        self.h = [ws.alloc(*bd) for _ in self.blocks]  # h[l + 1]: output of block l (h[0] is x)
        self.z = [[ws.alloc(*bd) for _ in b[1:]] for b in self.blocks]  # inputs of a block's 2nd.. module
        self.t = [[ws.alloc(*br) for _ in b] for b in self.blocks]  # z A^T of every module
        self.g = [ws.alloc(*bd) for _ in range(3)]  # backward scratch: gradients w.r.t. activations
        self.dt = ws.alloc(*br)
        host = np.zeros(ws.size, np.float32)
        for path, off in self.w.items():
            host[off : off + self.dim * self.dim] = base[path].reshape(-1)
        host[self.x_off : self.x_off + x.size] = x.reshape(-1)
        host[self.y_off : self.y_off + y.size] = y.reshape(-1)
        self.ws = manager.tensor(host)
        self.losses = manager.tensor(np.zeros(self.steps, np.float32))
        self.params, self.grads = optimizer.param_buffer(), optimizer.grad_buffer()
        self.matmul_algo = manager.algorithm(
            [self.ws, self.params, self.grads],
            load_spirv("matmul"),
            [GRID, 1, 1],
            np.zeros(0, np.float32),
            matmul(1, 1, 1, Operand(0, 0, 0, 0), Operand(0, 0, 0, 0), (0, 0)),
        )
        self.loss_algo = manager.algorithm(
            [self.ws, self.losses],
            load_spirv("mse_loss"),
            [1, 1, 1],
            np.zeros(0, np.float32),
            push(0, 0, 0, 0, 0, 0.0),
        )
        self.seq = manager.sequence()
        self.seq.eval(kp.OpTensorSyncDevice([self.ws, self.losses]))  # the data set: uploaded once

    # -- one training step, as dispatches -----------------------------------------------------

    def _barrier(self, tensors: list[Any]) -> Any:
        """Every dispatch reads what the previous one wrote: compute -> compute, all buffers."""
        a, s = kp.AccessFlagBits, kp.PipelineStageFlagBits
        return kp.OpMemoryBarrier(
            tensors, a.shader_write, a.shader_read | a.shader_write, s.compute_shader, s.compute_shader
        )

    def _mm(self, pc: np.ndarray) -> list[Any]:
        return [kp.OpAlgoDispatch(self.matmul_algo, pc), self._barrier([self.ws, self.params, self.grads])]

    def forward_ops(self, step: int) -> list[Any]:
        b, d, r, s = self.batch, self.dim, self.rank, self.scale
        ops: list[Any] = []
        h_in = self.x_off + step * b * d
        for layer, block in enumerate(self.blocks):
            z = h_in
            for i, path in enumerate(block):
                last = i == len(block) - 1
                out = self.h[layer] if last else self.z[layer][i]
                a_off, b_off = self.lora[(path, "A")], self.lora[(path, "B")]
                t = self.t[layer][i]
                # t = z A^T                                                [batch, rank]
                ops += self._mm(matmul(b, r, d, Operand(WS, z, d, 1), Operand(PRM, a_off, 1, d), (WS, t)))
                # out = z W^T (+ h_in on the block's last module: the residual)
                ops += self._mm(
                    matmul(
                        b,
                        d,
                        d,
                        Operand(WS, z, d, 1),
                        Operand(WS, self.w[path], 1, d),
                        (WS, out),
                        beta=1.0 if last else 0.0,
                        d_off=h_in,
                    )
                )
                # out += s t B^T, then ReLU between modules
                ops += self._mm(
                    matmul(
                        b,
                        d,
                        r,
                        Operand(WS, t, r, 1),
                        Operand(PRM, b_off, 1, r),
                        (WS, out),
                        alpha=s,
                        beta=1.0,
                        d_off=out,
                        mode=0 if last else 1,
                    )
                )
                z = out
            h_in = self.h[layer]
        return ops

    def loss_ops(self, step: int) -> list[Any]:
        n = self.batch * self.dim
        pc = push(n, self.h[-1], self.y_off + step * n, self.g[0], step, 2.0 / n)
        return [kp.OpAlgoDispatch(self.loss_algo, pc), self._barrier([self.ws, self.losses])]

    def backward_ops(self, step: int) -> list[Any]:
        b, d, r, s = self.batch, self.dim, self.rank, self.scale
        ops: list[Any] = []
        g = self.g[0]  # d loss / d (output of the current block), written by mse_loss.comp
        for layer in reversed(range(len(self.blocks))):
            block = self.blocks[layer]
            h_in = self.x_off + step * b * d if layer == 0 else self.h[layer - 1]
            dy = g  # gradient w.r.t. the current module's output (pre-activation)
            for i in reversed(range(len(block))):
                path, t = block[i], self.t[layer][i]
                z = h_in if i == 0 else self.z[layer][i - 1]
                a_off, b_off = self.lora[(path, "A")], self.lora[(path, "B")]
                # grad B = s dy^T t                                       [out, rank]
                ops += self._mm(
                    matmul(d, r, b, Operand(WS, dy, 1, d), Operand(WS, t, r, 1), (GRD, b_off), alpha=s)
                )
                # dt = s dy B                                             [batch, rank]
                ops += self._mm(
                    matmul(b, r, d, Operand(WS, dy, d, 1), Operand(PRM, b_off, r, 1), (WS, self.dt), alpha=s)
                )
                # grad A = dt^T z                                         [rank, in]
                ops += self._mm(
                    matmul(r, d, b, Operand(WS, self.dt, 1, r), Operand(WS, z, d, 1), (GRD, a_off))
                )
                if layer == 0 and i == 0:
                    break  # no gradient w.r.t. the inputs
                dz = next(buf for buf in self.g if buf not in (dy, g))
                # dz = dy W (+ g: the residual, on the block's first module)
                ops += self._mm(
                    matmul(
                        b,
                        d,
                        d,
                        Operand(WS, dy, d, 1),
                        Operand(WS, self.w[path], d, 1),
                        (WS, dz),
                        beta=1.0 if i == 0 else 0.0,
                        d_off=g,
                    )
                )
                # dz += dt A, then the ReLU's mask (its output z > 0) between modules
                ops += self._mm(
                    matmul(
                        b,
                        d,
                        r,
                        Operand(WS, self.dt, r, 1),
                        Operand(PRM, a_off, d, 1),
                        (WS, dz),
                        beta=1.0,
                        d_off=dz,
                        mode=0 if i == 0 else 2,
                        mask_off=z,
                    )
                )
                dy = dz
            g = dy
        return ops

    def record_step(self, step: int) -> None:
        """Record one whole training step into the current sequence."""
        for op in [*self.forward_ops(step), *self.loss_ops(step), *self.backward_ops(step)]:
            self.seq.record(op)
        self.opt.record_step(self.seq)  # bracketed by vk-adam's own barriers
        self.seq.record(self._barrier([self.ws, self.params, self.grads]))

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
        for op in [*self.forward_ops(step), *self.loss_ops(step), *self.backward_ops(step)]:
            self.seq.record(op)
        self.seq.record(kp.OpTensorSyncLocal([self.grads, self.losses]))
        self.seq.eval()
        return np.array(self.grads.data(), dtype=np.float32)

    def destroy(self) -> None:
        for obj in (self.seq, self.matmul_algo, self.loss_algo, self.ws, self.losses):
            obj.destroy()


def open_manager(device_index: int) -> Any:
    """The application's own kp.Manager on the Vulkan device vk-adam selected."""
    return kp.Manager(device_index)
