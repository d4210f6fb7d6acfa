"""Khronos validation for the test suite: core + synchronization validation, logged to a file.

The test command (scripts/test.sh) runs the whole suite under the layer and sets
VK_ADAM_VALIDATION=1, which makes a missing layer an error. Elsewhere (e.g. a GPU machine without
the layer) the suite runs without it. Every test fails if the layer logged anything while it ran.
"""

from __future__ import annotations

import os
from pathlib import Path

LAYER = "VK_LAYER_KHRONOS_validation"
_MANIFEST_DIRS = (
    "/usr/share/vulkan/explicit_layer.d",
    "/usr/local/share/vulkan/explicit_layer.d",
    "/etc/vulkan/explicit_layer.d",
)


def layer_installed() -> bool:
    return any(Path(d, "VkLayer_khronos_validation.json").exists() for d in _MANIFEST_DIRS)


def settings_text(log_file: Path) -> str:
    """A vk_layer_settings.txt that makes the layer report through a file (kp's own debug
    callback would swallow its messages) with synchronization validation on."""
    return (
        f"khronos_validation.log_filename = {log_file}\n"
        "khronos_validation.report_flags = error,warn,perf,info\n"
        "khronos_validation.debug_action = VK_DBG_LAYER_ACTION_LOG_MSG\n"
        "khronos_validation.enables = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT\n"
    )


def enable(directory: Path, env: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    """Turn the layer on for Vulkan instances created after this (in ``env``); return its log."""
    directory.mkdir(parents=True, exist_ok=True)
    log_file = directory / "validation.log"
    log_file.write_text("")
    (directory / "vk_layer_settings.txt").write_text(settings_text(log_file))
    env["VK_LAYER_SETTINGS_PATH"] = str(directory)
    env["VK_INSTANCE_LAYERS"] = LAYER
    return log_file


#: The layer's "I am active" note at instance creation: informational, proof the layer runs.
STATUS_MESSAGE = "UNASSIGNED-khronos-validation-createinstance-status-message"


def messages(text: str) -> list[str]:
    """Split a validation log into messages (each starts at column 0; continuations are
    indented or blank), dropping the layer's own status note."""
    found: list[list[str]] = []
    for line in text.splitlines():
        if line and not line[0].isspace():
            found.append([line])
        elif found:
            found[-1].append(line)
    return ["\n".join(m).strip() for m in found if not m[0].startswith(STATUS_MESSAGE)]
