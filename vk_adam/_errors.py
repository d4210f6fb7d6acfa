"""Exception types of vk-adam; each message says what to do about it."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from types import FrameType

#: This package's folder: frames from files below it are vk-adam's own.
_PACKAGE = str(Path(__file__).resolve().parent)


def warn_at_caller(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` naming the first line outside vk-adam on the stack: the application's
    call that led here (a fixed stacklevel would name a line of the library whenever the
    call goes through one more function)."""
    level = 2
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


class VkAdamError(RuntimeError):
    """Base class of vk-adam's runtime errors (bad *arguments* raise ValueError/TypeError)."""


class NoVulkanDeviceError(VkAdamError):
    """No Vulkan device could be opened."""


class ShaderMissingError(VkAdamError):
    """A compiled SPIR-V shader is missing or unreadable."""


class RuleRegistrationError(VkAdamError):
    """An update rule was rejected when it registered (bad shader interface, name conflict)."""


class OptimizerClosedError(VkAdamError):
    """The optimizer was used after close()."""


class LostUpdateWarning(UserWarning):
    """A step's update was overwritten before the next step: the application uploaded a param's
    host copy over its device memory between two steps (``OpTensorSyncDevice``)."""


class PortabilityWarning(UserWarning):
    """A rule or setting that runs here but not on every Vulkan device (it needs more than the
    spec's minimum limits); devices that cannot hold it refuse it by name."""


class DeviceCapabilityError(VkAdamError, ValueError):
    """The device cannot run what was asked: a Vulkan limit or feature it lacks. The message names
    the limit, the device's value and what is needed; nothing was changed. (A ValueError too, as
    the refusals of arguments a device cannot take were before.)"""


class DeviceMemoryError(VkAdamError, MemoryError):
    """A buffer could not be allocated: the device's memory, or the host-visible memory that
    buffers' staging copies use, is full. The message names the memory, the bytes asked and the
    heap's size; nothing was changed (an optimizer that fails to build frees what it made)."""
