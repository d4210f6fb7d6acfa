"""Input rules shared by every entry point that takes gradients (``Optimizer.step``,
``update_lora_adapter``), so they accept and refuse exactly the same things, and the one
reader of vk-adam's integer environment variables (the tuning knobs)."""

from __future__ import annotations

import os

from ._errors import warn_at_caller


def convert_float_or_refuse(what: str, dtype: object, is_float: bool, *, to: str = "float32") -> None:
    """The dtype rule for a gradient that is not of its param's dtype ``to``: another float
    dtype is converted (the caller converts it) with a warning at the application's line; anything
    else is a TypeError."""
    if not is_float:
        raise TypeError(f"{what} has dtype {dtype}; expected {to}")
    warn_at_caller(f"{what} is {dtype}; converting to {to} (pass {to} to avoid the copy)")


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
