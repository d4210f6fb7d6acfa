"""Optimizer state by parameter name, and ``torch.optim.AdamW`` state dicts built from it.

The optimizer over an adapter holds one flat state buffer per state name (``exp_avg``, ...);
the helpers here cut it into one tensor per PEFT key, and put such tensors back, all or
nothing. :func:`export_torch_adamw_state` / :func:`import_torch_adamw_state` move that state to
and from torch; :mod:`.checkpoint` stores it under the same names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .._optim import Optimizer
from .adapter import LoRAAdapter
from .errors import CheckpointError
from .modules import F32, Array

# -- optimizer state by parameter name --------------------------------------------------------


def _state_by_name(adapter: LoRAAdapter, optimizer: Optimizer) -> tuple[int, dict[str, dict[str, F32]]]:
    """The step and the float32 state of each PEFT key (bfloat16 or 8-bit state decoded)."""
    sd = optimizer.state_dict(float32=True)
    flat_state = sd["state"].get(0)
    if flat_state is None:
        return 0, {}
    step = int(flat_state["step"])
    out: dict[str, dict[str, F32]] = {}
    for key, (offset, shape) in adapter.slices().items():
        out[key] = {
            name: value[offset : offset + shape[0] * shape[1]].reshape(shape).copy()
            for name, value in flat_state.items()
            if name != "step"
        }
    return step, out


def _load_state_by_name(
    adapter: LoRAAdapter,
    optimizer: Optimizer,
    step: int,
    state: Mapping[str, Mapping[str, Array]],
    hyper: Mapping[str, Any] | None = None,
) -> None:
    """Load per-name state (and hyperparameters) into the flat optimizer, all or nothing."""
    names = optimizer.rule.state_names(optimizer.param_groups[0])
    slices = adapter.slices()
    flat: dict[str, Any] = {}
    if step > 0:
        missing = sorted(set(slices) - set(state))
        unknown = sorted(set(state) - set(slices))
        if missing or unknown:
            raise CheckpointError(
                f"optimizer state does not match the adapter: missing {missing[:5]}, unknown {unknown[:5]}"
            )
        flat["step"] = float(step)
        for name in names:
            buffer = np.zeros(adapter.flat_params.size, np.float32)
            for key, (offset, shape) in slices.items():
                if name not in state[key]:
                    raise CheckpointError(f"optimizer state of {key} lacks {name!r}")
                value = np.asarray(state[key][name], np.float32)
                if value.shape != shape:
                    raise CheckpointError(
                        f"state {name!r} of {key} has shape {value.shape}; expected {shape}"
                    )
                buffer[offset : offset + shape[0] * shape[1]] = value.reshape(-1)
            flat[name] = buffer
    # Only the hyperparameters are needed here: build them without state_dict(), which would
    # download every state buffer from the device first.
    groups = [
        {k: v for k, v in g.items() if k != "params"} | {"params": [i]}
        for i, g in enumerate(optimizer.param_groups)
    ]
    if hyper:
        groups[0].update(
            {k: (tuple(v) if isinstance(v, list) else v) for k, v in hyper.items() if k in groups[0]}
        )
    try:
        optimizer.load_state_dict({"state": {0: flat} if flat else {}, "param_groups": groups})
    except (TypeError, ValueError) as exc:  # the optimizer's refusal: nothing was loaded
        raise CheckpointError(str(exc)) from exc


def export_torch_adamw_state(adapter: LoRAAdapter, optimizer: Optimizer) -> dict[str, Any]:
    """A ``torch.optim.AdamW.state_dict()`` for the adapter's tensors in ``named_tensors()`` order.

    Load it into ``torch.optim.AdamW(params_in_that_order)``; values are torch tensors.
    """
    import torch

    step, state = _state_by_name(adapter, optimizer)
    keys = list(adapter.named_tensors())
    group = {k: v for k, v in optimizer.param_groups[0].items() if k != "params"}
    group["betas"] = tuple(group["betas"])
    torch_state = {}
    if step:
        for i, key in enumerate(keys):
            torch_state[i] = {"step": torch.tensor(float(step))}
            torch_state[i].update({n: torch.from_numpy(v.copy()) for n, v in state[key].items()})
    group.update(
        {
            "foreach": None,
            "capturable": False,
            "differentiable": False,
            "fused": None,
            "params": list(range(len(keys))),
        }
    )
    return {"state": torch_state, "param_groups": [group]}


def import_torch_adamw_state(
    adapter: LoRAAdapter, optimizer: Optimizer, torch_state_dict: Mapping[str, Any]
) -> None:
    """Load a torch.optim.AdamW state dict whose params are the adapter's tensors in
    ``named_tensors()`` order (one param group)."""
    groups = list(torch_state_dict["param_groups"])
    keys = list(adapter.named_tensors())
    if len(groups) != 1 or len(groups[0]["params"]) != len(keys):
        raise ValueError(f"expected one param group of {len(keys)} params (the adapter's tensors in order)")
    ids = list(groups[0]["params"])
    steps = set()
    state: dict[str, dict[str, Array]] = {}
    for key, pid in zip(keys, ids, strict=True):
        entry = torch_state_dict["state"].get(pid)
        if entry is None:
            steps.add(0)
            continue
        steps.add(int(float(entry["step"])))
        state[key] = {
            n: np.asarray(v.detach().cpu().numpy() if hasattr(v, "detach") else v, np.float32)
            for n, v in entry.items()
            if n != "step"
        }
    if len(steps) != 1:
        raise ValueError(f"params are at different steps {sorted(steps)}; vk-adam keeps one per group")
    hyper = {k: groups[0][k] for k in ("lr", "betas", "eps", "weight_decay") if k in groups[0]}
    _load_state_by_name(adapter, optimizer, steps.pop(), state, hyper)
