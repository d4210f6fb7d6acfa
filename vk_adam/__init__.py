"""vk-adam: Adam, AdamW, SGD and plugin update rules as Vulkan compute shaders, through Kompute.

Quick start::

    import numpy as np, vk_adam
    p = np.random.randn(1000, 16).astype(np.float32)
    with vk_adam.AdamW([p], lr=1e-3) as opt:
        opt.step([np.random.randn(1000, 16).astype(np.float32)])   # p is updated in place
"""

from __future__ import annotations

from ._errors import (
    NoVulkanDeviceError,
    OptimizerClosedError,
    RuleRegistrationError,
    ShaderMissingError,
    VkAdamError,
)
from ._optim.functional import adam_update
from ._optim.inflight import StepHandle
from ._optim.optimizer import Optimizer
from ._optim.presets import SGD, Adam, AdamW, create
from ._rules.hookspecs import hookimpl, hookspec
from ._rules.registry import (
    BLOCK_ENV,
    PluginLoadWarning,
    RuleRegistry,
    default_registry,
    load_registry,
    reload_registry,
)
from ._rules.rule import ShaderVariant, StateBuffer, UpdateRule
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

__all__ = [
    "BLOCK_ENV",
    "DEVICE_ENV",
    "LINGER_ENV",
    "SGD",
    "Adam",
    "AdamW",
    "DeviceHandle",
    "DeviceInfo",
    "NoVulkanDeviceError",
    "Optimizer",
    "OptimizerClosedError",
    "PluginLoadWarning",
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


def list_rules() -> dict[str, UpdateRule]:
    """Every registered update rule by name (built-in and plugins)."""
    return dict(default_registry().rules)
