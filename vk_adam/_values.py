"""What kind of value an argument is, and how an error message shows a bad one: the checks
of single values (numbers, flags, step counts, kp objects) that every argument check uses,
the optimizer's (``groups``, ``state_dict``, ``functional``) and the schedules' alike. Pure
NumPy, no Vulkan device."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

#: The largest step count accepted (state dicts store it as a float, exact up to 2**53).
MAX_STEP = 2**53


def show(value: Any) -> str:
    """A short description of a bad value for an error message: its type and repr."""
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return text if value is None else f"{type(value).__name__} {text}"


def is_real(value: Any) -> bool:
    """A real number that is not a bool (bools are flags, not numbers, in vk-adam's API)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def is_index(value: Any) -> bool:
    """An integer that is not a bool (Python or NumPy)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def is_kp_object(obj: object, name: str) -> bool:
    """Whether ``obj`` is a kp ``name`` (``Manager``, ``Sequence``, ``Tensor``) or a subclass,
    without importing kp: the one kp type test of the package."""
    return any(c.__name__ == name and c.__module__ in ("kp", "builtins") for c in type(obj).__mro__)


def is_kp_tensor(obj: object) -> bool:
    """True for a kp.Tensor (an application's device buffer), without importing kp."""
    return is_kp_object(obj, "Tensor") and hasattr(obj, "tensor_type")


def check_flag(name: str, value: Any) -> None:
    """Flags are bools: a string such as ``"no"`` would otherwise count as True."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False (got {show(value)})")


def as_step(value: Any, what: str, minimum: int) -> int:
    """A step count as an int: an integer (or an integral float, or a NumPy scalar or 0-d
    array of one, as torch saves steps) from ``minimum`` to :data:`MAX_STEP`."""
    v = value
    if not isinstance(v, np.ndarray) and hasattr(v, "__array__") and not isinstance(v, np.generic):
        try:  # a torch tensor
            v = np.asarray(v)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise TypeError(f"{what} must be an integer >= {minimum}; could not read {show(value)}") from exc
    if isinstance(v, np.ndarray) and v.ndim == 0:
        v = v[()]
    if not is_real(v):
        raise TypeError(f"{what} must be an integer >= {minimum} (got {show(value)})")
    if isinstance(v, numbers.Integral):
        n = int(v)
    else:
        f = float(v)
        if not (math.isfinite(f) and f.is_integer()):
            raise ValueError(f"{what} must be an integer >= {minimum} (got {f!r})")
        n = int(f)
    if n < minimum:
        raise ValueError(f"{what} must be an integer >= {minimum} (got {n})")
    if n > MAX_STEP:
        raise ValueError(f"{what} must be at most 2**53 (got {n})")
    return n
