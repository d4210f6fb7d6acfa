"""The one place that imports kp, and what the imported kp can do.

kp is imported lazily (``import vk_adam`` works without a Vulkan loader, e.g. to build a
plugin's shaders). The stock kp 0.9.0 calls ``logging.basicConfig()`` at import; that side
effect on the host application is undone here (the patched build no longer does it).

vk-adam builds kp 0.9.0 with its own patch series (``kp-patches/``). What a build can do is
detected by feature, never by version string: the patched module lists its changes in
``kp.patches`` and binds ``OpMemoryBarrier``; a stock kp has neither, and vk-adam then falls
back to ordering steps with a bridge copy (see ``runtime.py``).
"""

from __future__ import annotations

import functools
import logging
import warnings
from dataclasses import dataclass
from types import ModuleType

from .._errors import NoVulkanDeviceError


class StockKpWarning(UserWarning):
    """kp was built without vk-adam's patches: steps use the slower, weaker fallback path."""


@functools.cache
def kp_module() -> ModuleType:
    """Import kp once, undoing the ``logging.basicConfig()`` a stock build runs at import."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import kp
    except ImportError as exc:
        raise NoVulkanDeviceError(_import_failure(exc)) from exc
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
    module: ModuleType = kp
    return module


def _import_failure(exc: ImportError) -> str:
    """What to install, for the ImportError kp raised."""
    if "libvulkan" in str(exc):  # kp's shared object links the Vulkan loader, libvulkan.so.1
        return (
            f"the Vulkan loader is not installed ({exc}). Install it and a driver: "
            "Debian/Ubuntu `apt-get install libvulkan1`, plus `mesa-vulkan-drivers` for a CPU "
            "device (lavapipe) or your GPU vendor's Vulkan driver; Fedora `dnf install "
            "vulkan-loader mesa-vulkan-drivers`."
        )
    return (
        f"the Kompute Python package `kp` could not be imported ({exc}). Install vk-adam's "
        "patched kp: `pip install --find-links dist kp` from `bash scripts/build-wheels.sh`, or "
        "`bash scripts/setup.sh` in a checkout (docs/packaging.md)."
    )


#: The patch features the fast, fully synchronized path needs.
REQUIRED_PATCHES = ("fence reuse", "async eval", "OpMemoryBarrier", "upload barrier read+write")


@dataclass(frozen=True)
class KpFeatures:
    """What the imported kp build can do."""

    version: str
    #: Changes the build makes against the kp 0.9.0 release (``kp.patches``; empty when stock).
    patches: tuple[str, ...]
    #: ``kp.OpMemoryBarrier`` is bound: steps are ordered by real memory barriers.
    memory_barriers: bool

    @property
    def patched(self) -> bool:
        """Every patch the fast path relies on is present."""
        return self.memory_barriers and all(p in self.patches for p in REQUIRED_PATCHES)

    @property
    def async_submit(self) -> bool:
        """``Sequence.eval_async()`` submits a whole recorded sequence without waiting."""
        return "async eval" in self.patches

    @property
    def binding_windows(self) -> bool:
        """Pipelines can bind byte windows of buffers (``Manager.algorithm_windowed``)."""
        return "binding windows" in self.patches

    @property
    def dispatch_barrier_opt_out(self) -> bool:
        """A dispatch op can leave out kp's own barrier at its start (``barrier=False``)."""
        return "dispatch barrier opt-out" in self.patches

    @property
    def device_limits(self) -> bool:
        """``get_device_properties()`` reports the device's limits, features, extensions and
        memory heaps (kp patch 0020; see ``limits.py``), not only its workgroup limits."""
        return "device limits" in self.patches

    @property
    def portability_enumeration(self) -> bool:
        """The instance asks the loader for portability devices (MoltenVK) where it offers
        VK_KHR_portability_enumeration; ``kp.portability_enumeration()`` says if it did."""
        return "portability enumeration" in self.patches

    @property
    def upload_counter(self) -> bool:
        """``Tensor.uploads()`` counts the evaluated ``OpTensorSyncDevice`` copies over a
        tensor's device memory (a recorded sequence evaluated n times counts n)."""
        return "upload counter" in self.patches

    @property
    def eval_once(self) -> bool:
        """``kp.OpEvalOnce(message)``: its sequence refuses a second evaluation with
        RuntimeError(message) before anything of it is submitted; ``Sequence.evaluations()``."""
        return "eval once" in self.patches

    @property
    def device_handles(self) -> bool:
        """``device_handle()`` on tensors, sequences and managers: their VkDevice as an int."""
        return "device handles" in self.patches

    @property
    def missing(self) -> tuple[str, ...]:
        """Required patches this build lacks."""
        have = set(self.patches) | ({"OpMemoryBarrier"} if self.memory_barriers else set())
        return tuple(p for p in REQUIRED_PATCHES if p not in have)

    def describe(self, *, verbose: bool = False) -> str:
        """One line for ``vk-adam info``: the build and the synchronization path in use
        (``verbose``: every patch of the build by name, on lines of their own)."""
        if self.patched:
            line = f"kp {self.version}: kp 0.9.0 with vk-adam's patches ({len(self.patches)})"
            if not verbose:
                return line + "; `vk-adam info --verbose` lists them"
            return line + ":" + "".join(f"\n  {p}" for p in self.patches)
        return (
            f"kp {self.version} (stock: lacks {', '.join(self.missing)}; steps are ordered by a "
            "bridge copy, an execution dependency only, and each synchronous step pays kp's "
            "fence creation)"
        )


@functools.cache
def kp_features() -> KpFeatures:
    """Detect the imported kp's features (cached)."""
    kp = kp_module()
    patches = tuple(str(p) for p in getattr(kp, "patches", ()))
    return KpFeatures(
        version=str(getattr(kp, "__version__", "unknown")),
        patches=patches,
        memory_barriers=hasattr(kp, "OpMemoryBarrier"),
    )


@functools.cache
def warn_if_stock() -> None:
    """Warn once per process when the fallback path is in use."""
    features = kp_features()
    if not features.patched:
        warnings.warn(
            f"vk-adam is running on a stock {features.describe()}. Results are correct on the "
            "drivers tested, but the Vulkan spec does not guarantee them. Run "
            "`bash scripts/setup.sh` to build the patched kp.",
            StockKpWarning,
            stacklevel=4,
        )
