"""What code above the runtime may ask of a kp tensor, the one buffer type that crosses the
runtime's boundary: its host staging view, its size, whether it has host memory, and freeing
it. Every other package goes through these (``tests/architecture/test_architecture.py`` forbids calling kp
tensor methods outside ``_runtime``), so a kp quirk or a change of buffer type is handled here
alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ._kp import kp_module

Array = npt.NDArray[Any]


def host_view(tensor: Any) -> Array:
    """A NumPy view of a kp tensor's host staging memory: what an upload copies to the device
    and a download fills (its dtype is the tensor's own)."""
    view: Array = tensor.data()
    return view


def element_count(tensor: Any) -> int:
    """Elements (4-byte words, for every buffer vk-adam makes or accepts) of a kp tensor."""
    return int(tensor.size())


def has_host_copy(tensor: Any) -> bool:
    """Whether a kp tensor has host-visible memory (``data()``): every type but storage."""
    return bool(tensor.tensor_type() != kp_module().TensorTypes.storage)


def host_dtype(tensor: Any) -> np.dtype[Any] | None:
    """The element type of a kp tensor with a host copy (None for a storage tensor)."""
    return host_view(tensor).dtype if has_host_copy(tensor) else None


def is_alive(tensor: Any) -> bool:
    """Whether a kp tensor still holds its Vulkan buffer (not destroyed)."""
    return bool(tensor.is_init())


def device_of(obj: Any) -> int | None:
    """The VkDevice (as an int) a kp tensor, sequence or manager belongs to; None where this kp
    build cannot tell (it lacks vk-adam's device handles)."""
    handle = getattr(obj, "device_handle", None)
    return int(handle()) if handle is not None else None


def uploads_of(tensor: Any) -> int | None:
    """How many evaluated uploads (``OpTensorSyncDevice``) overwrote a kp tensor's device
    memory with its host copy; None where this kp build does not count them."""
    count = getattr(tensor, "uploads", None)
    return int(count()) if count is not None else None


def uploads_and_sizes(params: Sequence[Any], grads: Sequence[Any]) -> tuple[list[int | None], list[int]]:
    """What a step's checks read of the application's kp tensors, in one call: each param's
    evaluated uploads (:func:`uploads_of`) and each gradient's element count
    (:func:`element_count`: 0 once the tensor was destroyed)."""
    return [uploads_of(p) for p in params], [element_count(g) for g in grads]


def free_tensor(tensor: Any) -> None:
    """Destroy a kp tensor's buffer and memory; no submitted or recorded work may still use it."""
    tensor.destroy()


__all__ = [
    "device_of",
    "element_count",
    "free_tensor",
    "has_host_copy",
    "host_dtype",
    "host_view",
    "is_alive",
    "uploads_and_sizes",
    "uploads_of",
]
