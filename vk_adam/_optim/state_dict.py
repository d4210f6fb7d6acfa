"""State dicts in torch.optim's layout: ``{'state': {i: {'step', <state buffers>}},
'param_groups': [...]}``, read from and written to an optimizer's device buffers.

Loading checks everything first and then applies it, so a bad state dict changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from .device import DeviceGroups, Group
from .groups import same_shader
from .layout import ParamSlot

Array = npt.NDArray[Any]


def _all_slots(groups: list[Group]) -> Iterator[tuple[int, Group, ParamSlot]]:
    index = 0
    for group in groups:
        for slot in group.slots:
            yield index, group, slot
            index += 1


def read_state_dict(device: DeviceGroups) -> dict[str, Any]:
    """The state dict of the optimizer whose device side is ``device`` (drained by the caller).

    State arrays are float32 copies shaped like their params; params that have not been
    stepped have no entry (as in torch)."""
    rt, groups = device.rt, device.groups
    tensors = [t for g in groups for b in g.sets for t in b.state.values()]
    if tensors:
        rt.run([rt.download_op(tensors)])
    state: dict[int, dict[str, Any]] = {}
    for index, group, slot in _all_slots(groups):
        if group.step == 0:
            continue
        bset = group.sets[slot.buffer_set]
        entry: dict[str, Any] = {"step": float(group.step)}
        for s in group.variant.state:
            flat = bset.state[s.name].data()[slot.offset : slot.offset + slot.size]
            entry[s.name] = flat.reshape(slot.shape).copy()
        state[index] = entry
    param_groups = []
    start = 0
    for group in groups:
        opts = {k: v for k, v in group.options.items() if k != "params"}
        opts["params"] = list(range(start, start + len(group.slots)))
        start += len(group.slots)
        param_groups.append(opts)
    return {"state": state, "param_groups": param_groups}


def write_state_dict(device: DeviceGroups, state_dict: Mapping[str, Any], drain: Callable[[], None]) -> None:
    """Check ``state_dict`` against the optimizer whose device side is ``device``, then wait
    for its submitted steps (``drain``) and load it. On error nothing is modified."""
    rt, rule, groups = device.rt, device.rule, device.groups
    if not isinstance(state_dict, Mapping) or "state" not in state_dict or "param_groups" not in state_dict:
        raise ValueError("a state dict has the keys 'state' and 'param_groups'")
    saved_groups = list(state_dict["param_groups"])
    if len(saved_groups) != len(groups):
        raise ValueError(
            f"loaded state dict has {len(saved_groups)} param group(s); this optimizer has {len(groups)}"
        )
    new_options = []
    for gi, (saved, group) in enumerate(zip(saved_groups, groups, strict=True)):
        if len(saved["params"]) != len(group.slots):
            raise ValueError(
                f"param group {gi} of the loaded state dict has {len(saved['params'])} params; "
                f"this optimizer's has {len(group.slots)}"
            )
        options = {**group.options, **{k: v for k, v in saved.items() if k in rule.defaults}}
        if isinstance(options.get("betas"), list):
            options["betas"] = tuple(options["betas"])
        rule.validate(options)
        if not same_shader(rule, options, device.zero_grad, group.variant, group.spec):
            raise ValueError(
                f"param group {gi} was saved with different shader options "
                f"({ {k: saved.get(k) for k in rule.defaults} }); create the optimizer "
                "with the same options as the one that saved it"
            )
        new_options.append(options)
    state = state_dict["state"]
    steps: list[int] = []
    writes: list[tuple[Any, int, Array]] = []
    params_flat = list(_all_slots(groups))
    for gi, group in enumerate(groups):
        ids = list(saved_groups[gi]["params"])
        group_steps = set()
        for local, saved_id in enumerate(ids):
            _, _, slot = params_flat[sum(len(g.slots) for g in groups[:gi]) + local]
            buffers = group.sets[slot.buffer_set].state
            entry = state.get(saved_id, state.get(str(saved_id)))
            if entry is None:
                group_steps.add(0)
                for s in group.variant.state:
                    writes.append(
                        (buffers[s.name], slot.offset, np.full(slot.size, s.initial_value, np.float32))
                    )
                continue
            group_steps.add(int(float(np.asarray(entry.get("step", 0)))))
            for s in group.variant.state:
                if s.name not in entry:
                    raise ValueError(f"state of param {saved_id} lacks {s.name!r}")
                value = np.asarray(entry[s.name], dtype=np.float32)
                if value.size != slot.size:
                    raise ValueError(
                        f"state {s.name!r} of param {saved_id} has {value.size} elements; "
                        f"the param has {slot.size}"
                    )
                writes.append((buffers[s.name], slot.offset, value.reshape(-1)))
        if len(group_steps) > 1:
            raise ValueError(
                f"param group {gi} has params at different steps {sorted(group_steps)}; "
                "vk-adam keeps one step count per group"
            )
        steps.append(group_steps.pop() if group_steps else 0)
    # Everything checked: apply.
    drain()
    touched: list[Any] = []
    for tensor, offset, value in writes:
        tensor.data()[offset : offset + value.size] = value
        if tensor not in touched:
            touched.append(tensor)
    if touched:
        rt.run([rt.upload_op(touched)])
    for group, options, step in zip(groups, new_options, steps, strict=True):
        group.options.update({k: v for k, v in options.items() if k != "params"})
        group.step = step
