"""Two objects an optimizer holds (composition, no base class): what an application that keeps
its buffers on the GPU uses of it (:class:`DeviceBuffers`: its device buffers and their layout,
the on-device gradient clipping's bound and last norm), whose work :class:`vk_adam.Optimizer`'s
methods of those names hand on; and what code that wraps an optimizer uses of it
(:class:`WrapperAccess`, returned by :meth:`vk_adam.Optimizer.internals`): ZeRO-1, LoRA
checkpoints and the benchmarks.

Kept apart so the optimizer front stays about the order of a step; both read the optimizer's
device side and runtime, nothing else. The optimizer checks that it is open before it asks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._runtime import Runtime, host_view
from .clipping import check_max_norm
from .device import DeviceGroups, Group
from .host.to_device import HostToDevice
from .stepping import Stepper
from .storage import Storage


class WrapperAccess:
    """The documented interface of an optimizer for code that wraps one, beyond the public API:
    what ``vk_adam.distributed``'s ZeRO-1, ``vk_adam.lora``'s checkpoint verification and the
    benchmarks read and set (docs/architecture.md, "What each package may touch"). Reached by
    :meth:`vk_adam.Optimizer.internals`; no other package reads an optimizer's private attributes.

    It is a view: it reads the optimizer's device side as it is when read, and holds nothing of
    its own. Applications have no need of it (everything here is the library's machinery, which
    may change between releases).
    """

    __slots__ = ("_dev", "_rt")

    def __init__(self, dev: DeviceGroups, rt: Runtime) -> None:
        self._dev, self._rt = dev, rt

    # -- what the buffers are ----------------------------------------------------------------

    @property
    def groups(self) -> list[Group]:
        """Each param group as the device side holds it (``buffers.Group``): its options (the
        ``param_groups`` dict), shader variant, slots and buffer sets (``Group.sets``, each a
        ``buffers.BufferSet``: the param, grad and state kp tensors, their storage format
        ``format``, the ZeRO-1 ``window``, and ``spirv``, the update shader its pipeline runs)."""
        return self._dev.groups

    @property
    def storage(self) -> Storage:
        """The storage options the optimizer was made with (``storage.Storage``: state dtype,
        stochastic rounding, seed, ZeRO-1 windows, exportable)."""
        return self._dev.storage

    @property
    def seed(self) -> int:
        """The seed of the stochastic-rounding stream now (a loaded state dict may change it, so
        it can differ from ``storage.seed``)."""
        return self._dev.seed

    # -- what ZeRO-1 sets ----------------------------------------------------------------------

    def set_grad_scale(self, scale: float | None) -> None:
        """Multiply the gradients of the next synchronous steps by ``scale`` (the harness's
        gradient scale, as clipping's factor), a value the caller computed: ZeRO-1 clips by the
        norm over every rank's shard. None: back to 1.0. Not with this optimizer's own clipping,
        nor with ``capturable=True`` (ValueError)."""
        if self._dev.clipper is not None:
            raise ValueError("this optimizer clips on the device (clip_grad_norm); it takes no scale")
        if self._dev.clock is not None:
            raise ValueError("a capturable optimizer takes no gradient scale from the host")
        self._dev.grad_scale = None if scale is None else float(np.float32(scale))

    def stage_status(self) -> list[Any]:
        """Write the host's part of the status buffer (the skip flag cleared, the scale of
        :meth:`set_grad_scale`) into its staging memory, and return the buffers a recording must
        upload before the step (``[status]``, or ``[]`` when the host sets nothing). A
        synchronous ``step()`` does this itself; a caller that records the step into a sequence
        of its own (ZeRO-1 over NCCL, ``record_step``) uploads them first."""
        return self._dev.stage_status()

    # -- what the benchmarks time ---------------------------------------------------------------

    @property
    def runtime(self) -> Runtime:
        """The optimizer's :class:`vk_adam._runtime.Runtime`: the device, its limits and
        features, and the record-submit-wait path every step takes (benchmarks time and wrap it)."""
        return self._rt

    @property
    def host_traffic(self) -> HostToDevice:
        """How NumPy groups' params and gradients reach the device and come back
        (``host.to_device.HostToDevice``: host imports, the bound imports, the staged copies and
        the copy ops back), for benchmarks of those paths; ``host_traffic.imports.enabled`` tells
        whether this optimizer imports NumPy arrays (``VK_ADAM_HOST_IMPORT`` and the device, when
        it was made)."""
        return self._dev.to_device

    def step_ops(self) -> tuple[list[Any], int, int]:
        """The ops of the next step over the gradients already on the device (no upload), built
        as ``step()`` builds them, and the span of its update dispatches (first op, one past the
        last): for benchmarks that run a step's own ops without the optimizer's Python."""
        ops, first, last = self._dev.step_ops([], self._dev.pushes())
        return self._rt.build_ops(ops), first, last  # made once, as kp ops: run as they are


class DeviceBuffers:
    """Device buffers, layout and clipping of an optimizer: the work behind
    :class:`vk_adam.Optimizer`'s methods of these names (their docstrings are the optimizer's).
    It holds the optimizer's device side ``dev``, runtime ``rt``, step paths ``steps`` and
    ``drain`` (waits for the steps in flight), never the optimizer itself (no reference cycle)."""

    __slots__ = ("_dev", "_drain", "_rt", "_steps")

    def __init__(self, dev: DeviceGroups, rt: Runtime, steps: Stepper, drain: Callable[[], None]) -> None:
        self._dev, self._rt, self._steps, self._drain = dev, rt, steps, drain

    @property
    def clip_grad_norm(self) -> float | None:
        return self._dev.max_norm if self._dev.clipper is not None else None

    def set_clip_grad_norm(self, value: float) -> None:
        if self._dev.clipper is None:
            raise ValueError(
                "clipping is chosen at construction: create the optimizer with clip_grad_norm=..."
            )
        max_norm = check_max_norm(value)
        if max_norm is None:
            raise ValueError("clip_grad_norm cannot be turned off after construction")
        if (
            self._steps.captured is not None
            and self._steps.captured.recorded
            and max_norm != self._dev.max_norm
        ):
            raise ValueError(
                "clip_grad_norm cannot change after a captured step was recorded: the recording "
                f"holds it as a push constant and would go on clipping to {self._dev.max_norm}; "
                "make a new optimizer with the new bound and load this one's state_dict()"
            )
        self._dev.max_norm = max_norm

    def last_grad_norm(self) -> float:
        if self._dev.clipper is None:
            raise ValueError("last_grad_norm() needs an optimizer created with clip_grad_norm=...")
        self._drain()
        self._rt.run([self._rt.download_op([self._dev.status])])
        return float(host_view(self._dev.status).view(np.float32)[2])

    def param_buffer(self, group: int, index: int) -> Any:
        groups = self._dev.groups
        if groups[group].host_mode:
            self._drain()
            self._dev.to_device.keep_flat_params(groups)
        return groups[group].sets[index].param

    def reload_params(self) -> None:
        self._drain()  # steps in flight copy into the arrays when they finish: let them
        self._dev.to_device.reload = True

    def grad_buffer(self, group: int, index: int) -> Any:
        buffer = self._dev.groups[group].sets[index].grad
        self._steps.checks.grad_buffer_taken = True
        return buffer

    def state_buffer(self, name: str, group: int, index: int) -> Any:
        state = self._dev.groups[group].sets[index].state
        if name not in state:
            raise KeyError(f"no state {name!r}; this optimizer's rule keeps {sorted(state)}")
        return state[name]

    def param_offsets(self, group: int) -> list[tuple[int, tuple[int, ...]]]:
        return [(s.offset, s.shape) for s in self._dev.groups[group].slots]

    def memory_bytes(self) -> dict[str, int]:
        dev, rt = self._dev, self._rt
        kinds = dict.fromkeys(("param", "grad", "master", "state", "absmax", "other"), 0)
        for group in dev.groups:
            for b in group.sets:
                kinds["param"] += rt.buffer_bytes(b.param)
                kinds["grad"] += rt.buffer_bytes(b.grad)
                kinds["master"] += rt.buffer_bytes(b.master) if b.master is not None else 0
                kinds["state"] += sum(rt.buffer_bytes(t) for t in b.state.values())
                kinds["absmax"] += sum(rt.buffer_bytes(t) for t in b.absmax.values())
        other = [dev.status, dev.unused, dev.no_tables, *([dev.qtable] if dev.qtable is not None else [])]
        if dev.clipper is not None:
            other.append(dev.clipper.partials)
        kinds["other"] = sum(rt.buffer_bytes(t) for t in other)
        kinds["total"] = sum(kinds.values())
        return kinds
