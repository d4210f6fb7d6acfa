"""vk-adam: Adam, AdamW, SGD and plugin update rules as Vulkan compute shaders, through Kompute.

Quick start::

    import numpy as np, vk_adam
    p = np.random.randn(1000, 16).astype(np.float32)
    with vk_adam.AdamW([p], lr=1e-3) as opt:
        opt.step([np.random.randn(1000, 16).astype(np.float32)])   # p is updated in place

The names below are imported on first use (PEP 562), so ``import vk_adam`` does not import
NumPy and ml_dtypes. That matters to pytest, which imports
``vk_adam.pytest_plugin`` (and so this package) in every session of an environment that has
vk-adam installed, Vulkan or not.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._errors import (
        DeviceCapabilityError,
        DeviceMemoryError,
        LostUpdateWarning,
        NoVulkanDeviceError,
        OptimizerClosedError,
        PortabilityWarning,
        RuleRegistrationError,
        ShaderMissingError,
        VkAdamError,
    )
    from ._optim import SGD, Adam, AdamW, Optimizer, StepHandle, adam_update, create
    from ._rules import (
        BLOCK_ENV,
        InvalidRuleError,
        PluginLoadWarning,
        RuleRegistry,
        ShaderVariant,
        StateBuffer,
        UpdateRule,
        default_registry,
        hookimpl,
        hookspec,
        load_registry,
        reload_registry,
    )
    from ._runtime import (
        DEVICE_ENV,
        LINGER_ENV,
        DeviceHandle,
        DeviceInfo,
        list_devices,
        open_device,
        select_device,
    )

__version__ = "0.1.0"

#: Where each public name is defined (``__getattr__`` imports it on first use).
_DEFINED_IN = {
    "._errors": (
        "DeviceCapabilityError",
        "DeviceMemoryError",
        "LostUpdateWarning",
        "NoVulkanDeviceError",
        "OptimizerClosedError",
        "PortabilityWarning",
        "RuleRegistrationError",
        "ShaderMissingError",
        "VkAdamError",
    ),
    "._optim": ("SGD", "Adam", "AdamW", "Optimizer", "StepHandle", "adam_update", "create"),
    "._rules": (
        "BLOCK_ENV",
        "InvalidRuleError",
        "PluginLoadWarning",
        "RuleRegistry",
        "ShaderVariant",
        "StateBuffer",
        "UpdateRule",
        "default_registry",
        "hookimpl",
        "hookspec",
        "load_registry",
        "reload_registry",
    ),
    "._runtime": (
        "DEVICE_ENV",
        "LINGER_ENV",
        "DeviceHandle",
        "DeviceInfo",
        "list_devices",
        "open_device",
        "select_device",
    ),
}
_EXPORTS = {name: module for module, names in _DEFINED_IN.items() for name in names}
#: The package's modules, reachable as attributes (``vk_adam.lora``) once ``vk_adam`` is imported.
_SUBMODULES = frozenset(
    "_errors _formats _inputs _optim _rules _runtime _commands cli lora pytest_plugin schedules shaderc "
    "testing".split()
)

__all__ = [
    "BLOCK_ENV",
    "DEVICE_ENV",
    "LINGER_ENV",
    "SGD",
    "Adam",
    "AdamW",
    "DeviceCapabilityError",
    "DeviceHandle",
    "DeviceInfo",
    "DeviceMemoryError",
    "InvalidRuleError",
    "LostUpdateWarning",
    "NoVulkanDeviceError",
    "Optimizer",
    "OptimizerClosedError",
    "PluginLoadWarning",
    "PortabilityWarning",
    "RuleRegistrationError",
    "RuleRegistry",
    "ShaderMissingError",
    "ShaderVariant",
    "StateBuffer",
    "StepHandle",
    "UpdateRule",
    "VkAdamError",
    "__version__",
    "adam_update",
    "create",
    "default_registry",
    "hookimpl",
    "hookspec",
    "list_devices",
    "list_rules",
    "load_registry",
    "open_device",
    "reload_registry",
    "select_device",
]


def __getattr__(name: str) -> Any:
    """Import a public name (or a submodule) on first use."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def list_rules() -> dict[str, UpdateRule]:
    """Every registered update rule by name (built-in and plugins)."""
    from ._rules import default_registry

    return dict(default_registry().rules)
