"""Input rules shared by every entry point that takes gradients (``Optimizer.step``,
``update_lora_adapter``), so they accept and refuse exactly the same things."""

from __future__ import annotations

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
