"""Everything a checkpoint's content must satisfy before :func:`load_checkpoint` changes anything.

A file whose checksum matches (:mod:`.checkpoint_format`) is checked here against the adapter,
the optimizer, the generator and the scheduler it is loaded into: format, rule, step, LoRA
config, module layout, hyperparameters, the adapter's dtype and the optimizer's storage
(``state_dtype``, ``stochastic_rounding``), RNG state, schedule state, and the name, dtype and
shape of every tensor. The result, a :class:`_VerifiedCheckpoint`, can be applied without
failing on its content. Kept apart from :mod:`.checkpoint` so that the public save and load
read in a page.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import _formats as fmt
from .._optim import ABSMAX_SUFFIX, MASTER_KEY, Optimizer, blocks
from ..schedules import LRScheduler
from .adapter import LoRAAdapter
from .checkpoint_format import CHECKPOINT_FORMAT, _read_verified
from .errors import CheckpointError
from .modules import Array

# Bigger integers are not exactly representable as the float the optimizer stores its step in.
_MAX_EXACT_INT = 2**53


@dataclass(frozen=True)
class _VerifiedCheckpoint:
    """A checkpoint checked against the adapter and optimizer: applying it cannot fail on its content."""

    step: int
    state_dict: dict[str, Any]
    flat_params: Array
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
    storage = _storage_of(optimizer)
    saved_state_dtype, seed = _verify_storage(
        path, adapter, storage, meta.get("dtype", "float32"), meta.get("storage")
    )
    rng_state = _verify_rng_state(path, meta.get("rng"), rng)
    scheduler_state = _verify_scheduler_state(path, meta.get("scheduler"), scheduler)
    extra = meta.get("extra", {})
    if not isinstance(extra, dict):
        raise CheckpointError(f"{path}: 'extra' is {type(extra).__name__}; expected a JSON object")

    # Tensors: exactly the adapter's params, and the optimizer's state once a step was taken, in
    # the formats it keeps (8-bit state also has flat ``absmax/<name>``, over the whole buffer).
    slices, size = adapter.slices(), adapter.flat_params.size
    names = optimizer.rule.state_names(options) if step > 0 else ()
    dtypes, flat_tensors = _expected_state(names, storage, saved_state_dtype, size) if step > 0 else ({}, {})
    expected: dict[str, tuple[tuple[int, ...], np.dtype[Any]]] = {}
    for key, (_, shape) in slices.items():
        expected[f"param/{key}"] = (shape, adapter.flat_params.dtype)
        expected.update({f"state/{name}/{key}": (shape, dt) for name, dt in dtypes.items()})
    expected.update({name: (count, np.dtype(np.float32)) for name, count in flat_tensors.items()})
    missing = sorted(set(expected) - set(tensors))
    unknown = sorted(set(tensors) - set(expected))
    if missing or unknown:
        raise CheckpointError(
            f"{path} does not match this adapter and optimizer at step {step}: missing tensors "
            f"{missing[:3]}, unexpected tensors {unknown[:3]}"
        )
    for name, (want, dtype) in expected.items():
        value = tensors[name]
        if value.dtype != dtype or value.shape != want:
            raise CheckpointError(
                f"{path}: tensor {name} is {value.dtype} {list(value.shape)}; expected {dtype} {list(want)}"
            )
        if name.startswith("absmax/") and not (np.all(np.isfinite(value)) and np.all(value >= 0)):
            raise CheckpointError(f"{path}: tensor {name} holds block maxima that are negative or not finite")
    flat_params = adapter.flat_params.copy()  # keeps the alignment padding between tensors
    for key, (offset, shape) in slices.items():
        flat_params[offset : offset + shape[0] * shape[1]] = tensors[f"param/{key}"].reshape(-1)
    entry: dict[str, Any] = {"step": float(step)}
    for name, dtype in dtypes.items():
        parts = [(offset, tensors[f"state/{name}/{key}"]) for key, (offset, _) in slices.items()]
        if name == MASTER_KEY:  # the padding of the master copy is the params'
            entry[name] = flat_params.astype(np.float32)
            for offset, value in parts:
                entry[name][offset : offset + value.size] = value.reshape(-1)
        else:
            entry[name] = _flat_state(name, dtype, storage, size, parts)
        if f"absmax/{name}" in flat_tensors:
            entry[name + ABSMAX_SUFFIX] = tensors[f"absmax/{name}"].copy()

    # The state dict for Optimizer.load_state_dict: group 0 is the adapter's flat buffer.
    groups = []
    start = 0
    for index, group in enumerate(optimizer.param_groups):
        opts = options if index == 0 else {k: v for k, v in group.items() if k != "params"}
        groups.append({**opts, "params": list(range(start, start + len(group["params"])))})
        start += len(group["params"])
    if seed is not None:
        groups[0]["seed"] = seed  # the rounding stream resumes where it was
    state: dict[int, dict[str, Any]] = {0: entry} if step > 0 else {}
    return _VerifiedCheckpoint(
        step, {"state": state, "param_groups": groups}, flat_params, rng_state, dict(extra), scheduler_state
    )


@dataclass(frozen=True)
class _Storage:
    """How an optimizer over an adapter stores its state (the checkpoint's ``storage`` entry,
    plus what follows from it for the adapter's buffer)."""

    state_dtype: str
    stochastic_rounding: bool
    seed: int
    formats: dict[str, int]  # state name -> its format (``_formats.STATE_*``)
    master: bool  # whether it keeps an fp32 master copy of 16-bit params

    def meta(self) -> dict[str, Any]:
        """The checkpoint's ``storage`` metadata entry."""
        return {
            "state_dtype": self.state_dtype,
            "stochastic_rounding": self.stochastic_rounding,
            "seed": self.seed,
        }


def _storage_of(optimizer: Optimizer) -> _Storage:
    """The storage of ``optimizer`` (made by ``adapter.optimizer``: one buffer, the adapter's)."""
    internals = optimizer.internals()  # Optimizer.internals(): what a wrapper may read
    group, storage, seed = internals.groups[0], internals.storage, internals.seed
    form = group.sets[0].format
    formats = {s.name: code for s, code in zip(group.variant.state, form.state, strict=True)}
    return _Storage(storage.state_dtype, storage.stochastic_rounding, seed, formats, form.has_master)


def _verify_storage(
    path: Path, adapter: LoRAAdapter, storage: _Storage, dtype: Any, saved: Any
) -> tuple[str, int | None]:
    """The adapter's dtype and the optimizer's storage against the checkpoint's: its state dtype
    (``float32`` state loads into any, converted) and seed (None: saved before storage formats)."""
    if not isinstance(dtype, str) or dtype not in fmt.PARAM_DTYPES:
        raise CheckpointError(f"{path}: adapter dtype {dtype!r} is not one of {list(fmt.PARAM_DTYPES)}")
    if dtype != adapter.dtype:
        raise CheckpointError(
            f"{path} holds a {dtype} adapter; this adapter is {adapter.dtype}: create it with "
            f"dtype={dtype!r} to resume"
        )
    if saved is None:  # a checkpoint from before storage formats: float32 state
        saved = {"state_dtype": "float32", "stochastic_rounding": False, "seed": None}
    if not isinstance(saved, dict) or set(saved) != {"state_dtype", "stochastic_rounding", "seed"}:
        raise CheckpointError(f"{path}: its storage entry is malformed ({saved!r})")
    state_dtype, stochastic, seed = saved["state_dtype"], saved["stochastic_rounding"], saved["seed"]
    if not isinstance(state_dtype, str) or state_dtype not in fmt.STATE_DTYPES:
        raise CheckpointError(f"{path}: state_dtype {state_dtype!r} is not one of {list(fmt.STATE_DTYPES)}")
    if seed is not None and not (_is_int(seed) and 0 <= seed < 2**32):
        raise CheckpointError(f"{path}: seed {seed!r} is not an integer from 0 to 2**32 - 1")
    if state_dtype not in ("float32", storage.state_dtype):
        raise CheckpointError(
            f"{path} holds {state_dtype} optimizer state; this optimizer keeps {storage.state_dtype} "
            f"state: create it with state_dtype={state_dtype!r} (float32 state loads into any)"
        )
    if stochastic is not storage.stochastic_rounding:
        raise CheckpointError(
            f"{path} was saved with stochastic_rounding={stochastic!r}; this optimizer has "
            f"stochastic_rounding={storage.stochastic_rounding}: create it with the checkpoint's setting"
        )
    return state_dtype, seed


def _expected_state(
    names: tuple[str, ...], storage: _Storage, saved_state_dtype: str, size: int
) -> tuple[dict[str, np.dtype[Any]], dict[str, tuple[int, ...]]]:
    """The dtype of each saved state (by name, ``master_param`` included) and the flat tensors
    (``absmax/<name>``, per 8-bit state) a checkpoint of a stepped optimizer holds."""
    dtypes: dict[str, np.dtype[Any]] = {}
    flat: dict[str, tuple[int, ...]] = {}
    for name in names:
        code = storage.formats.get(name, fmt.STATE_F32) if saved_state_dtype != "float32" else fmt.STATE_F32
        if code == fmt.STATE_BF16:
            dtypes[name] = fmt.BFLOAT16
        elif code in (fmt.STATE_INT8_SIGNED, fmt.STATE_INT8_UNSIGNED):
            dtypes[name] = np.dtype(np.uint8)
            flat[f"absmax/{name}"] = (blocks(size),)
        else:
            dtypes[name] = np.dtype(np.float32)
    if storage.master:
        dtypes[MASTER_KEY] = np.dtype(np.float32)
    return dtypes, flat


def _flat_state(
    name: str, dtype: np.dtype[Any], storage: _Storage, size: int, parts: list[tuple[int, Array]]
) -> Array:
    """One flat state buffer from its per-key parts; the padding between them holds zeros (or
    the code of zero), as it does in the optimizer that saved them."""
    if dtype == np.uint8:
        flat = np.full(size, fmt.zero_code(storage.formats[name] == fmt.STATE_INT8_SIGNED), np.uint8)
    else:
        flat = np.zeros(size, dtype)
    for offset, value in parts:
        flat[offset : offset + value.size] = value.reshape(-1)
    return flat


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
        return scheduler.check_state_dict(saved)
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{path}: its schedule state does not fit this scheduler ({exc})") from None
