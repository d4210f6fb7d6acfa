"""The facts of one device that vk-adam decides by, in one object: :class:`DeviceFacts`.

A :class:`~.runtime.Runtime` reads them once, when it opens its device (:meth:`DeviceFacts.read`),
and keeps the object (``Runtime.facts``); every decision that depends on the device reads it
there: the workgroup size of vk-adam's own shaders and the workgroup cap, binding windows
(``maxStorageBufferRange``, ``minStorageBufferOffsetAlignment``), allocation pieces
(``maxMemoryAllocationSize``), push constants, storage buffers per pipeline, the subgroup
variant (``info``'s subgroup properties) and host-memory import and export (``sharing``).

The properties dict of kp (``get_device_properties()``, ``list_devices()``) is read for limits in
two modules only: ``limits.py`` turns one into a :class:`DeviceLimits` (the reader of every
limit and feature), and this one asks a device for it. A new limit is a field of
:class:`DeviceLimits`; a new decision made from limits is a property here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .._inputs import env_int
from ._kp import kp_module
from .devices import DeviceInfo, application_device, limit_fields
from .external import Sharing, sharing, with_sharing
from .limits import DeviceLimits, allocation_limit
from .shared import as_manager

#: Invocations per workgroup of vk-adam's own shaders where the device allows them (the
#: harness's own; ``local_size_x_id`` sets it, see ``Runtime.sized_spec``).
WORKGROUP_SIZE = 256
#: Upper bound on workgroups per dispatch; shaders loop (grid-stride) over the rest.
MAX_WORKGROUPS = 65535
#: A workgroup cap for tuning experiments; unset: MAX_WORKGROUPS, and for the rule harness's
#: loops the device's limit (DeviceFacts.update_workgroup_cap).
MAX_WORKGROUPS_ENV = "VK_ADAM_MAX_WORKGROUPS"


@dataclass(frozen=True)
class DeviceFacts:
    """Every limit and feature of one open device that vk-adam uses, and the decisions made from
    them. Read once per runtime (:meth:`read`); frozen, so no caller keeps a copy that drifts.

    A limit this kp build cannot read (a stock kp: ``limits.assumed``) is not enforced by the
    decisions below: the spec's guarantee (4 storage buffers per stage, 1 GiB allocations) would
    refuse every rule, and the stock path is the fallback that warns it is one."""

    #: What the device is, as ``vk_adam.list_devices()`` tells it, with its subgroup and
    #: workgroup limits from :attr:`limits` and what it shares (``Sharing``) filled in.
    info: DeviceInfo
    #: Every limit and feature read from the device; the spec's guarantees where this kp build
    #: cannot read them (named in ``limits.assumed``).
    limits: DeviceLimits
    #: Host-memory import and opaque-fd export and import; None on a kp without patch 0017.
    sharing: Sharing | None
    #: Nanoseconds per timestamp tick (reported by a patched kp; 1.0 assumed otherwise).
    timestamp_period: float
    #: Workgroups one dispatch runs at most: :data:`MAX_WORKGROUPS`, the device's
    #: ``maxComputeWorkGroupCount[0]`` and ``$VK_ADAM_MAX_WORKGROUPS``, the smallest (the
    #: variable is read with the device, so a runtime keeps the cap it was made with).
    workgroup_cap: int
    #: Workgroups an update dispatch (the rule harness's loops) runs at most: the device's
    #: ``maxComputeWorkGroupCount[0]``, or ``$VK_ADAM_MAX_WORKGROUPS`` below it. The harness
    #: indexes vec4s and blocks, below 2^30 for any grid, so a large step needs no grid-stride
    #: loop: one workgroup per tile leaves no partial last wave of long-running workgroups
    #: (1.7% of an fp32 step of 2^28 elements on an H100, results/h100-2026-12-07-grid).
    update_workgroup_cap: int

    @classmethod
    def read(cls, manager: Any, known: DeviceInfo | None = None) -> DeviceFacts:
        """The facts of a ``kp.Manager``'s device; ``known``: what vk-adam's device list tells of
        it (None for an application's manager: its properties dict names it)."""
        props = manager.get_device_properties()
        limits = DeviceLimits.from_properties(props)
        info = (
            replace(known, **limit_fields(limits)) if known is not None else application_device(props, limits)
        )
        shares = sharing(manager)
        cap = min(MAX_WORKGROUPS, info.max_workgroup_count, env_int(MAX_WORKGROUPS_ENV, MAX_WORKGROUPS))
        update_cap = min(info.max_workgroup_count, env_int(MAX_WORKGROUPS_ENV, info.max_workgroup_count))
        return cls(
            info=with_sharing(info, shares),
            limits=limits,
            sharing=shares,
            timestamp_period=float(props.get("timestamp_period", 1.0)),
            workgroup_cap=cap,
            update_workgroup_cap=update_cap,
        )

    def _readable(self, *names: str) -> bool:
        return self.limits.assumed.isdisjoint(names)

    @property
    def threads(self) -> int:
        """Invocations per workgroup of vk-adam's own shaders (specialization constant 25):
        :data:`WORKGROUP_SIZE`, or the largest power of two below it that the device's workgroup
        limits allow (at least 128 by spec)."""
        widths = (WORKGROUP_SIZE, WORKGROUP_SIZE // 2, WORKGROUP_SIZE // 4)
        return max((t for t in widths if t <= self.info.max_workgroup_size), default=WORKGROUP_SIZE // 4)

    @property
    def max_binding_bytes(self) -> int:
        """The largest byte range one storage-buffer binding may span (maxStorageBufferRange)."""
        lim = self.limits
        return lim.max_storage_buffer_range if self._readable("max_storage_buffer_range") else 1 << 62

    @property
    def binding_alignment(self) -> int:
        """The alignment of a binding's offset (minStorageBufferOffsetAlignment)."""
        return self.limits.min_storage_buffer_offset_alignment

    @property
    def max_allocation_bytes(self) -> int:
        """Bytes one allocation may hold (maxMemoryAllocationSize: ``allocation_limit``)."""
        return allocation_limit(self.limits)

    @property
    def max_push_bytes(self) -> int:
        """Bytes of push constants one pipeline may have (maxPushConstantsSize)."""
        return self.limits.max_push_constants_size

    @property
    def max_storage_buffers(self) -> int:
        """Storage buffers one compute pipeline may bind (maxPerStageDescriptorStorageBuffers and
        maxDescriptorSetStorageBuffers, the smaller)."""
        lim = self.limits
        per_stage = ("max_per_stage_descriptor_storage_buffers", "max_descriptor_set_storage_buffers")
        if not self._readable(*per_stage):
            return 1 << 20
        return min(lim.max_per_stage_descriptor_storage_buffers, lim.max_descriptor_set_storage_buffers)


def device_limits(manager: Any) -> DeviceLimits:
    """The limits of a ``kp.Manager``'s device (or a ``vk_adam.DeviceHandle``'s)."""
    return DeviceLimits.from_properties(as_manager(manager).get_device_properties())


def all_device_limits() -> list[DeviceLimits]:
    """Every device's limits, in kp's device order, read without opening a device."""
    listed = getattr(kp_module(), "list_devices", None)
    return [DeviceLimits.from_properties(props) for props in (listed() if listed is not None else [])]


__all__ = [
    "MAX_WORKGROUPS",
    "MAX_WORKGROUPS_ENV",
    "WORKGROUP_SIZE",
    "DeviceFacts",
    "all_device_limits",
    "device_limits",
]
