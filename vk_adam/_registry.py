"""The update-rule registry: pluggy plugins (built-in and third-party) -> checked UpdateRules.

Built-in rules are registered exactly like outside plugins (cf. pytest's ``default_plugins``);
outside plugins arrive through the ``vk_adam`` entry-point group. Every rule's shaders are
checked against its declaration when the registry loads. A plugin that fails to import, or a
rule that fails its check, is reported by name and skipped; every other rule still loads.
"""

from __future__ import annotations

import importlib.metadata
import os
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from types import ModuleType

import pluggy

from . import _builtin_rules, _hookspecs
from ._errors import RuleRegistrationError, ShaderMissingError
from ._rule import MAX_PUSH_CONSTANT_BYTES, UpdateRule
from ._spirv import load_spirv, reflect

#: Environment variable: comma-separated plugin names (entry-point names) not to load.
BLOCK_ENV = "VK_ADAM_BLOCK_PLUGINS"
ENTRY_POINT_GROUP = "vk_adam"
BUILTIN_PLUGIN = "vk_adam.builtin"

# Bindings every rule shader has (vk_adam_rule.glsl): param, grad, status.
_FIXED_BINDINGS = 3


class PluginLoadWarning(UserWarning):
    """A plugin or one of its rules could not be loaded; the others still are."""


@dataclass(frozen=True)
class PluginFailure:
    """A plugin or rule that did not load, and why."""

    plugin: str
    distribution: str
    error: str


def check_rule(rule: UpdateRule) -> None:
    """Raise RuleRegistrationError unless every shader variant matches the rule's declaration."""
    if not rule.name or not rule.name.replace("_", "").replace("-", "").isalnum():
        raise RuleRegistrationError(f"rule name {rule.name!r} must be a non-empty identifier")
    if "lr" not in rule.defaults:
        raise RuleRegistrationError(f"rule {rule.name!r} has no 'lr' default")
    if not rule.variants:
        raise RuleRegistrationError(f"rule {rule.name!r} declares no shader variant")
    try:
        rule.validate(rule.defaults)
        chosen = rule.select_variant(rule.defaults)
    except Exception as exc:
        raise RuleRegistrationError(f"rule {rule.name!r}: its defaults are invalid: {exc}") from exc
    if chosen not in rule.variants:
        raise RuleRegistrationError(
            f"rule {rule.name!r}: select_variant returned {chosen!r}, not one of {sorted(rule.variants)}"
        )
    for key, variant in rule.variants.items():
        where = f"rule {rule.name!r}, variant {key!r} ({variant.spirv})"
        try:
            interface = reflect(load_spirv(variant.spirv))
        except (ShaderMissingError, ValueError) as exc:
            raise RuleRegistrationError(f"{where}: {exc}") from exc
        expected = set(range(_FIXED_BINDINGS + len(variant.state)))
        if set(interface.bindings) != expected:
            raise RuleRegistrationError(
                f"{where}: the shader binds {sorted(interface.bindings)} but the rule declares "
                f"{len(variant.state)} state buffer(s), i.e. bindings {sorted(expected)} "
                "(0 param, 1 grad, 2 status, then one per state buffer)"
            )
        push_bytes = 4 + 4 * variant.hyper_count
        if interface.push_constant_bytes != push_bytes:
            raise RuleRegistrationError(
                f"{where}: the shader's push-constant block is {interface.push_constant_bytes} "
                f"bytes but hyper_count={variant.hyper_count} means {push_bytes} (uint n + floats)"
            )
        if push_bytes > MAX_PUSH_CONSTANT_BYTES:
            raise RuleRegistrationError(
                f"{where}: {push_bytes} bytes of push constants exceed the {MAX_PUSH_CONSTANT_BYTES} "
                "bytes every Vulkan device guarantees; move fixed values to specialization constants"
            )


@dataclass
class RuleRegistry:
    """Every loaded update rule by name, with what failed to load."""

    rules: dict[str, UpdateRule] = field(default_factory=dict)
    failures: list[PluginFailure] = field(default_factory=list)
    conflicts: dict[str, list[str]] = field(default_factory=dict)  # name -> distributions
    plugin_manager: pluggy.PluginManager | None = None

    def get(self, name: str) -> UpdateRule:
        """The rule called ``name``; a clear error when it is unknown, blocked or ambiguous."""
        key = name.lower()
        if key in self.conflicts:
            dists = " and ".join(self.conflicts[key])
            raise RuleRegistrationError(
                f"two plugins provide an update rule named {key!r}: {dists}. Uninstall one, or "
                f"block one with ${BLOCK_ENV}=<plugin name>."
            )
        if key not in self.rules:
            failed = [f for f in self.failures if key in (f.plugin, f.error)]
            hint = f" (plugin failures: {failed})" if failed else ""
            raise ValueError(
                f"unknown update rule {name!r}; registered rules: {', '.join(sorted(self.rules))}{hint}"
            )
        return self.rules[key]


