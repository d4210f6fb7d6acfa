"""Input rules shared by every entry point that takes gradients (``Optimizer.step``,
``update_lora_adapter``), so they accept and refuse exactly the same things."""

from __future__ import annotations

import warnings


def convert_float_or_refuse(what: str, dtype: object, is_float: bool, *, stacklevel: int) -> None:
    """The dtype rule for a gradient that is not float32: another float dtype is converted (the
    caller converts it) with a warning; anything else is a TypeError. ``stacklevel`` is the
    caller's, as for ``warnings.warn``."""
    if not is_float:
        raise TypeError(f"{what} has dtype {dtype}; expected float32")
    warnings.warn(
        f"{what} is {dtype}; converting to float32 (pass float32 to avoid the copy)",
        stacklevel=stacklevel + 1,
    )
