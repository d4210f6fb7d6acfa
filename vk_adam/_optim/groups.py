"""Checking what the user passes, before anything is built or written: param groups,
gradients, and hyperparameters changed between steps. Pure NumPy, no Vulkan device."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from .._inputs import convert_float_or_refuse
from .._rules.rule import ShaderVariant, UpdateRule
from .._runtime import is_kp_tensor
from .layout import ParamSlot


class GroupShape(Protocol):
    """What gradient checks need to know of a param group."""

    slots: list[ParamSlot]
    host_mode: bool


def shader_spec(rule: UpdateRule, options: Mapping[str, Any], zero_grad: bool) -> tuple[float, ...]:
    """The specialization constants a group's pipeline is built with (zero-grad flag first)."""
    return (float(zero_grad), *(float(s) for s in rule.spec_constants(options)))


def same_shader(
    rule: UpdateRule,
    options: Mapping[str, Any],
    zero_grad: bool,
    variant: ShaderVariant,
    spec: tuple[float, ...],
) -> bool:
    """Whether ``options`` select the pipeline a group was built with."""
    return rule.variant_for(options) is variant and shader_spec(rule, options, zero_grad) == spec


def group_options(
    rule: UpdateRule, params: Iterable[Any], hyper: Mapping[str, Any], *, has_manager: bool
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """An optimizer's defaults (the rule's, overridden by ``hyper``) and its checked param
    groups, each with every hyperparameter filled in and validated by the rule."""
    unknown = set(hyper) - set(rule.defaults)
    if unknown:
        raise TypeError(
            f"unknown hyperparameter(s) {sorted(unknown)} for rule {rule.name!r}; "
            f"it takes {sorted(rule.defaults)}"
        )
    defaults = {**rule.defaults, **hyper}
    groups = normalize_groups(params, defaults)
    for options in groups:
        rule.validate(options)
    if not has_manager and any(is_kp_tensor(p) for g in groups for p in g["params"]):
        raise ValueError("params include kp tensors: pass the kp.Manager that created them as manager=...")
    return defaults, groups


def check_recordable(groups: Sequence[GroupShape], skip_nonfinite: bool) -> None:
    """``record_step`` needs params on the device and no decision by the host."""
    if any(g.host_mode for g in groups):
        raise TypeError("record_step needs params on the device (kp tensors); NumPy params use step()")
    if skip_nonfinite:
        raise ValueError("skip_nonfinite needs the host to read the check's result: use step()")


def refuse_host_grads(prepared: list[list[Any]] | None) -> None:
    """``record_step`` takes gradients that are on the device already."""
    if prepared is not None and any(isinstance(g, np.ndarray) for gs in prepared for g in gs):
        raise TypeError(
            "record_step takes gradients already on the device (kp tensors, or None for the "
            "optimizer's gradient buffer): a NumPy gradient would be uploaded when your sequence "
            "runs, after later calls may have overwritten it. Use step() for NumPy gradients"
        )


def normalize_groups(params: Iterable[Any], defaults: Mapping[str, Any]) -> list[dict[str, Any]]:
    """torch.optim's ``params`` argument (arrays/tensors, or param-group dicts) as a list of
    group dicts with every hyperparameter filled in; every param checked."""
    if isinstance(params, np.ndarray) or is_kp_tensor(params):
        raise TypeError("params must be a list of arrays/tensors or of param-group dicts")
    items = list(params)
    if not items:
        raise ValueError("optimizer got an empty parameter list")
    raw = items if isinstance(items[0], Mapping) else [{"params": items}]
    groups = []
    for index, group in enumerate(raw):
        if not isinstance(group, Mapping) or "params" not in group:
            raise TypeError(f"param group {index} must be a dict with a 'params' key")
        plist = group["params"]
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
            if p.dtype != np.float32 or not p.flags.c_contiguous or not p.flags.writeable:
                raise TypeError(
                    f"param {pi} of group {gi} must be a writeable, C-contiguous float32 array "
                    f"(got dtype {p.dtype}, contiguous={p.flags.c_contiguous}, "
                    f"writeable={p.flags.writeable}): vk-adam updates params in place, so "
                    "convert it once with np.ascontiguousarray(p, dtype=np.float32) and keep "
                    "that array"
                )
            if p.size == 0:
                raise ValueError(f"param {pi} of group {gi} is empty")
    return groups


def prepare_grads(grads: Sequence[Any] | None, groups: Sequence[GroupShape]) -> list[list[Any]] | None:
    """Validate every gradient before anything is written; per group, per param."""
    if grads is None:
        return None
    if isinstance(grads, np.ndarray) or is_kp_tensor(grads):
        grads = [grads]
    grads = list(grads)
    expected = sum(len(g.slots) for g in groups)
    if len(grads) != expected:
        raise ValueError(
            f"step() got {len(grads)} gradient(s) for {expected} param(s); pass one per param, "
            "in the order of the params (group by group)"
        )
    out: list[list[Any]] = []
    k = 0
    for gi, group in enumerate(groups):
        prepared = []
        for pi, slot in enumerate(group.slots):
            g = grads[k]
            name = f"param {pi} of group {gi}" if len(groups) > 1 else f"param {pi}"
            k += 1
            if is_kp_tensor(g):
                if group.host_mode:
                    raise TypeError(f"grad for {name} is a kp tensor but the param is a NumPy array")
                if int(g.size()) != slot.size:
                    raise ValueError(
                        f"grad for {name} has {int(g.size())} elements; the param has {slot.size}"
                    )
                prepared.append(g)
                continue
            g = np.asarray(g)
            if g.shape != slot.shape and not (not group.host_mode and g.size == slot.size):
                raise ValueError(f"grad for {name} has shape {g.shape}; the param has shape {slot.shape}")
            if g.dtype != np.float32:
                # stacklevel: this function, Optimizer.step, the caller of step()
                convert_float_or_refuse(
                    f"grad for {name}", g.dtype, np.issubdtype(g.dtype, np.floating), stacklevel=3
                )
                g = g.astype(np.float32)
            prepared.append(g)
        out.append(prepared)
    return out


class OptionsOf(Protocol):
    """What re-validation needs to know of a param group."""

    options: dict[str, Any]
    variant: ShaderVariant
    spec: tuple[float, ...]
    validated: dict[str, Any] | None


def revalidate(rule: UpdateRule, groups: Sequence[OptionsOf], zero_grad: bool) -> None:
    """Re-check hyperparameters changed since the last step (e.g. by a schedule), before any
    GPU work, like torch's validation. Unchanged groups cost one dict comparison."""
    for group in groups:
        if group.options == group.validated:
            continue
        rule.validate(group.options)
        if not same_shader(rule, group.options, zero_grad, group.variant, group.spec):
            raise ValueError(
                "options that select the shader (e.g. amsgrad, maximize, nesterov, momentum on/off) "
                "cannot change after construction; create a new optimizer"
            )
        group.validated = dict(group.options)
