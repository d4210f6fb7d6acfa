"""State dicts in torch.optim's layout: ``{'state': {i: {'step', <state buffers>}},
'param_groups': [...]}``, read from and written to an optimizer's device buffers.

Loading checks everything first and then applies it, so a bad state dict changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from .. import _formats as fmt
from .._rules import UpdateRule
from .._values import as_step, is_index, show
from .device import Group
from .groups import check_hyper_types, same_shader
from .layout import ParamSlot
from .storage import STATE_DTYPE_OF, Storage, blocks, decode_state, is_signed, native_state, quantize

#: State-dict key of a 16-bit param's fp32 master copy, and the suffix of 8-bit state's absmax.
MASTER_KEY = "master_param"
ABSMAX_SUFFIX = ".absmax"
#: Param-group keys a state dict holds that are not a rule's hyperparameters.
_NOT_HYPER = frozenset(
    {"seed", "state_dtype", "initial_lr", "foreach", "fused", "capturable", "differentiable"}
)

Array = npt.NDArray[Any]


class BufferOps(Protocol):
    """The runtime calls a state dict needs: buffers' words to the host, ranges of words back."""

    def host_words(self, tensors: Sequence[Any]) -> list[Array]: ...
    def write_words(self, writes: Sequence[tuple[Any, Any, int, Array]]) -> None: ...


class StateHolder(Protocol):
    """What reading and writing a state dict needs of an optimizer's buffers: its device side
    (``device.DeviceGroups``), or ZeRO-1's host copy of the whole state (vk_adam.distributed),
    so both produce and check exactly one layout."""

    seed: int

    @property
    def rt(self) -> BufferOps: ...
    @property
    def rule(self) -> UpdateRule: ...
    @property
    def groups(self) -> list[Group]: ...
    @property
    def storage(self) -> Storage: ...
    @property
    def zero_grad(self) -> bool: ...


def _all_slots(groups: list[Group]) -> Iterator[tuple[int, Group, ParamSlot]]:
    index = 0
    for group in groups:
        for slot in group.slots:
            yield index, group, slot
            index += 1


def read_state_dict(device: StateHolder, *, float32: bool = False) -> dict[str, Any]:
    """The state dict of the optimizer whose device side is ``device`` (drained by the caller).

    State arrays are copies shaped like their params, in their stored format (float32,
    bfloat16, uint8 codes plus ``<name>.absmax``), or all float32 with ``float32=True``;
    params that have not been stepped have no entry (as in torch)."""
    rt, groups = device.rt, device.groups
    tensors = [
        t
        for g in groups
        for b in g.sets
        for t in (*b.state.values(), *b.absmax.values(), b.master)
        if t is not None
    ]
    words_of = {id(t): w for t, w in zip(tensors, rt.host_words(tensors), strict=True)}
    state: dict[int, dict[str, Any]] = {}
    for index, group, slot in _all_slots(groups):
        if group.step == 0:
            continue
        parts = [(group.sets[part.buffer_set], part) for part in slot.parts()]
        entry: dict[str, Any] = {"step": float(group.step)}
        for k, s in enumerate(group.variant.state):
            values, scales = [], []
            for bset, part in parts:
                code = bset.format.state[k]
                words = words_of[id(bset.state[s.name])]
                absmax = words_of[id(bset.absmax[s.name])] if s.name in bset.absmax else None
                if float32:
                    values.append(decode_state(code, words, absmax, part.offset, part.size))
                    continue
                value, scale = native_state(code, words, absmax, part.offset, part.size)
                values.append(value)
                if scale is not None:
                    scales.append(scale)
            entry[s.name] = _joined(values).reshape(slot.shape)
            if scales:  # a piece's blocks are its param's: their scales join in order
                entry[f"{s.name}{ABSMAX_SUFFIX}"] = _joined(scales)
        if parts[0][0].master is not None and not float32:
            flats = [words_of[id(b.master)][part.offset : part.offset + part.size] for b, part in parts]
            entry[MASTER_KEY] = _joined(flats).reshape(slot.shape).copy()
        state[index] = entry
    param_groups = []
    start = 0
    for group in groups:
        opts = {k: v for k, v in group.options.items() if k != "params"}
        opts["params"] = list(range(start, start + len(group.slots)))
        if not float32:
            opts["state_dtype"] = device.storage.state_dtype
            opts["seed"] = device.seed
        start += len(group.slots)
        param_groups.append(opts)
    return {"state": state, "param_groups": param_groups}


