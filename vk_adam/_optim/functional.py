"""Functional form: one Adam/AdamW update of one (param, grad, m, v) buffer set.

The entry point of the WebGPU kernel vk-adam replaces, minus its flaws: the hyperparameters
travel as push constants (one cached pipeline), and the math is torch's (see docs/semantics.md).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._rules import ADAMW, MAX_RULE_SPEC_CONSTANTS, load_spirv
from .._runtime import Runtime, element_count, host_view, is_kp_tensor, max_elements, refuse_unwritten
from .._values import as_step, show
from .clipping import initial_status
from .groups import check_hyper_types, check_options
from .storage import GroupFormat
from .variants import loop_shape, update_launch
from .windows import FP32, chunks, window


def _has(name: str) -> bool:
    return True  # the built-in shaders are always built


def adam_update(
    param: Any,
    grad: Any,
    exp_avg: Any,
    exp_avg_sq: Any,
    step: int,
    config: Mapping[str, Any] | None = None,
    *,
    max_exp_avg_sq: Any = None,
    zero_grad: bool = True,
    manager: Any = None,
    device: int | str | None = None,
) -> None:
    """Apply Adam/AdamW step ``step`` (1-based) to one buffer set, in place.

    The buffers are NumPy float32 arrays of one size (all updated in place, the gradient zeroed
    when ``zero_grad``), or kp tensors on ``manager`` (updated on the device, no host copy).
    ``config`` holds AdamW's hyperparameters (``lr``, ``betas``, ``eps``, ``weight_decay``,
    ``amsgrad``, ``maximize``, ``decoupled_weight_decay``), defaulting to torch.optim.AdamW's.
    With ``amsgrad`` pass ``max_exp_avg_sq`` too.
    """
    if config is not None and not isinstance(config, Mapping):
        raise TypeError(f"config must be a dict of Adam hyperparameters or None (got {show(config)})")
    hyper = {**ADAMW.defaults, **(config or {})}
    unknown = set(hyper) - set(ADAMW.defaults)
    if unknown:
        raise TypeError(f"unknown Adam config key(s) {sorted(unknown)}; known: {sorted(ADAMW.defaults)}")
    check_hyper_types(ADAMW, hyper)
    ADAMW.validate(hyper)
    step = as_step(step, "step", 1)
    manager = check_options(device, manager, zero_grad=zero_grad)
    buffers = [param, grad, exp_avg, exp_avg_sq]
    names = ["param", "grad", "exp_avg", "exp_avg_sq"]
    if hyper["amsgrad"]:
        if max_exp_avg_sq is None:
            raise ValueError("amsgrad=True needs the max_exp_avg_sq buffer")
        buffers.append(max_exp_avg_sq)
        names.append("max_exp_avg_sq")
    on_device = [is_kp_tensor(b) for b in buffers]
    if any(on_device) and not all(on_device):
        raise TypeError("pass either NumPy arrays or kp tensors for every buffer, not a mix")
    if all(on_device):
        if manager is None:
            raise ValueError("kp tensor buffers need the kp.Manager that created them: manager=...")
        for name, b in zip(names, buffers, strict=True):
            refuse_unwritten(b, name)
        sizes = [element_count(b) for b in buffers]
    else:
        for name, b in zip(names, buffers, strict=True):
            if (
                not isinstance(b, np.ndarray)
                or b.dtype != np.float32
                or not b.flags.c_contiguous
                or not b.flags.writeable
            ):
                raise TypeError(f"{name} must be a writeable, C-contiguous float32 NumPy array")
        sizes = [b.size for b in buffers]
    if len(set(sizes)) != 1:
        raise ValueError(f"buffers differ in size: {dict(zip(names, sizes, strict=True))}")
    for i, j in itertools.combinations(range(len(buffers)), 2):
        a, b = buffers[i], buffers[j]
        if a is b or (isinstance(a, np.ndarray) and np.may_share_memory(a, b)):
            raise ValueError(f"{names[i]} and {names[j]} share memory; each buffer needs its own")
    n = sizes[0]
    if not 0 < n <= max_elements():
        raise ValueError(f"buffers hold {n} elements; between 1 and {max_elements()} are supported")

    # The process's shared device (or the application's manager); the pipeline is shared too,
    # so a call builds only its buffers and a descriptor set.
    runtime = Runtime(manager=manager, device=device)
    owned: list[Any] = []
    algos: list[Any] = []
    try:
        if all(on_device):
            tensors = buffers
        else:
            tensors = [runtime.buffer(b) for b in buffers]
            owned += tensors
        status = runtime.buffer(initial_status())  # no skip, gradient scale 1
        owned.append(status)
        variant = ADAMW.variant_for(hyper)
        spec = [float(zero_grad), *ADAMW.spec_constants(hyper)]
        values = ADAMW.push_constants(hyper, step)
        # The harness's bindings for the storage formats (absmax per state, master copy,
        # quantization tables) are unused with fp32 everything: one small buffer stands in.
        # The read-only tables binding gets a stand-in of its own: chunked dispatches (windows.py)
        # would otherwise read in one the buffer the previous one may write at another binding.
        unused, tables = runtime.buffer(np.zeros(4, np.float32)), runtime.buffer(np.zeros(4, np.float32))
        owned += [unused, tables]
        states = tensors[2:]
        bound = [tensors[0], tensors[1], status, *states, *[unused] * len(states), unused, tables]
        dispatches = []
        spans = chunks(n, runtime.facts.max_binding_bytes, runtime.facts.binding_alignment)  # windows.py
        for chunk in spans:
            push = np.zeros(2 + variant.hyper_count, np.float32)  # n, the rule's floats, rng key
            push.view(np.uint32)[0] = chunk.count
            push[1:-1] = values
            per = [FP32, FP32, None, *[FP32] * len(states), *[None] * (len(states) + 2)]
            windows = None
            if len(spans) > 1:
                windows = [(0, 0) if w is None else window(4 * n, w, chunk) for w in per]
            # The harness's loop at this device's workgroup size (fp32 everything: no 8-bit path).
            launch = update_launch(
                loop_shape(runtime.facts.info),
                str(variant.spirv),
                GroupFormat(),
                chunk.count,
                _has,
            )
            full_spec = (*spec, *(0.0,) * (1 + MAX_RULE_SPEC_CONSTANTS - len(spec)), *launch.spec)
            shader = load_spirv(launch.spirv)
            algos.append(
                runtime.pipeline(
                    bound, shader, launch.items, full_spec, len(push), threads=launch.threads, windows=windows
                )
            )
            dispatches.append(runtime.dispatch_op(algos[-1], push))
        ops = [runtime.barrier_op(bound), runtime.upload_op(owned), *dispatches, runtime.barrier_op(bound)]
        if not all(on_device):
            ops.append(runtime.download_op(tensors))
        runtime.run(ops)
        if not all(on_device):
            for array, tensor in zip(buffers, tensors, strict=True):
                array.reshape(-1)[:] = host_view(tensor)
    finally:
        for algo in algos:
            runtime.destroy_pipeline(algo)
        for tensor in owned:
            runtime.free_buffer(tensor)
        runtime.close()
