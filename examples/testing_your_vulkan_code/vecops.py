"""vecops: ``y = a * x + y``, then ``z = y * y``, as two Vulkan compute shaders through kp.

A stand-in for *your* project: it uses kp (Kompute) directly and knows nothing of vk-adam. Its
tests (``tests/``) get their Vulkan device from vk-adam's pytest plugin (fixtures ``kp_manager``
and ``vulkan_device``) and run under ``pytest --vk-validation``; docs/testing-your-vulkan-code.md
walks through them. The shaders are GLSL in ``shaders/``, compiled by :func:`compile_shader`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import kp
import numpy as np

SHADERS = Path(__file__).resolve().parent / "shaders"
#: ``local_size_x`` of both shaders.
LOCAL_SIZE = 64


def compile_shader(name: str, out_dir: Path) -> bytes:
    """``shaders/<name>.comp`` compiled to SPIR-V by glslangValidator."""
    exe = shutil.which("glslangValidator")
    if exe is None:
        raise RuntimeError(
            "glslangValidator not found: install glslang-tools (Debian/Ubuntu) or the Vulkan SDK"
        )
    out = out_dir / f"{name}.spv"
    done = subprocess.run(
        [exe, "-V", str(SHADERS / f"{name}.comp"), "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"glslangValidator failed on {name}.comp:\n{done.stdout}{done.stderr}")
    return out.read_bytes()


class VecOps:
    """Three buffers of ``n`` floats on ``mgr`` and the two pipelines that work on them."""

    def __init__(self, mgr: Any, spirv: dict[str, bytes], n: int, max_groups: int) -> None:
        self.mgr, self.n = mgr, n
        self.x, self.y, self.z = (mgr.tensor(np.zeros(n, np.float32)) for _ in range(3))
        # As many groups as the vector needs, at most the device's limit; the shaders stride.
        groups = (max(1, min(-(-n // LOCAL_SIZE), max_groups)), 1, 1)
        self.saxpy = mgr.algorithm([self.x, self.y], spirv["saxpy"], groups, [], self._push(0.0))
        self.square = mgr.algorithm([self.y, self.z], spirv["square"], groups, [], self._push(0.0))

    def _push(self, a: float) -> np.ndarray:
        """The push constants ``{float a; uint n;}``: float32 words, n as its bit pattern (kp's
        NumPy overload takes one dtype for all)."""
        push = np.array([a, 0.0], np.float32)
        push.view(np.uint32)[1] = self.n
        return push

    def ops(self, a: float) -> list[Any]:
        """Upload x and y; y = a*x + y; z = y*y; download y and z."""
        access, stage = kp.AccessFlagBits, kp.PipelineStageFlagBits
        return [
            kp.OpTensorSyncDevice([self.x, self.y]),
            kp.OpAlgoDispatch(self.saxpy, self._push(a)),
            # square.comp reads y, which saxpy.comp has just written: without this barrier the
            # reads race the writes (nothing else orders two dispatches in one command buffer).
            kp.OpMemoryBarrier(
                [self.y], access.shader_write, access.shader_read, stage.compute_shader, stage.compute_shader
            ),
            kp.OpAlgoDispatch(self.square, self._push(a)),
            kp.OpTensorSyncLocal([self.y, self.z]),
        ]

    def run(self, a: float, x: np.ndarray, y: np.ndarray, ops: list[Any] | None = None) -> tuple[Any, Any]:
        """One submission of ``ops`` (default: :meth:`ops`) on new x and y; returns (y, z)."""
        self.x.data()[:] = x
        self.y.data()[:] = y
        seq = self.mgr.sequence()
        for op in self.ops(a) if ops is None else ops:
            seq.record(op)
        seq.eval()
        seq.destroy()
        return self.y.data().copy(), self.z.data().copy()

    def close(self) -> None:
        for obj in (self.saxpy, self.square, self.x, self.y, self.z):
            obj.destroy()
