"""The Khronos validation layer: where the Vulkan loader finds it, how a process turns it on
(core + synchronization validation), and reading the log its messages are appended to.

Pure (no kp, no device): the pytest plugin (:mod:`vk_adam.pytest_plugin`, which re-exports these
names) and tests that validate a subprocess of their own use it. The messages reach the log
through vk-adam's patched kp: ``KOMPUTE_VALIDATION_LOG=<file>`` installs a debug-utils messenger
that appends each message whole (its id and severity at column 0, the text indented), one
``write()`` to a file opened ``O_APPEND``, so the messages of several instances and processes
never split each other. (The layer's own ``log_filename`` is reopened, truncated, by every
new VkInstance.)

Device profiles: :func:`stack_profile` puts the Khronos profiles layer (``VK_LAYER_KHRONOS_profiles``,
built by ``scripts/build-profiles-layer.sh``) below the validation layer, so that the device
reports a profile's limits, features and extensions and validation checks the program against
them (``scripts/test-profiles.sh``; docs/devices.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, MutableMapping
from pathlib import Path

#: The layer that ``--vk-validation`` enables.
LAYER = "VK_LAYER_KHRONOS_validation"
#: The layer's "I am active" note at instance creation: informational, proof the layer runs.
STATUS_MESSAGE = "UNASSIGNED-khronos-validation-createinstance-status-message"
#: Messages that say nothing about the program under test (prefixes of the logged message, whose
#: first line is its id and severity): the layer's status note, its shader validation cache file
#: not existing yet on a fresh machine, the loader's progress notes (the messenger hears the
#: loader too; its warnings and errors still count), and the loader confirming that
#: ``VK_INSTANCE_LAYERS`` (which enables the layer) added it.
BENIGN = (
    STATUS_MESSAGE,
    "UNASSIGNED-cache-file-error",
    "Loader Message (INFO)",
    "Loader Message (WARNING)\n    env var 'VK_INSTANCE_LAYERS' defined and adding layers",
)
#: How to get the layer, for the error a missing one raises.
INSTALL_HINT = (
    "Install it: Debian/Ubuntu `apt-get install vulkan-validationlayers`, Fedora `dnf install "
    "vulkan-validation-layers`, Arch `pacman -S vulkan-validation-layers`; elsewhere the LunarG "
    "Vulkan SDK (https://vulkan.lunarg.com/sdk/home). A layer installed in another folder is "
    "found through VK_ADD_LAYER_PATH=<its explicit_layer.d folder>."
)
#: The layer settings: every kind of report, to the application's messenger only (kp's, which
#: writes ``KOMPUTE_VALIDATION_LOG``), synchronization validation on top of core validation.
SETTINGS = (
    "khronos_validation.report_flags = error,warn,perf,info\n"
    "khronos_validation.debug_action = VK_DBG_LAYER_ACTION_CALLBACK\n"
    "khronos_validation.enables = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT\n"
)


def layer_search_path(env: MutableMapping[str, str] | None = None) -> list[Path]:
    """The folders (or files) the Vulkan loader on Linux searches for explicit layer manifests:
    ``$VK_LAYER_PATH`` alone when set, else ``$VK_ADD_LAYER_PATH`` and then the XDG config
    folders, /etc and the XDG data folders (the loader's order)."""
    env = os.environ if env is None else env
    home = env.get("HOME", str(Path.home()))

    def split(name: str, default: str = "") -> list[str]:
        return [p for p in (env.get(name) or default).split(os.pathsep) if p]

    if env.get("VK_LAYER_PATH"):
        return [Path(p) for p in split("VK_LAYER_PATH")]
    roots = [
        *split("XDG_CONFIG_HOME", f"{home}/.config"),
        *split("XDG_CONFIG_DIRS", "/etc/xdg"),
        "/etc",
        *split("XDG_DATA_HOME", f"{home}/.local/share"),
        *split("XDG_DATA_DIRS", "/usr/local/share:/usr/share"),
    ]
    return [Path(p) for p in split("VK_ADD_LAYER_PATH")] + [
        Path(r, "vulkan", "explicit_layer.d") for r in roots
    ]


def find_validation_layer(env: MutableMapping[str, str] | None = None) -> Path | None:
    """The manifest (json) of the Khronos validation layer the loader would find, or None."""
    for place in layer_search_path(env):
        manifests = sorted(place.glob("*.json")) if place.is_dir() else [place]
        for manifest in manifests:
            if manifest.suffix == ".json" and LAYER in _layer_names(manifest):
                return manifest
    return None


def _layer_names(manifest: Path) -> set[str]:
    try:
        data = json.loads(manifest.read_text())
    except (OSError, ValueError):
        return set()
    layers = data.get("layers", [data.get("layer")]) if isinstance(data, dict) else []
    return {str(layer.get("name")) for layer in layers if isinstance(layer, dict)}


def enable_validation(directory: Path, env: MutableMapping[str, str] | None = None) -> Path:
    """Turn the layer on, with synchronization validation, for the Vulkan instances created
    after this in ``env`` (default: this process's environment, which subprocesses inherit);
    return the log file its messages are appended to (vk-adam's patched kp writes it)."""
    env = os.environ if env is None else env
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "validation.log"
    log.write_text("")
    (directory / "vk_layer_settings.txt").write_text(SETTINGS)
    layers = [name for name in env.get("VK_INSTANCE_LAYERS", "").split(os.pathsep) if name]
    env["VK_INSTANCE_LAYERS"] = os.pathsep.join([*layers, LAYER] if LAYER not in layers else layers)
    env["VK_LAYER_SETTINGS_PATH"] = str(directory)
    env["KOMPUTE_VALIDATION_LOG"] = str(log)
    return log


def split_messages(text: str) -> list[str]:
    """The messages of a validation log, each whole (a message starts at column 0; its
    continuation lines are indented or blank)."""
    found: list[list[str]] = []
    for line in text.splitlines():
        if line and not line[0].isspace():
            found.append([line])
        elif found:
            found[-1].append(line)
    return ["\n".join(lines).strip() for lines in found]


def validation_messages(text: str, ignore: Iterable[str] = ()) -> list[str]:
    """The messages of a validation log that count: all but :data:`BENIGN` ones and those that
    start with a prefix in ``ignore``."""
    skip = (*BENIGN, *ignore)
    return [m for m in split_messages(text) if not m.startswith(skip)]


#: The Khronos profiles layer (KhronosGroup/Vulkan-Profiles): it makes the device report a JSON
#: profile's limits, features and extensions, and enforces nothing (validation does).
PROFILES_LAYER = "VK_LAYER_KHRONOS_profiles"
#: What the profiles layer replaces with the profile's values: the API version, the features,
#: the properties (limits included) and the device extension list (a device of the class has the
#: profile's extensions and those promoted to its core version, no others). Formats and queue
#: families stay the device's.
PROFILE_SIMULATES = (
    "SIMULATE_API_VERSION_BIT",
    "SIMULATE_FEATURES_BIT",
    "SIMULATE_PROPERTIES_BIT",
    "SIMULATE_EXTENSIONS_BIT",
)
#: The profiles layer's manifest, in the folder ``scripts/build-profiles-layer.sh`` prints.
PROFILES_MANIFEST = "VkLayer_khronos_profiles.json"


def profile_names(profile_file: Path) -> list[str]:
    """The names of the profiles a profile file (Vulkan-Profiles' JSON format) defines."""
    try:
        data = json.loads(profile_file.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{profile_file} is not a readable JSON profile file: {exc}") from exc
    profiles = data.get("profiles") if isinstance(data, dict) else None
    if not isinstance(profiles, dict) or not profiles:
        raise ValueError(f'{profile_file} defines no profile (no "profiles" object)')
    return list(profiles)


def stack_profile(
    layer_dir: Path,
    profile_file: Path,
    profile_name: str | None = None,
    *,
    log: Path,
    env: MutableMapping[str, str] | None = None,
) -> None:
    """Run the Vulkan instances created after this in ``env`` (default: this process's
    environment, which subprocesses inherit) on a simulated device: the profiles layer (its
    manifest in ``layer_dir``) makes the device report profile ``profile_name`` of
    ``profile_file`` (default: the file's only profile) and sits below the validation layer, so
    that validation checks the program against the simulated limits and features.

    The loader is told the order both ways: ``VK_INSTANCE_LAYERS`` lists the profiles layer last
    (closest to the driver), and ``VK_ADD_LAYER_PATH`` names validation's manifest folder before
    the profiles layer's, because Debian 12's loader (1.3.239) orders the layers by the folder
    their manifests are found in, whatever ``VK_INSTANCE_LAYERS`` says. Use it with validation
    on (``pytest --vk-validation``, or :func:`enable_validation`): the profiles layer enforces
    nothing by itself. Its own notes (profile values the real device lacks) go to ``log``,
    rewritten by each new VkInstance."""
    env = os.environ if env is None else env
    manifest = layer_dir / PROFILES_MANIFEST
    if PROFILES_LAYER not in _layer_names(manifest):
        raise FileNotFoundError(
            f"no {PROFILES_LAYER} manifest in {layer_dir}: build the layer with "
            "`bash scripts/build-profiles-layer.sh`, which prints its folder"
        )
    names = profile_names(profile_file)
    if profile_name is None:
        if len(names) != 1:
            raise ValueError(f"{profile_file} defines {len(names)} profiles ({', '.join(names)}): name one")
        profile_name = names[0]
    elif profile_name not in names:
        raise ValueError(f"{profile_file} defines no profile {profile_name!r}; it has {', '.join(names)}")
    if env.get("VK_LAYER_PATH"):
        raise ValueError(
            "VK_LAYER_PATH is set, so the loader ignores VK_ADD_LAYER_PATH and the layer order it "
            "sets: unset VK_LAYER_PATH"
        )
    validation = find_validation_layer(env)
    if validation is None:
        raise FileNotFoundError(
            f"a device profile is checked by the validation layer ({LAYER}), which is not "
            f"installed. {INSTALL_HINT}"
        )
    added = [p for p in env.get("VK_ADD_LAYER_PATH", "").split(os.pathsep) if p]
    folders = [str(validation.parent), str(layer_dir), *added]
    env["VK_ADD_LAYER_PATH"] = os.pathsep.join(dict.fromkeys(folders))
    layers = [n for n in env.get("VK_INSTANCE_LAYERS", "").split(os.pathsep) if n and n != PROFILES_LAYER]
    env["VK_INSTANCE_LAYERS"] = os.pathsep.join([*layers, PROFILES_LAYER])
    log.parent.mkdir(parents=True, exist_ok=True)
    env.update(
        {
            "VK_KHRONOS_PROFILES_PROFILE_FILE": str(profile_file),
            "VK_KHRONOS_PROFILES_PROFILE_NAME": profile_name,
            "VK_KHRONOS_PROFILES_SIMULATE_CAPABILITIES": ",".join(PROFILE_SIMULATES),
            # vk-adam enables no VK_KHR_portability_subset: an emulated one would make validation
            # report VUID-VkDeviceCreateInfo-pProperties-04451.
            "VK_KHRONOS_PROFILES_EMULATE_PORTABILITY": "false",
            "VK_KHRONOS_PROFILES_DEBUG_ACTIONS": "DEBUG_ACTION_FILE_BIT",
            "VK_KHRONOS_PROFILES_DEBUG_FILENAME": str(log),
            "VK_KHRONOS_PROFILES_DEBUG_REPORTS": "DEBUG_REPORT_WARNING_BIT,DEBUG_REPORT_ERROR_BIT",
        }
    )
