"""The update-rule registry: pluggy plugins (built-in and third-party) -> checked UpdateRules.

Built-in rules are registered exactly like outside plugins (cf. pytest's ``default_plugins``);
outside plugins arrive through the ``vk_adam`` entry-point group. Every rule's shaders are
checked against its declaration when the registry loads. A plugin that fails to import, or a
rule that fails its check, is reported by name and skipped; every other rule still loads.
A rule object handed straight to the optimizer goes through the same checks
(:func:`.checks.check_rule_object`), so no unchecked shader ever reaches the device.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from types import ModuleType

import pluggy

from .._errors import RuleRegistrationError, warn_at_caller
from . import builtin as _builtin_rules
from . import hookspecs as _hookspecs
from .checks import check_rule_object, remember_checked
from .rule import UpdateRule

#: Environment variable: comma-separated plugin names (entry-point names) not to load.
BLOCK_ENV = "VK_ADAM_BLOCK_PLUGINS"
#: Environment variable: comma-separated plugin names (entry-point names) whose rules may
#: replace a built-in rule of the same name (adam, adamw, sgd). Without it they are refused.
BUILTIN_OVERRIDE_ENV = "VK_ADAM_ALLOW_BUILTIN_OVERRIDE"
ENTRY_POINT_GROUP = "vk_adam"
BUILTIN_PLUGIN = "vk_adam.builtin"


class PluginLoadWarning(UserWarning):
    """A plugin or one of its rules could not be loaded; the others still are."""


@dataclass(frozen=True)
class PluginFailure:
    """A plugin or rule that did not load, and why."""

    plugin: str
    distribution: str
    error: str


@dataclass
class RuleRegistry:
    """Every loaded update rule by name, with what failed to load.

    ``conflicts`` maps a rule name that several plugins provide to their distributions, and
    ``conflict_plugins`` to their plugin (entry-point) names, the names blocking takes.
    """

    rules: dict[str, UpdateRule] = field(default_factory=dict)
    failures: list[PluginFailure] = field(default_factory=list)
    conflicts: dict[str, list[str]] = field(default_factory=dict)  # name -> distributions
    conflict_plugins: dict[str, list[str]] = field(default_factory=dict)  # name -> plugin names
    plugin_manager: pluggy.PluginManager | None = None

    def get(self, name: str) -> UpdateRule:
        """The rule called ``name``; a clear error when it is unknown, blocked or ambiguous."""
        key = name.lower()
        if key in self.conflicts:
            dists = " and ".join(self.conflicts[key])
            plugins = self.conflict_plugins.get(key, [])
            choices = " or ".join(
                f"{plugin!r} (from {dist})"
                for plugin, dist in zip(plugins, self.conflicts[key], strict=False)
            )
            first = plugins[0] if plugins else "<plugin name>"
            raise RuleRegistrationError(
                f"two plugins provide an update rule named {key!r}: {dists}. Uninstall one, or block "
                f"one by its plugin (entry-point) name, {choices}: e.g. ${BLOCK_ENV}={first} or "
                f"vk_adam.reload_registry(blocked=[{first!r}])."
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


def _names(given: Iterable[str], argument: str, env: str) -> dict[str, str]:
    """Plugin names from an argument and a comma-separated environment variable -> where from."""
    if isinstance(given, str):  # a bare string would be split into letters
        given = [given]
    names = {n.strip(): f"the {argument}= argument" for n in given if n.strip()}
    for n in os.environ.get(env, "").split(","):
        if n.strip():
            names.setdefault(n.strip(), f"${env}")
    return names


def _warn(message: str) -> None:
    warn_at_caller(message, PluginLoadWarning)  # the application's line that loaded the registry


def load_registry(
    blocked: Iterable[str] = (),
    *,
    entry_points: bool = True,
    extra_plugins: Iterable[object] = (),
    allow_builtin_override: Iterable[str] = (),
) -> RuleRegistry:
    """Load built-in rules, entry-point plugins (unless blocked) and ``extra_plugins``.

    ``blocked`` (plus ``$VK_ADAM_BLOCK_PLUGINS``) names plugins (entry-point names) to skip; a
    name that matches no plugin is reported with a :class:`PluginLoadWarning`.

    The built-in rule names (adam, adamw, sgd) stay built in: an outside plugin's rule of one
    of those names is refused with a warning naming its distribution, unless the plugin is
    named in ``allow_builtin_override`` (or ``$VK_ADAM_ALLOW_BUILTIN_OVERRIDE``), in which
    case its rule replaces the built-in one, ``vk_adam.Adam`` & co. included.

    This returns a new registry; ``vk_adam.create`` and the optimizer classes use the
    process-wide one, which :func:`reload_registry` replaces.
    """
    loading = _Loading(
        _names(blocked, "blocked", BLOCK_ENV),
        _names(allow_builtin_override, "allow_builtin_override", BUILTIN_OVERRIDE_ENV),
    )
    found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    loading.known_plugins |= {ep.name for ep in found}
    if entry_points:
        loading.load_entry_points(found)
    for index, extra in enumerate(extra_plugins):
        extra_name = getattr(extra, "__name__", f"extra-plugin-{index}")
        loading.known_plugins.add(extra_name)
        loading.pm.register(extra, name=extra_name)  # a blocked name registers nothing (pluggy)
    loading.collect_rules()
    loading.check_names()
    for message in loading.warnings:  # here, so that they point at the caller of load_registry
        _warn(message)
    return loading.registry


class _Loading:
    """One run of :func:`load_registry`: the plugin manager, the registry it fills, and the
    warnings it has to give."""

    def __init__(self, blocked: dict[str, str], overrides: dict[str, str]) -> None:
        self.blocked, self.overrides = blocked, overrides
        self.pm = pluggy.PluginManager(_hookspecs.PROJECT_NAME)
        self.pm.add_hookspecs(_hookspecs)
        self.registry = RuleRegistry(plugin_manager=self.pm)
        self.plugin_dists: dict[int, str] = {}  # id(plugin object) -> "distribution version"
        self.known_plugins: set[str] = {BUILTIN_PLUGIN}  # every plugin name a user could block
        self.origin: dict[str, tuple[str, str]] = {}  # rule name -> (plugin name, distribution)
        self.builtin_names = {r.name.lower() for r in _builtin_rules.vk_adam_rules()}
        self.warnings: list[str] = []
        self.pm.register(_builtin_rules, name=BUILTIN_PLUGIN)
        for name in blocked:
            if name != BUILTIN_PLUGIN:
                self.pm.set_blocked(name)

    def _fail(self, plugin: str, dist: str, error: str, message: str | None = None) -> None:
        self.registry.failures.append(PluginFailure(plugin, dist, error))
        if message is not None:
            self.warnings.append(message)

    def load_entry_points(self, found: Iterable[importlib.metadata.EntryPoint]) -> None:
        loaded_from: dict[str, str] = {}  # entry-point name -> distribution that registered it
        for ep in found:
            dist = f"{ep.dist.metadata['name']} {ep.dist.version}" if ep.dist else "unknown"
            if ep.name in self.blocked:
                continue
            if ep.name in loaded_from:
                if loaded_from[ep.name] != dist:
                    # Blocking goes by entry-point name, so two plugins sharing one cannot be told
                    # apart: say so rather than dropping one silently.
                    self._fail(
                        ep.name,
                        dist,
                        f"entry-point name also used by {loaded_from[ep.name]}",
                        f"vk-adam plugin {ep.name!r} ({dist}) is skipped: {loaded_from[ep.name]} already "
                        "registered a plugin with that entry-point name; uninstall one of them",
                    )
                continue
            try:
                plugin = ep.load()
                self.pm.register(plugin, name=ep.name)
            except Exception as exc:
                self._fail(
                    ep.name,
                    dist,
                    f"{type(exc).__name__}: {exc}",
                    f"vk-adam plugin {ep.name!r} ({dist}) failed to load and is skipped: {exc}",
                )
                continue
            loaded_from[ep.name] = dist
            self.plugin_dists[id(plugin)] = dist

    def collect_rules(self) -> None:
        """Every plugin's rules, built-ins first (whatever order pluggy keeps), so that their
        names are taken before any outside plugin asks for them."""
        builtin_dist = _vk_adam_distribution()
        impls = sorted(
            self.pm.hook.vk_adam_rules.get_hookimpls(), key=lambda i: i.plugin is not _builtin_rules
        )
        for impl in impls:
            plugin_name = self.pm.get_name(impl.plugin) or "?"
            is_builtin = impl.plugin is _builtin_rules
            if is_builtin:
                dist = builtin_dist
            else:
                dist = self.plugin_dists.get(id(impl.plugin)) or (
                    impl.plugin.__name__ if isinstance(impl.plugin, ModuleType) else plugin_name
                )
            try:
                provided: list[object] = list(impl.function())  # type: ignore[call-overload]
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                self._fail(
                    plugin_name,
                    dist,
                    error,
                    f"vk-adam plugin {plugin_name!r} ({dist}) raised in vk_adam_rules: {exc}",
                )
                continue
            for rule in provided:
                self._add(rule, plugin_name, dist, is_builtin)

    def _add(self, rule: object, plugin_name: str, dist: str, is_builtin: bool) -> None:
        """One rule a plugin provided: refused, registered, replacing a built-in, or in conflict."""
        registry, origin = self.registry, self.origin
        if not isinstance(rule, UpdateRule):
            self._fail(plugin_name, dist, f"returned {type(rule).__name__}, not UpdateRule")
            return
        key = str(rule.name).lower()
        if not is_builtin and key in self.builtin_names and plugin_name not in self.overrides:
            error = (
                f"provides a rule named {key!r}, which is a built-in vk-adam rule: the built-in "
                f"is kept. To let this plugin replace it, set ${BUILTIN_OVERRIDE_ENV}={plugin_name} "
                f"or pass load_registry(allow_builtin_override=[{plugin_name!r}])"
            )
            self._fail(plugin_name, dist, error, f"vk-adam plugin {plugin_name!r} ({dist}) {error}")
            return
        try:
            check_rule_object(rule)
        except Exception as exc:  # one bad rule never stops the others from loading
            self._fail(
                plugin_name, dist, str(exc), f"vk-adam rule from {plugin_name!r} ({dist}) rejected: {exc}"
            )
            return
        if key in origin and origin[key][0] == BUILTIN_PLUGIN and not is_builtin:
            del origin[key]  # an opted-in override (checked above) replaces the built-in
            registry.rules.pop(key, None)
        if key in origin or key in registry.conflicts:
            if key in origin:
                registry.conflicts[key] = [origin[key][1]]
                registry.conflict_plugins[key] = [origin[key][0]]
            registry.conflicts[key].append(dist)
            registry.conflict_plugins[key].append(plugin_name)
            origin.pop(key, None)
            registry.rules.pop(key, None)
            return
        origin[key] = (plugin_name, dist)
        registered = replace(rule, distribution=dist, plugin=plugin_name)
        remember_checked(registered)  # the same rule, already checked: Optimizer skips it
        registry.rules[key] = registered

    def check_names(self) -> None:
        """Warn of the blocked and override names that match no plugin."""
        outside_plugins = ", ".join(sorted(self.known_plugins - {BUILTIN_PLUGIN})) or "none installed"
        for name, source in self.overrides.items():
            if name not in self.known_plugins or name == BUILTIN_PLUGIN:
                self.warnings.append(
                    f"{source} names {name!r}, but no vk-adam plugin is called that; it allows nothing. "
                    f"Name plugins by entry-point name (`vk-adam rules` shows it): {outside_plugins}."
                )
        for name, source in self.blocked.items():
            if name in self.known_plugins and name != BUILTIN_PLUGIN:
                continue
            if name == BUILTIN_PLUGIN or name in self.builtin_names:
                self.warnings.append(f"{source} names {name!r}: vk-adam's built-in rules cannot be blocked")
                continue
            hint = ""
            if name.lower() in self.registry.rules:
                hint = (
                    f" {name!r} is a rule name; its plugin is {self.registry.rules[name.lower()].plugin!r}: "
                    "block that."
                )
            self.warnings.append(
                f"{source} names {name!r}, but no vk-adam plugin is called that; it blocks nothing. "
                f"Plugins are blocked by entry-point name (`vk-adam rules` shows it): "
                f"{outside_plugins}.{hint}"
            )


_default: RuleRegistry | None = None


def default_registry() -> RuleRegistry:
    """The process-wide registry, loaded on first use."""
    global _default
    if _default is None:
        _default = load_registry()
    return _default


def reload_registry(
    blocked: Iterable[str] = (), *, allow_builtin_override: Iterable[str] = ()
) -> RuleRegistry:
    """Reload the process-wide registry, the one ``vk_adam.create`` and the optimizer classes
    use (after installing a plugin, to block one, or to let one replace a built-in rule)."""
    global _default
    _default = load_registry(blocked, allow_builtin_override=allow_builtin_override)
    return _default
