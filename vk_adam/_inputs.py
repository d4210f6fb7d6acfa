"""Input rules shared by every entry point that takes gradients (``Optimizer.step``,
``update_lora_adapter``), so they accept and refuse exactly the same things, and the one
reader of vk-adam's integer environment variables (the tuning knobs)."""

from __future__ import annotations

import os
import warnings


def convert_float_or_refuse(
    what: str, dtype: object, is_float: bool, *, stacklevel: int, to: str = "float32"
) -> None:
    """The dtype rule for a gradient that is not of its param's dtype ``to``: another float
    dtype is converted (the caller converts it) with a warning; anything else is a TypeError.
    ``stacklevel`` is the caller's, as for ``warnings.warn``."""
    if not is_float:
        raise TypeError(f"{what} has dtype {dtype}; expected {to}")
    warnings.warn(
        f"{what} is {dtype}; converting to {to} (pass {to} to avoid the copy)",
        stacklevel=stacklevel + 1,
    )


def env_int(name: str, default: int, allowed: tuple[int, ...] | None = None) -> int:
    """The integer in environment variable ``name``: ``default`` when unset or blank, else one
    of ``allowed`` (a choice of values), or without ``allowed`` a positive integer."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if allowed is not None and (not raw.isdigit() or int(raw) not in allowed):
        raise ValueError(f"${name} must be one of {', '.join(map(str, allowed))} (got {raw!r})")
    if allowed is None and (not raw.isdigit() or int(raw) < 1):
        raise ValueError(f"${name} must be a positive integer (got {raw!r})")
    return int(raw)
