"""Update rules: what a rule is (``rule``), the pluggy hook that registers rules
(``hookspecs``), the built-in rules registered through it like any plugin (``builtin``), the
registry that loads them (``registry``), the checks of a rule against its shaders that the
registry and the optimizer run (``checks``), and SPIR-V loading and reflection (``spirv``).
Nothing here touches a Vulkan device. This file is the package's face: other packages import
from here only."""

from .builtin import ADAM, ADAMW, SGD
from .checks import InvalidRuleError, check_rule_object
from .hookspecs import hookimpl, hookspec
from .registry import (
    BLOCK_ENV,
    BUILTIN_PLUGIN,
    PluginLoadWarning,
    RuleRegistry,
    default_registry,
    load_registry,
    reload_registry,
)
from .rule import (
    MAX_PUSH_CONSTANT_BYTES,
    MAX_RULE_SPEC_CONSTANTS,
    ShaderVariant,
    StateBuffer,
    UpdateRule,
    variant_settings,
)
from .spirv import ShaderInterface, load_spirv, reflect, subgroup_spirv

__all__ = [
    "ADAM",
    "ADAMW",
    "BLOCK_ENV",
    "BUILTIN_PLUGIN",
    "MAX_PUSH_CONSTANT_BYTES",
    "MAX_RULE_SPEC_CONSTANTS",
    "SGD",
    "InvalidRuleError",
    "PluginLoadWarning",
    "RuleRegistry",
    "ShaderInterface",
    "ShaderVariant",
    "StateBuffer",
    "UpdateRule",
    "check_rule_object",
    "default_registry",
    "hookimpl",
    "hookspec",
    "load_registry",
    "load_spirv",
    "reflect",
    "reload_registry",
    "subgroup_spirv",
    "variant_settings",
]