def _joined(arrays: list[Array]) -> Array:
    """The pieces of one param's values, in order, as one flat array."""
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


def _checked_groups(state_dict: Any, count: int) -> tuple[list[Mapping[str, Any]], Mapping[Any, Any]]:
    """The param groups and the per-param state of ``state_dict``, checked for structure: a
    dict with ``state`` (a dict) and ``param_groups`` (``count`` dicts, each with a list of
    distinct integer param ids under ``params``)."""
    if not isinstance(state_dict, Mapping):
        raise TypeError(
            f"state_dict must be a dict with the keys 'state' and 'param_groups' (got {show(state_dict)})"
        )
    if "state" not in state_dict or "param_groups" not in state_dict:
        raise ValueError(
            "a state dict has the keys 'state' and 'param_groups'; this one has "
            f"{sorted(map(str, state_dict))}"
        )
    saved_groups, state = state_dict["param_groups"], state_dict["state"]
    if not isinstance(saved_groups, (list, tuple)):
        raise TypeError(
            f"state_dict['param_groups'] must be a list of param group dicts (got {show(saved_groups)})"
        )
    if not isinstance(state, Mapping):
        raise TypeError(f"state_dict['state'] must be a dict of param id -> param state (got {show(state)})")
    if len(saved_groups) != count:
        raise ValueError(
            f"loaded state dict has {len(saved_groups)} param group(s); this optimizer has {count}"
        )
    seen: set[int] = set()
    for gi, saved in enumerate(saved_groups):
        if not isinstance(saved, Mapping):
            raise TypeError(f"param group {gi} of the loaded state dict must be a dict (got {show(saved)})")
        if "params" not in saved:
            raise ValueError(
                f"param group {gi} of the loaded state dict has no 'params' (its list of param ids)"
            )
        ids = saved["params"]
        if not isinstance(ids, (list, tuple)) or not all(is_index(i) for i in ids):
            raise TypeError(
                f"'params' of param group {gi} of the loaded state dict must be a list of integer "
                f"param ids (got {show(ids)})"
            )
        repeated = seen.intersection(int(i) for i in ids) or len(set(map(int, ids))) != len(ids)
        if repeated:
            raise ValueError(f"param group {gi} of the loaded state dict repeats a param id: {list(ids)}")
        seen.update(int(i) for i in ids)
    return list(saved_groups), state


def _state_array(value: Any, name: str, param_id: int) -> Array:
    """A saved state buffer as a flat copy: an array (or nested list) of real numbers; uint8
    arrays (8-bit codes) and bfloat16 arrays keep their dtype, other numbers become float32."""
    try:
        array = np.asarray(value)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise TypeError(
            f"state {name!r} of param {param_id} is not an array of numbers ({show(value)})"
        ) from exc
    if array.dtype == np.uint8 or array.dtype == fmt.BFLOAT16:
        return array.reshape(-1).copy()
    if array.dtype.kind not in "fiu":
        raise TypeError(
            f"state {name!r} of param {param_id} must be an array of floats (got dtype {array.dtype}: "
            f"{show(value)})"
        )
    return array.astype(np.float32).reshape(-1)


#: One pending write: (kp tensor, dtype its words are viewed as, element offset, values).
Write = tuple[Any, Any, int, Array]


