"""Checkpoints of a LoRA run: adapter weights, optimizer state, step, hyperparameters, RNG and
learning-rate schedule.

The public door of the checkpoint modules: :func:`save_checkpoint` writes one sealed file
(:mod:`.checkpoint_format`), atomically (:mod:`.atomic_io`), with the adapter's weights in its
dtype and the optimizer's state by parameter name, as the optimizer stores it (float32,
bfloat16, or 8-bit codes with their block maxima; the fp32 master copy of 16-bit weights);
:func:`load_checkpoint` applies a file only once :mod:`.checkpoint_verify` has checked all of
it, so a bad file changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._errors import OptimizerClosedError
from .._optim import ABSMAX_SUFFIX, Optimizer
from ..schedules import LRScheduler
from .adapter import LoRAAdapter, _steps_adapter
from .atomic_io import _atomic_write, _remove_orphaned_temp_files
from .checkpoint_format import _CHECKSUM_PLACEHOLDER, CHECKPOINT_FORMAT, CHECKSUM_KEY, _seal
from .checkpoint_verify import _storage_of, _verify_checkpoint
from .errors import CheckpointError
from .modules import Array


def save_checkpoint(
    path: str | Path,
    adapter: LoRAAdapter,
    optimizer: Optimizer,
    *,
    rng: np.random.Generator | None = None,
    extra: Mapping[str, Any] | None = None,
    scheduler: LRScheduler | None = None,
) -> Path:
    """Save adapter weights, optimizer state, step, hyperparameters and RNG state, keyed by
    parameter name, to one safetensors file, atomically (temp file, fsync, rename).

    ``scheduler``: a :mod:`vk_adam.schedules` scheduler of ``optimizer``, whose
    ``state_dict()`` is saved in the metadata (and must then be resumed by loading with one).
    A SHA-256 of the whole file (metadata included) is stored in it; :func:`load_checkpoint`
    verifies it. Temp files left by an earlier, interrupted save of ``path`` are removed.
    ``extra`` must be JSON-serialisable.

    Weights are saved in the adapter's dtype and the optimizer's state as it stores it
    (``state_dtype``; 8-bit codes per key plus ``absmax/<name>`` over the whole buffer; the fp32
    master copy of 16-bit weights as ``state/master_param/<key>``), with its storage options and
    rounding seed: a load restores all of it bit for bit.
    """
    from safetensors.numpy import save

    _steps_adapter(adapter, optimizer)
    _check_scheduler(scheduler, optimizer)
    storage = _storage_of(optimizer)
    step, tensors = _state_tensors(adapter, optimizer)
    adapter.pull_params()
    for key, weight in adapter.named_tensors().items():
        tensors[f"param/{key}"] = np.ascontiguousarray(weight)
    # initial_lr is the scheduler's (its base_lrs), saved with it, not a hyperparameter.
    group = {k: v for k, v in optimizer.param_groups[0].items() if k not in ("params", "initial_lr")}
    meta = {
        "format": CHECKPOINT_FORMAT,
        "rule": optimizer.rule.name,
        "step": step,
        "hyperparameters": group,
        "adapter": adapter.peft_config(),
        "dtype": adapter.dtype,
        "storage": storage.meta(),
        "modules": [[m.path, m.in_features, m.out_features, m.rank] for m in adapter.modules],
        "rng": rng.bit_generator.state if rng is not None else None,
        "extra": dict(extra or {}),
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
    }
    metadata = {
        "vk_adam": json.dumps(meta, default=_json_default),
        CHECKSUM_KEY: _CHECKSUM_PLACEHOLDER.decode(),
    }
    path = Path(path)
    _atomic_write(path, _seal(save(tensors, metadata=metadata)))
    return path


def _state_tensors(adapter: LoRAAdapter, optimizer: Optimizer) -> tuple[int, dict[str, Array]]:
    """The step and the optimizer's state as checkpoint tensors, in its stored formats: each
    state cut into ``state/<name>/<key>``, 8-bit block maxima whole as ``absmax/<name>``."""
    entry = optimizer.state_dict()["state"].get(0)
    if entry is None:
        return 0, {}
    tensors: dict[str, Array] = {}
    for name, value in entry.items():
        if name == "step":
            continue
        if name.endswith(ABSMAX_SUFFIX):
            tensors[f"absmax/{name.removesuffix(ABSMAX_SUFFIX)}"] = np.ascontiguousarray(value)
            continue
        flat = np.asarray(value).reshape(-1)
        for key, (offset, shape) in adapter.slices().items():
            tensors[f"state/{name}/{key}"] = flat[offset : offset + shape[0] * shape[1]].reshape(shape).copy()
    return int(entry["step"]), tensors


def _check_scheduler(scheduler: Any, optimizer: Optimizer) -> None:
    if scheduler is None:
        return
    if not isinstance(scheduler, LRScheduler):
        raise TypeError(
            f"scheduler must be a vk_adam.schedules scheduler or None (got {type(scheduler).__name__})"
        )
    if scheduler.optimizer is not optimizer:
        raise ValueError("scheduler schedules another optimizer; pass the scheduler built on this one")


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (np.integer, np.floating, np.bool_)):
        return obj.item()
    if isinstance(obj, np.ndarray):  # e.g. Philox's RNG state holds arrays
        return obj.tolist()
    if isinstance(obj, tuple):
        return list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


@dataclass(frozen=True)
class Checkpoint:
    """What load_checkpoint restored: the step to resume from, the RNG state, extra metadata."""

    step: int
    rng_state: dict[str, Any] | None
    extra: dict[str, Any]


def load_checkpoint(
    path: str | Path,
    adapter: LoRAAdapter,
    optimizer: Optimizer,
    *,
    rng: np.random.Generator | None = None,
    scheduler: LRScheduler | None = None,
) -> Checkpoint:
    """Restore a :func:`save_checkpoint` file into ``adapter``/``optimizer`` (and ``rng``,
    ``scheduler``).

    Everything is verified before anything changes: the whole-file checksum, then the format,
    rule, step, hyperparameters (valid, and selecting the optimizer's shader), the LoRA rank,
    ``lora_alpha`` and ``use_rslora`` (the adapter's scale), the module layout, the adapter's
    dtype (it must be the saved one), the optimizer's ``state_dtype`` (the saved one; float32
    state also loads into a bfloat16 or 8-bit optimizer, converted as ``load_state_dict``
    converts it) and ``stochastic_rounding`` (the saved one), the name, dtype and shape of
    every tensor, the RNG state (it must be for ``rng``'s bit generator; a
    checkpoint saved without one cannot restore ``rng``) and the schedule state. A checkpoint
    saved with ``scheduler=`` must be loaded with a scheduler of the same kind on ``optimizer``
    (its ``last_epoch``, ``base_lrs``, settings and each group's lr are restored; resuming
    without it would silently go on at a constant lr), and one saved without cannot restore a
    scheduler: either mismatch is a :class:`CheckpointError`. A truncated, corrupted or
    mismatched file raises :class:`CheckpointError`, and then the adapter's weights, the
    optimizer's state, step and hyperparameters, ``rng`` and ``scheduler`` are exactly as they
    were. The saved rounding seed is restored with the state, so a resumed run with stochastic
    rounding is bit-identical to an uninterrupted one. Files of format ``vk-adam-checkpoint/1``
    (whose checksum did not cover their metadata) are refused.
    Temp files left by an interrupted save of ``path`` are removed.

    A closed optimizer raises OptimizerClosedError; an optimizer that was not made by
    ``adapter.optimizer(...)`` raises ValueError, and so does a scheduler of another optimizer.
    """
    if optimizer.closed:
        raise OptimizerClosedError("this optimizer was closed; create a new one")
    _steps_adapter(adapter, optimizer)
    _check_scheduler(scheduler, optimizer)
    path = Path(path)
    _remove_orphaned_temp_files(path)
    try:
        verified = _verify_checkpoint(path, adapter, optimizer, rng, scheduler)
    except CheckpointError:
        raise
    except Exception as exc:
        # A file whose checksum matches but whose content breaks a rule no check above names
        # (a hand-made file, or a bug): still the one documented error, and nothing changed.
        raise CheckpointError(f"{path} is malformed ({type(exc).__name__}: {exc})") from exc
    # Verified: apply. The weights go first (a 16-bit adapter's master copy, at step 0, is made
    # from them), then the optimizer's load, all-or-nothing itself: if it refuses, the weights
    # are put back. The rest cannot fail on the checkpoint's content.
    previous = adapter.flat_params.copy()
    adapter.flat_params[...] = verified.flat_params
    try:
        optimizer.load_state_dict(verified.state_dict)
    except BaseException as exc:
        adapter.flat_params[...] = previous
        if isinstance(exc, (TypeError, ValueError)):
            raise CheckpointError(f"{path}: the optimizer refused its state ({exc})") from exc
        raise
    adapter.push_params()
    if rng is not None and verified.rng_state is not None:  # verified: not None when rng is given
        rng.bit_generator.state = verified.rng_state
    if scheduler is not None and verified.scheduler_state is not None:  # verified: both or neither
        scheduler.apply_checked_state(verified.scheduler_state)
    return Checkpoint(verified.step, verified.rng_state, verified.extra)