def _vk_adam_distribution() -> str:
    try:
        return f"vk-adam {importlib.metadata.version('vk-adam')}"
    except importlib.metadata.PackageNotFoundError:
        return "vk-adam (source tree)"


def load_registry(
    blocked: Iterable[str] = (),
    *,
    entry_points: bool = True,
    extra_plugins: Iterable[object] = (),
) -> RuleRegistry:
    """Load built-in rules, entry-point plugins (unless blocked) and ``extra_plugins``.

    ``blocked`` (plus ``$VK_ADAM_BLOCK_PLUGINS``) names plugins (entry-point names) to skip.
    """
    blocked_names = {b.strip() for b in blocked if b.strip()}
    blocked_names |= {b.strip() for b in os.environ.get(BLOCK_ENV, "").split(",") if b.strip()}
    pm = pluggy.PluginManager(_hookspecs.PROJECT_NAME)
    pm.add_hookspecs(_hookspecs)
    registry = RuleRegistry(plugin_manager=pm)
    plugin_dists: dict[int, str] = {}  # id(plugin object) -> "distribution version"
    pm.register(_builtin_rules, name=BUILTIN_PLUGIN)
    for name in blocked_names:
        pm.set_blocked(name)
    if entry_points:
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            if ep.name in blocked_names or pm.is_registered(ep.name) or pm.has_plugin(ep.name):
                continue
            dist = f"{ep.dist.metadata['name']} {ep.dist.version}" if ep.dist else "unknown"
            try:
                plugin = ep.load()
                pm.register(plugin, name=ep.name)
            except Exception as exc:
                registry.failures.append(PluginFailure(ep.name, dist, f"{type(exc).__name__}: {exc}"))
                warnings.warn(
                    f"vk-adam plugin {ep.name!r} ({dist}) failed to load and is skipped: {exc}",
                    PluginLoadWarning,
                    stacklevel=2,
                )
                continue
            plugin_dists[id(plugin)] = dist
    for index, extra in enumerate(extra_plugins):
        pm.register(extra, name=getattr(extra, "__name__", f"extra-plugin-{index}"))

    builtin_dist = _vk_adam_distribution()
    origin: dict[str, str] = {}
    for impl in pm.hook.vk_adam_rules.get_hookimpls():
        plugin_name = pm.get_name(impl.plugin) or "?"
        if impl.plugin is _builtin_rules:
            dist = builtin_dist
        else:
            dist = plugin_dists.get(id(impl.plugin)) or (
                impl.plugin.__name__ if isinstance(impl.plugin, ModuleType) else plugin_name
            )
        try:
            provided: list[object] = list(impl.function())  # type: ignore[call-overload]
        except Exception as exc:
            registry.failures.append(PluginFailure(plugin_name, dist, f"{type(exc).__name__}: {exc}"))
            warnings.warn(
                f"vk-adam plugin {plugin_name!r} ({dist}) raised in vk_adam_rules: {exc}",
                PluginLoadWarning,
                stacklevel=2,
            )
            continue
        for rule in provided:
            if not isinstance(rule, UpdateRule):
                registry.failures.append(
                    PluginFailure(plugin_name, dist, f"returned {type(rule).__name__}, not UpdateRule")
                )
                continue
            key = rule.name.lower()
            try:
                check_rule(rule)
            except RuleRegistrationError as exc:
                registry.failures.append(PluginFailure(plugin_name, dist, str(exc)))
                warnings.warn(
                    f"vk-adam rule from {plugin_name!r} ({dist}) rejected: {exc}",
                    PluginLoadWarning,
                    stacklevel=2,
                )
                continue
            if key in origin or key in registry.conflicts:
                registry.conflicts.setdefault(key, [origin[key]] if key in origin else []).append(dist)
                registry.rules.pop(key, None)
                continue
            origin[key] = dist
            registry.rules[key] = replace(rule, distribution=dist)
    return registry


_default: RuleRegistry | None = None


def default_registry() -> RuleRegistry:
    """The process-wide registry, loaded on first use."""
    global _default
    if _default is None:
        _default = load_registry()
    return _default


def reload_registry(blocked: Iterable[str] = ()) -> RuleRegistry:
    """Reload the process-wide registry (after installing a plugin, or to block one)."""
    global _default
    _default = load_registry(blocked)
    return _default
