"""Functional form: one Adam/AdamW update of one (param, grad, m, v) buffer set.

The entry point of the WebGPU kernel vk-adam replaces, minus its flaws: the hyperparameters
travel as push constants (one cached pipeline), and the math is torch's (see README).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._builtin_rules import ADAMW
from ._device import kp_module, open_manager
from ._optimizer import MAX_ELEMENTS, MAX_WORKGROUPS, WORKGROUP_SIZE, _is_kp_tensor
from ._spirv import load_spirv


@functools.cache
def _shared_manager(device: int | str | None) -> Any:
    return open_manager(device)[0]


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
    hyper = {**ADAMW.defaults, **(config or {})}
    unknown = set(hyper) - set(ADAMW.defaults)
    if unknown:
        raise TypeError(f"unknown Adam config key(s) {sorted(unknown)}; known: {sorted(ADAMW.defaults)}")
    ADAMW.validate(hyper)
    if int(step) < 1 or int(step) != step:
        raise ValueError(f"step must be an integer >= 1 (got {step}); the first update is step 1")
    buffers = [param, grad, exp_avg, exp_avg_sq]
    names = ["param", "grad", "exp_avg", "exp_avg_sq"]
    if hyper["amsgrad"]:
        if max_exp_avg_sq is None:
            raise ValueError("amsgrad=True needs the max_exp_avg_sq buffer")
        buffers.append(max_exp_avg_sq)
        names.append("max_exp_avg_sq")
    on_device = [_is_kp_tensor(b) for b in buffers]
    if any(on_device) and not all(on_device):
        raise TypeError("pass either NumPy arrays or kp tensors for every buffer, not a mix")
    kp = kp_module()
    if all(on_device):
        if manager is None:
            raise ValueError("kp tensor buffers need the kp.Manager that created them: manager=...")
        sizes = [int(b.size()) for b in buffers]
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
    n = sizes[0]
    if not 0 < n <= MAX_ELEMENTS:
        raise ValueError(f"buffers hold {n} elements; between 1 and {MAX_ELEMENTS} are supported")

    mgr = manager if manager is not None else _shared_manager(device)
    owned: list[Any] = []
    if all(on_device):
        tensors = buffers
    else:
        tensors = [mgr.tensor_t(b.reshape(-1)) for b in buffers]
        owned += tensors
    status = mgr.tensor_t(np.zeros(1, np.uint32))
    owned.append(status)
    variant = ADAMW.variant_for(hyper)
    spec = np.asarray([float(zero_grad), *ADAMW.spec_constants(hyper)], np.float32)
    push = np.empty(1 + variant.hyper_count, np.float32)
    push.view(np.uint32)[0] = n
    push[1:] = ADAMW.push_constants(hyper, int(step))
    vec4_items = (n + 3) // 4
    groups = max(1, min(MAX_WORKGROUPS, (vec4_items + WORKGROUP_SIZE - 1) // WORKGROUP_SIZE))
    bound = [tensors[0], tensors[1], status, *tensors[2:]]
    algo = mgr.algorithm(bound, load_spirv(str(variant.spirv)), [groups, 1, 1], spec, push)
    seq = mgr.sequence()
    try:
        seq.record(kp.OpTensorSyncDevice(owned))
        seq.record(kp.OpAlgoDispatch(algo, push))
        if not all(on_device):
            seq.record(kp.OpTensorSyncLocal(tensors))
        seq.eval()
        if not all(on_device):
            for array, tensor in zip(buffers, tensors, strict=True):
                array.reshape(-1)[:] = tensor.data()
    finally:
        seq.destroy()
        algo.destroy()
        for tensor in owned:
            tensor.destroy()