def _state_writes(
    group: Group, slot: ParamSlot, k: int, value: Array, absmax: Any, param_id: int
) -> list[Write]:
    """The writes that store one saved state buffer (the ``k``-th of the rule's) of one param
    in its buffers' format, piece by piece for a param cut into pieces."""
    name = group.variant.state[k].name
    code = group.sets[slot.buffer_set].format.state[k]  # one format for the whole group
    where = f"state {name!r} of param {param_id}"
    if value.size != slot.size:
        raise ValueError(f"{where} has {value.size} elements; the param has {slot.size}")
    if value.dtype == np.uint8:
        if code < fmt.STATE_INT8_SIGNED:
            raise ValueError(
                f"{where} holds 8-bit codes, but this optimizer keeps it as "
                f"{STATE_DTYPE_OF[code]}: create the optimizer with state_dtype='int8-blockwise' "
                "(as the one that saved it), or save with state_dict(float32=True)"
            )
        if absmax is None:
            raise ValueError(f"{where} holds 8-bit codes but the state dict lacks {name + ABSMAX_SUFFIX!r}")
        scale = _state_array(absmax, name + ABSMAX_SUFFIX, param_id).astype(np.float32)
        if scale.size != blocks(slot.size) or not np.all(np.isfinite(scale)) or np.any(scale < 0):
            raise ValueError(
                f"{name + ABSMAX_SUFFIX!r} of param {param_id} must hold {blocks(slot.size)} finite, "
                f"non-negative block maxima (got {scale.size} values)"
            )
        codes = value
    elif code == fmt.STATE_F32 or code == fmt.STATE_BF16:
        codes, scale = value.astype(np.float32 if code == fmt.STATE_F32 else fmt.BFLOAT16), None
    else:
        codes, scale = quantize(value.astype(np.float32), is_signed(code))
    writes: list[Write] = []
    for part in slot.parts():  # pieces start on a block: a piece's blocks are the param's own
        bset, at = group.sets[part.buffer_set], part.start
        piece = codes[at : at + part.size]
        writes.append((bset.state[name], piece.dtype.type, part.offset, piece))
        if scale is not None:
            first = at // fmt.BLOCK
            scales = scale[first : first + blocks(part.size)]
            writes.append((bset.absmax[name], np.float32, part.offset // fmt.BLOCK, scales))
    return writes


def _master_writes(group: Group, slot: ParamSlot, entry: Any, param_id: int) -> list[Write]:
    """The master copy of a 16-bit param: the saved one, else the param's current value."""
    if group.sets[slot.buffer_set].master is None:
        return []
    if entry is not None and MASTER_KEY in entry:
        values = _state_array(entry[MASTER_KEY], MASTER_KEY, param_id).astype(np.float32)
        if values.size != slot.size:
            raise ValueError(
                f"{MASTER_KEY!r} of param {param_id} has {values.size} elements; the param has {slot.size}"
            )
    else:
        values = np.asarray(slot.host, np.float32).reshape(-1)
    return [
        (
            group.sets[part.buffer_set].master,
            np.float32,
            part.offset,
            values[part.start : part.start + part.size],
        )
        for part in slot.parts()
    ]


def _lacks(
    name: str,
    param_id: int,
    entry: Mapping[str, Any],
    saved: Mapping[str, Any],
    rule: UpdateRule,
    group: Group,
) -> str:
    """The message for a state entry without one of this rule's buffers: what it holds instead,
    when that looks like another rule's state (an SGD state dict loaded into AdamW)."""
    mine = [s.name for s in group.variant.state]
    message = f"state of param {param_id} lacks {name!r} (rule {rule.name!r} keeps {mine})"
    theirs = sorted(
        str(k) for k in entry if k not in ("step", MASTER_KEY) and not str(k).endswith(ABSMAX_SUFFIX)
    )
    hyper = sorted(str(k) for k in saved if k != "params" and k not in rule.defaults and k not in _NOT_HYPER)
    if not theirs and not hyper:
        return message
    looks = (f"buffers {theirs}" if theirs else "no state buffers") + (
        f" and hyperparameters {hyper}" if hyper else ""
    )
    return (
        f"{message}; this looks like the state of a rule with {looks}: load it into an optimizer "
        "of the rule that saved it"
    )


def write_state_dict(
    device: StateHolder, state_dict: Mapping[str, Any], drain: Callable[[], None], *, one_count: bool = False
) -> None:
    """Check ``state_dict`` against the optimizer whose device side is ``device``, then wait
    for its submitted steps (``drain``) and load it. On error nothing is modified: every
    check (structure, types, hyperparameters, steps, buffer sizes) runs before the first write.
    ``one_count``: every group must be at the same step (a capturable optimizer's one clock)."""
    rt, rule, groups = device.rt, device.rule, device.groups
    saved_groups, state = _checked_groups(state_dict, len(groups))
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
        check_hyper_types(rule, options, f"param group {gi} of the loaded state dict")
        rule.validate(options)
        if not same_shader(rule, options, device.zero_grad, group.variant, group.spec):
            raise ValueError(
                f"param group {gi} was saved with different shader options "
                f"({ {k: saved.get(k) for k in rule.defaults} }); create the optimizer "
                "with the same options as the one that saved it"
            )
        new_options.append(options)
    seeds = {saved.get("seed") for saved in saved_groups} - {None}
    seed = seeds.pop() if len(seeds) == 1 else None
    if seed is not None and (not is_index(seed) or not 0 <= int(seed) < 2**32):
        raise TypeError(
            f"'seed' of the loaded state dict must be an integer from 0 to 2**32 - 1 (got {show(seed)})"
        )
    steps: list[int] = []
    writes: list[Write] = []
    params_flat = list(_all_slots(groups))
    for gi, group in enumerate(groups):
        ids = [int(i) for i in saved_groups[gi]["params"]]
        group_steps = set()
        for local, saved_id in enumerate(ids):
            _, _, slot = params_flat[sum(len(g.slots) for g in groups[:gi]) + local]
            key = saved_id if saved_id in state else str(saved_id)
            if key not in state:  # never stepped: the initial state
                group_steps.add(0)
                for k, s in enumerate(group.variant.state):
                    initial = np.full(slot.size, s.initial_value, np.float32)
                    writes += _state_writes(group, slot, k, initial, None, saved_id)
                writes += _master_writes(group, slot, None, saved_id)
                continue
            entry = state[key]
            if not isinstance(entry, Mapping):
                raise TypeError(
                    f"state of param {saved_id} must be a dict of 'step' and state buffers "
                    f"(got {show(entry)})"
                )
            group_steps.add(
                as_step(entry["step"], f"'step' of param {saved_id}", 0) if "step" in entry else 0
            )
            for k, s in enumerate(group.variant.state):
                if s.name not in entry:
                    raise ValueError(_lacks(s.name, saved_id, entry, saved_groups[gi], rule, group))
                value = _state_array(entry[s.name], s.name, saved_id)
                absmax = entry.get(s.name + ABSMAX_SUFFIX)
                writes += _state_writes(group, slot, k, value, absmax, saved_id)
            writes += _master_writes(group, slot, entry, saved_id)
        if len(group_steps) > 1:
            raise ValueError(
                f"param group {gi} has params at different steps {sorted(group_steps)}; "
                "vk-adam keeps one step count per group"
            )
        steps.append(group_steps.pop() if group_steps else 0)
    if one_count and len(set(steps)) > 1:
        raise ValueError(
            f"the state dict's param groups are at different steps {steps}; a capturable optimizer "
            "keeps one step count on the device for every group"
        )
    # Everything checked: apply.
    drain()
    rt.write_words(writes)
    for group, options, step in zip(groups, new_options, steps, strict=True):
        group.options.update({k: v for k, v in options.items() if k != "params"})
        group.step = step
    if seed is not None:
        device.seed = int(seed)
