"""The ``params`` argument of every optimizer, as torch.optim takes it (arrays or kp tensors,
or param-group dicts), turned into group dicts with each param checked: its kind, dtype,
layout, and that no two share memory. Pure NumPy, no Vulkan device; ``groups`` fills in and
validates the hyperparameters around it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .. import _formats as fmt
from .._runtime import is_kp_tensor
from .._values import show


def normalize_groups(params: Iterable[Any], defaults: Mapping[str, Any]) -> list[dict[str, Any]]:
    """torch.optim's ``params`` argument (arrays/tensors, or param-group dicts) as a list of
    group dicts with every hyperparameter filled in; every param checked."""
    not_a_list = isinstance(params, (np.ndarray, str, bytes, Mapping)) or is_kp_tensor(params)
    if not_a_list or not isinstance(params, Iterable):
        raise TypeError(
            f"params must be a list of arrays/tensors or of param-group dicts (got {show(params)})"
        )
    items = list(params)
    if not items:
        raise ValueError("optimizer got an empty parameter list")
    raw = items if isinstance(items[0], Mapping) else [{"params": items}]
    groups = []
    for index, group in enumerate(raw):
        if not isinstance(group, Mapping) or "params" not in group:
            raise TypeError(f"param group {index} must be a dict with a 'params' key")
        plist = group["params"]
        if isinstance(plist, (str, bytes, Mapping)) or not isinstance(plist, Iterable):
            raise TypeError(
                f"'params' of param group {index} must be a list of arrays/tensors (got {show(plist)})"
            )
        plist = [plist] if isinstance(plist, np.ndarray) or is_kp_tensor(plist) else list(plist)
        if not plist:
            raise ValueError(f"param group {index} has no params")
        extra = {k: v for k, v in group.items() if k != "params"}
        groups.append({**defaults, **extra, "params": plist})
    seen: set[int] = set()
    for gi, group in enumerate(groups):
        for pi, p in enumerate(group["params"]):
            if id(p) in seen:
                raise ValueError(f"param {pi} of group {gi} appears in more than one place")
            seen.add(id(p))
            if is_kp_tensor(p):
                continue
            if not isinstance(p, np.ndarray):
                raise TypeError(
                    f"param {pi} of group {gi} is a {type(p).__name__}; expected a NumPy "
                    "float32 array or a kp tensor"
                )
            name = fmt.dtype_name(p.dtype)
            if name is None or not p.flags.c_contiguous or not p.flags.writeable:
                raise TypeError(
                    f"param {pi} of group {gi} must be a writeable, C-contiguous float32, float16 "
                    f"or bfloat16 (ml_dtypes.bfloat16) array (got dtype {p.dtype}, "
                    f"contiguous={p.flags.c_contiguous}, writeable={p.flags.writeable}): vk-adam "
                    "updates params in place, so convert it once with "
                    "np.ascontiguousarray(p, dtype=np.float32) and keep that array"
                )
            first = group["params"][0]
            if isinstance(first, np.ndarray) and p.dtype != first.dtype:
                raise TypeError(
                    f"param {pi} of group {gi} is {name} but param 0 of the group is "
                    f"{fmt.dtype_name(first.dtype)}: a group's params share one flat buffer of one "
                    "dtype; put params of another dtype in a param group of their own"
                )
            if p.size == 0:
                raise ValueError(f"param {pi} of group {gi} is empty")
    check_no_overlap(groups)
    return groups


def check_no_overlap(groups: Sequence[Mapping[str, Any]]) -> None:
    """NumPy params (C-contiguous, so each is one byte range) must not share memory: each is
    written back after a step, and views of one array would overwrite each other's update."""
    spans = sorted(
        (p.__array_interface__["data"][0], p.nbytes, gi, pi)
        for gi, group in enumerate(groups)
        for pi, p in enumerate(group["params"])
        if isinstance(p, np.ndarray)
    )
    end, owner = -1, (0, 0)
    for start, nbytes, gi, pi in spans:
        if start < end:
            raise ValueError(
                f"param {pi} of group {gi} shares memory with param {owner[1]} of group {owner[0]} "
                "(views of one array?); each param needs memory of its own"
            )
        if start + nbytes > end:
            end, owner = start + nbytes, (gi, pi)
