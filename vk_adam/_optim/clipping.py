"""Gradient clipping by global norm, on the device (torch.nn.utils.clip_grad_norm_).

Two passes, before the update dispatches of a step:

1. ``grad_sumsq.comp``, one dispatch per buffer set (per chunk of a set larger than one binding
   may span, ``windows.py``): each workgroup writes the sum of squares of its share of the
   gradients to ``partials[PARTIALS_PER_SET * slot + workgroup]``;
2. ``grad_clip_scale.comp``, one workgroup: sums every partial in a fixed order and writes
   ``grad_scale = min(1, max_norm / (norm + 1e-6))`` and the norm into the status buffer.

Every update shader multiplies its gradients by ``grad_scale`` (``vk_adam_rule.glsl``), so every
rule, plugins included, is clipped without a change to its GLSL and without a host round trip.
The workgroup count of pass 1 depends only on the buffer's length, and both passes add in a
fixed order, so the same gradients give the same norm bit for bit. A NaN or Inf gradient makes
the norm non-finite, which pass 2 turns into the skip flag when ``skip_nonfinite`` is on: one
pass serves both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .._rules import load_spirv
from .._runtime import Dispatch, Runtime

#: Partial sums per buffer set: the most workgroups pass 1 runs (262,144 threads: enough to
#: keep a large GPU's memory busy while reading the gradients).
PARTIALS_PER_SET = 1024
#: Status buffer words: skip flag, gradient scale, last norm, padding.
STATUS_WORDS = 4


def initial_status() -> npt.NDArray[np.uint32]:
    """The status buffer's first contents: no skip, gradient scale 1.0."""
    status = np.zeros(STATUS_WORDS, np.uint32)
    status.view(np.float32)[1] = 1.0
    return status


def check_max_norm(value: Any) -> float | None:
    """``clip_grad_norm``: None (off) or a positive, finite real number."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"clip_grad_norm must be a positive number or None (got {value!r})")
    if not (math.isfinite(float(value)) and float(value) > 0):
        raise ValueError(f"clip_grad_norm must be a positive, finite number (got {value!r})")
    return float(value)


class GradClipper:
    """The partial-sums buffer, the pass-2 pipeline, and pass-1 pipelines per gradient buffer."""

    def __init__(self, rt: Runtime, status: Any, slots: int, skip_nonfinite: bool) -> None:
        self.rt = rt
        self.count = PARTIALS_PER_SET * slots
        self.partials = rt.buffer(np.zeros(self.count, np.float32))
        self._sumsq = load_spirv("grad_sumsq")
        self._scale = rt.pipeline(
            [self.partials, status],
            load_spirv("grad_clip_scale"),
            1,
            rt.sized_spec((float(skip_nonfinite),)),
            2,
            threads=rt.facts.threads,
        )
        self._partials_barrier = rt.barrier_op([self.partials])

    def sumsq_pipeline(
        self,
        grad: Any,
        n: int,
        set_index: int,
        grad_format: int = 0,
        *,
        windows: Sequence[tuple[int, int]] | None = None,
    ) -> tuple[Any, Any]:
        """Pass 1 over one gradient buffer (``grad_format``: 0 fp32, 1 fp16, 2 bf16; ``windows``:
        the chunk of it, as ``Runtime.pipeline`` takes them; ``set_index``: the chunk's slot): its
        pipeline and its (constant) dispatch op."""
        threads = self.rt.facts.threads
        groups = min(PARTIALS_PER_SET, -(-n // threads))
        spec = self.rt.sized_spec(np.array([grad_format], np.uint32).view(np.float32).tolist())
        algo = self.rt.pipeline(
            [grad, self.partials], self._sumsq, groups * threads, spec, 2, threads=threads, windows=windows
        )
        push = np.array([n, PARTIALS_PER_SET * set_index], np.uint32).view(np.float32)
        return algo, self.rt.dispatch_op(algo, push)

    def finish_ops(self, max_norm: float) -> list[Any]:
        """Pass 2, after every pass-1 dispatch; the caller orders the updates after it. Its push
        constants are this step's bound: a :class:`Dispatch` the runtime makes when it records."""
        push = np.array([self.count, 0], np.uint32).view(np.float32)
        push[1] = max_norm
        return [self._partials_barrier, Dispatch(self._scale, push)]
