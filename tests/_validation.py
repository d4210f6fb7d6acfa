"""Khronos validation for the test suite: core + synchronization validation, logged to a file.

The test command (scripts/test.sh) runs the whole suite under the layer and sets
VK_ADAM_VALIDATION=1, which makes a missing layer an error. Elsewhere (e.g. a GPU machine without
the layer) the suite runs without it. Every test fails if the layer logged anything while it ran.

The messages reach the file through the patched kp's ``KOMPUTE_VALIDATION_LOG``: a debug-utils
messenger that appends each message whole (one write to a file opened O_APPEND). The layer's own
``log_filename`` is reopened and truncated by every new VkInstance, so a reader that kept an
offset into it read fragments ("e: NULL", "L") when a test or a subprocess opened an instance.
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


def settings_text() -> str:
    """A vk_layer_settings.txt with synchronization validation on, reporting only to the
    application's messenger (kp's, which writes ``KOMPUTE_VALIDATION_LOG``)."""
    return (
        "khronos_validation.report_flags = error,warn,perf,info\n"
        "khronos_validation.debug_action = VK_DBG_LAYER_ACTION_CALLBACK\n"
        "khronos_validation.enables = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT\n"
    )


def enable(directory: Path, env: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    """Turn the layer on for Vulkan instances created after this (in ``env``); return its log."""
    directory.mkdir(parents=True, exist_ok=True)
    log_file = directory / "validation.log"
    log_file.write_text("")
    (directory / "vk_layer_settings.txt").write_text(settings_text())
    env["VK_LAYER_SETTINGS_PATH"] = str(directory)
    env["VK_INSTANCE_LAYERS"] = LAYER
    env["KOMPUTE_VALIDATION_LOG"] = str(log_file)
    return log_file


#: The layer's "I am active" note at instance creation: informational, proof the layer runs.
STATUS_MESSAGE = "UNASSIGNED-khronos-validation-createinstance-status-message"
#: Informational notes that say nothing about the program: the layer's status, its shader
#: validation cache file not existing yet on a fresh machine, and the loader's own progress
#: notes (the messenger hears the loader too; its warnings and errors still count).
BENIGN = (
    STATUS_MESSAGE,
    "UNASSIGNED-cache-file-error",
    "Loader Message (INFO)",
    # The loader confirming that VK_INSTANCE_LAYERS (set by enable()) added the layer.
    "Loader Message (WARNING)\n    env var 'VK_INSTANCE_LAYERS' defined and adding layers",
)


def messages(text: str) -> list[str]:
    """Split a validation log into messages (each starts at column 0; continuations are
    indented or blank), dropping the layer's own status note."""
    found: list[list[str]] = []
    for line in text.splitlines():
        if line and not line[0].isspace():
            found.append([line])
        elif found:
            found[-1].append(line)
    whole = ["\n".join(m).strip() for m in found]
    return [m for m in whole if not m.startswith(BENIGN)]
