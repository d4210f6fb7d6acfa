"""Everything a checkpoint's content must satisfy before :func:`load_checkpoint` changes anything.

A file whose checksum matches (:mod:`.checkpoint_format`) is checked here against the adapter,
the optimizer, the generator and the scheduler it is loaded into: format, rule, step, LoRA
config, module layout, hyperparameters, RNG state, schedule state, and the name, dtype and shape
of every tensor. The result, a :class:`_VerifiedCheckpoint`, can be applied without failing on
its content. Kept apart from :mod:`.checkpoint` so that the public save and load read in a page.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._optim.optimizer import Optimizer
from ..schedules import LRScheduler
from .adapter import F32, LoRAAdapter
from .checkpoint_format import CHECKPOINT_FORMAT, _read_verified
from .errors import CheckpointError

# Bigger integers are not exactly representable as the float the optimizer stores its step in.
_MAX_EXACT_INT = 2**53


@dataclass(frozen=True)
class _VerifiedCheckpoint:
    """A checkpoint checked against the adapter and optimizer: applying it cannot fail on its content."""

    step: int
    state_dict: dict[str, Any]
    flat_params: F32
    rng_state: dict[str, Any] | None
    extra: dict[str, Any]
    scheduler_state: dict[str, Any] | None = None


def _verify_checkpoint(
    path: Path,
    adapter: LoRAAdapter,
    optimizer: Optimizer,
    rng: np.random.Generator | None,
    scheduler: LRScheduler | None = None,
) -> _VerifiedCheckpoint:
    """Check a checkpoint against ``adapter``/``optimizer``/``rng``/``scheduler``; change nothing."""
    meta, tensors = _read_verified(path)
    if meta.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path}: unknown checkpoint format {meta.get('format')!r}")
    missing_fields = [k for k in ("rule", "step", "hyperparameters", "adapter", "modules") if k not in meta]
    if missing_fields:
        raise CheckpointError(f"{path}: its metadata lacks {missing_fields}")
    if meta["rule"] != optimizer.rule.name:
        raise CheckpointError(
            f"{path} was written by rule {meta['rule']!r}; this optimizer runs {optimizer.rule.name!r}"
        )
    step = meta["step"]
    if not _is_int(step) or not 0 <= step <= _MAX_EXACT_INT:
        raise CheckpointError(f"{path}: step {step!r} is not a whole number >= 0")
    _verify_lora_config(path, adapter, meta["adapter"])
    saved_modules = meta["modules"] if isinstance(meta["modules"], list) else []
    current = [[m.path, m.in_features, m.out_features, m.rank] for m in adapter.modules]
    # (equal lists can still differ in kind: JSON's true compares equal to a size of 1)
    if saved_modules != current or not all(_is_int(v) for m in saved_modules for v in m[1:]):
        saved_paths = {m[0] for m in saved_modules if isinstance(m, list) and m and isinstance(m[0], str)}
        current_paths = {m.path for m in adapter.modules}
        raise CheckpointError(
            f"{path} holds a different adapter layout (missing modules "
            f"{sorted(current_paths - saved_paths)[:4]}, unknown {sorted(saved_paths - current_paths)[:4]}, "
            "or different shapes)"
        )
    options = _verify_hyperparameters(path, optimizer, meta["hyperparameters"])
    rng_state = _verify_rng_state(path, meta.get("rng"), rng)
    scheduler_state = _verify_scheduler_state(path, meta.get("scheduler"), scheduler)
    extra = meta.get("extra", {})
    if not isinstance(extra, dict):
        raise CheckpointError(f"{path}: 'extra' is {type(extra).__name__}; expected a JSON object")

    # Tensors: exactly the adapter's params, and the rule's state once a step was taken.
    slices = adapter.slices()
    names = optimizer.rule.state_names(options) if step > 0 else ()
    expected: dict[str, tuple[int, int]] = {}
    for key, (_, shape) in slices.items():
        expected[f"param/{key}"] = shape
        expected.update({f"state/{name}/{key}": shape for name in names})
    missing = sorted(set(expected) - set(tensors))
    unknown = sorted(set(tensors) - set(expected))
    if missing or unknown:
        raise CheckpointError(
            f"{path} does not match this adapter and optimizer at step {step}: missing tensors "
            f"{missing[:3]}, unexpected tensors {unknown[:3]}"
        )
    for name, shape in expected.items():
        value = tensors[name]
        if value.dtype != np.float32 or value.shape != shape:
            raise CheckpointError(
                f"{path}: tensor {name} is {value.dtype} {list(value.shape)}; expected float32 {list(shape)}"
            )
    flat_params = adapter.flat_params.copy()  # keeps the alignment padding between tensors
    flat_state = {name: np.zeros(adapter.flat_params.size, np.float32) for name in names}
    for key, (offset, shape) in slices.items():
        end = offset + shape[0] * shape[1]
        flat_params[offset:end] = tensors[f"param/{key}"].reshape(-1)
        for name in names:
            flat_state[name][offset:end] = tensors[f"state/{name}/{key}"].reshape(-1)

    # The state dict for Optimizer.load_state_dict: group 0 is the adapter's flat buffer.
    groups = []
    start = 0
    for index, group in enumerate(optimizer.param_groups):
        opts = options if index == 0 else {k: v for k, v in group.items() if k != "params"}
        groups.append({**opts, "params": list(range(start, start + len(group["params"])))})
        start += len(group["params"])
    state: dict[int, dict[str, Any]] = {0: {"step": float(step), **flat_state}} if step > 0 else {}
    return _VerifiedCheckpoint(
        step, {"state": state, "param_groups": groups}, flat_params, rng_state, dict(extra), scheduler_state
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _verify_lora_config(path: Path, adapter: LoRAAdapter, config: Any) -> None:
    """The saved LoRA rank and scale settings must be the adapter's: a checkpoint trained with
    another ``alpha`` or ``use_rslora`` would resume with another scale."""
    if not isinstance(config, dict):
        raise CheckpointError(f"{path}: its LoRA config is not a JSON object")
    rank, alpha, rslora = config.get("r"), config.get("lora_alpha"), config.get("use_rslora")
    if not _is_int(rank) or rank != adapter.rank:
        raise CheckpointError(f"{path} holds a rank-{rank!r} adapter; this adapter has rank {adapter.rank}")
    if not (isinstance(alpha, (int, float)) and not isinstance(alpha, bool)) or alpha != adapter.alpha:
        raise CheckpointError(
            f"{path} was saved with lora_alpha={alpha!r}; this adapter has lora_alpha={adapter.alpha} "
            f"(scale {adapter.scale}): create the adapter with the checkpoint's alpha"
        )
    if not isinstance(rslora, bool) or rslora != adapter.use_rslora:
        raise CheckpointError(
            f"{path} was saved with use_rslora={rslora!r}; this adapter has use_rslora={adapter.use_rslora} "
            f"(scale {adapter.scale}): create the adapter with the checkpoint's setting"
        )


def _verify_hyperparameters(path: Path, optimizer: Optimizer, saved: Any) -> dict[str, Any]:
    """The optimizer's hyperparameters with the saved ones merged in, each of the kind the
    optimizer holds, valid for its rule, and selecting the same shader."""
    if not isinstance(saved, dict):
        raise CheckpointError(f"{path}: its hyperparameters are not a JSON object")
    rule = optimizer.rule
    current = {k: v for k, v in optimizer.param_groups[0].items() if k != "params"}
    unknown = sorted(set(saved) - set(current))
    if unknown:
        raise CheckpointError(f"{path}: hyperparameters {unknown[:5]} are unknown to rule {rule.name!r}")
    options = dict(current)
    for key, value in saved.items():
        options[key] = _like(path, key, value, current[key])
    try:
        rule.validate(options)
    except (TypeError, ValueError, KeyError) as exc:
        raise CheckpointError(f"{path}: invalid hyperparameters ({exc})") from None
    if rule.variant_for(options) is not rule.variant_for(current) or tuple(
        rule.spec_constants(options)
    ) != tuple(rule.spec_constants(current)):
        changed = {k: v for k, v in saved.items() if options[k] != current[k]}
        raise CheckpointError(
            f"{path} was saved with options that select another shader (of {changed}); create the "
            "optimizer with the options of the one that saved it"
        )
    return options


def _like(path: Path, key: str, value: Any, current: Any) -> Any:
    """A saved hyperparameter as the optimizer holds it (JSON has lists, not tuples); refuse one
    of another kind (a string learning rate, a bool momentum, an int too big for a float)."""

    def number(v: Any) -> bool:
        return isinstance(v, float) or (_is_int(v) and abs(v) <= _MAX_EXACT_INT)

    if isinstance(current, bool):
        ok = isinstance(value, bool)
    elif isinstance(current, (int, float)):
        ok = number(value)
    elif isinstance(current, (tuple, list)):
        ok = isinstance(value, list) and len(value) == len(current) and all(number(v) for v in value)
        if ok:
            value = type(current)(value)
    else:
        ok = type(value) is type(current)
    if not ok:
        raise CheckpointError(
            f"{path}: hyperparameter {key!r} is {value!r}; expected a value like {current!r}"
        )
    return value


def _verify_rng_state(path: Path, saved: Any, rng: np.random.Generator | None) -> dict[str, Any] | None:
    """The saved RNG state, checked by loading it into a scratch bit generator of its kind."""
    if saved is None:
        if rng is not None:
            raise CheckpointError(
                f"{path} holds no RNG state (it was saved without rng=), so it cannot restore the "
                "generator passed; load it with rng=None"
            )
        return None
    name = saved.get("bit_generator") if isinstance(saved, dict) else None
    kind = getattr(np.random, name, None) if isinstance(name, str) else None
    if not (isinstance(kind, type) and issubclass(kind, np.random.BitGenerator)):
        raise CheckpointError(f"{path}: unknown RNG bit generator {name!r}")
    if rng is not None and type(rng.bit_generator) is not kind:
        raise CheckpointError(
            f"{path} holds a {name} RNG state; the generator passed uses {type(rng.bit_generator).__name__}"
        )
    try:
        with warnings.catch_warnings():
            # NumPy only warns (for now) about some out-of-range values: those are malformed too.
            warnings.simplefilter("error")
            scratch = kind()
            scratch.state = saved
    except Exception as exc:  # numpy raises ValueError, TypeError, KeyError or OverflowError
        raise CheckpointError(f"{path}: its {name} RNG state is malformed ({exc})") from None
    state: dict[str, Any] = saved
    return state


def _verify_scheduler_state(path: Path, saved: Any, scheduler: LRScheduler | None) -> dict[str, Any] | None:
    """The saved schedule state, checked by the scheduler it will be loaded into (which it does
    not change). A checkpoint saved without ``scheduler=`` (or before schedules existed) holds
    None. Saved and passed must go together: each alone is refused."""
    if saved is None:
        if scheduler is not None:
            raise CheckpointError(
                f"{path} holds no learning-rate schedule (it was saved without scheduler=), so it cannot "
                f"restore the {type(scheduler).__name__} passed; load it with scheduler=None"
            )
        return None
    kind = saved.get("kind") if isinstance(saved, dict) else None
    if scheduler is None:
        raise CheckpointError(
            f"{path} was saved with a learning-rate schedule ({kind!r}); pass scheduler=, a "
            "vk_adam.schedules scheduler of that kind built on this optimizer, to resume it"
        )
    try:
        return scheduler._checked_state(saved)
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{path}: its schedule state does not fit this scheduler ({exc})") from None
