"""kp's process-wide VkInstance, as the pytest plugin sees it before any test runs: the kp module
already imported (never imported here: only one already imported matters), whether it carries
the validation-log patch, and dropping its instance so the next one is made with the layer."""

from __future__ import annotations

import sys


def imported_kp_version() -> str | None:
    """The version of the kp already imported in this process; None when none is."""
    kp = sys.modules.get("kp")
    return None if kp is None else str(getattr(kp, "__version__", "?"))


def imported_kp_has_validation_log() -> bool:
    """Whether the kp imported is vk-adam's patched kp with ``KOMPUTE_VALIDATION_LOG``."""
    return "validation log" in getattr(sys.modules.get("kp"), "patches", ())


def release_imported_instance() -> bool:
    """Drop the imported kp's VkInstance (the next Manager makes a new one); False when a
    ``kp.Manager`` still uses it. True when kp is not imported: there is nothing to drop."""
    kp = sys.modules.get("kp")
    return kp is None or bool(kp.release_instance())
