"""What an application that keeps its buffers on the GPU uses of an optimizer: its device
buffers and their layout, and the on-device gradient clipping (its bound and the last norm).

A base class of :class:`vk_adam.Optimizer`, kept apart so the optimizer front stays about the
order of a step; it reads the optimizer's device side and runtime, nothing else.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._runtime import Runtime, host_view
from .clipping import check_max_norm
from .device import DeviceGroups, Group
from .stepping import Stepper


class DeviceAccess:
    """Device buffers, layout and clipping of an optimizer (see :class:`vk_adam.Optimizer`)."""

    _dev: DeviceGroups
    _rt: Runtime
    _groups: list[Group]
    #: The step paths; told when the application takes a gradient buffer to write it (``step()``
    #: may then go without grads).
    _steps: Stepper

    def _check_open(self) -> None:
        raise NotImplementedError

    def _drain(self) -> None:
        raise NotImplementedError

    @property
    def clip_grad_norm(self) -> float | None:
        """The max norm gradients are clipped to (None: no clipping). May change between steps."""
        return self._dev.max_norm if self._dev.clipper is not None else None

    @clip_grad_norm.setter
    def clip_grad_norm(self, value: float) -> None:
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

    def _set_grad_scale(self, scale: float | None) -> None:
        """Multiply the gradients of the next synchronous steps by ``scale`` (the harness's
        gradient scale, as clipping's factor), a value the caller computed: ZeRO-1 clips by the
        norm over every rank's shard. None: back to 1.0. Not with this optimizer's own clipping."""
        if self._dev.clipper is not None:
            raise ValueError("this optimizer clips on the device (clip_grad_norm); it takes no scale")
        if self._dev.clock is not None:
            raise ValueError("a capturable optimizer takes no gradient scale from the host")
        self._dev.grad_scale = None if scale is None else float(np.float32(scale))

    def last_grad_norm(self) -> float:
        """The global gradient norm of the last step (before clipping), read from the device.

        Waits for the steps in flight; only this call synchronizes."""
        self._check_open()
        if self._dev.clipper is None:
            raise ValueError("last_grad_norm() needs an optimizer created with clip_grad_norm=...")
        self._drain()
        self._rt.run([self._rt.download_op([self._dev.status])])
        return float(host_view(self._dev.status).view(np.float32)[2])

    def param_buffer(self, group: int = 0, index: int = 0) -> Any:
        """The kp tensor holding a buffer set's params (the flat buffer for NumPy groups, kept
        current from the moment it is taken)."""
        self._check_open()
        if self._groups[group].host_mode:
            self._drain()
            self._dev.traffic.keep_flat_params(self._groups)
        return self._groups[group].sets[index].param

    def reload_params(self) -> None:
        """Read the NumPy params into the device's copy at the next step (with
        ``device_params=True``, after writing into the arrays between steps: the device holds
        the params, so such writes are otherwise overwritten by the next step's copy)."""
        self._check_open()
        self._drain()  # steps in flight copy into the arrays when they finish: let them
        self._dev.traffic.reload = True

    def grad_buffer(self, group: int = 0, index: int = 0) -> Any:
        """The kp tensor that ``step()`` (without grads) reads gradients from.

        Write gradients into it on the device (your own shaders), then call ``step()``.
        For NumPy groups it is the group's flat gradient buffer (see :meth:`param_offsets`).
        """
        self._check_open()
        buffer = self._groups[group].sets[index].grad
        self._steps.grad_buffer_taken = True
        return buffer

    def state_buffer(self, name: str, group: int = 0, index: int = 0) -> Any:
        """The kp tensor holding state ``name`` (e.g. ``"exp_avg"``; the rule's
        ``state_names``) of a buffer set, in its storage format (docs/formats.md)."""
        self._check_open()
        state = self._groups[group].sets[index].state
        if name not in state:
            raise KeyError(f"no state {name!r}; this optimizer's rule keeps {sorted(state)}")
        return state[name]

    def param_offsets(self, group: int = 0) -> list[tuple[int, tuple[int, ...]]]:
        """(offset, shape) of each param of a NumPy group inside its flat buffers.

        A group larger than one device allocation has several buffer sets (``index`` of
        :meth:`grad_buffer`); each offset is then within its param's set, and a param larger
        than one set is cut into pieces, one per set, the offset being its first piece's."""
        return [(s.offset, s.shape) for s in self._groups[group].slots]

    def memory_bytes(self) -> dict[str, int]:
        """Device memory this optimizer's buffers hold, in bytes, by kind: ``param`` (the
        params as stored: 4 or 2 bytes each, plus alignment padding), ``grad``, ``master``
        (fp32 copies of 16-bit params), ``state``, ``absmax`` (8-bit state's block scales),
        ``other`` (status, quantization tables, clipping's partial sums), and ``total``.
        Divide by the number of params for resident bytes per param."""
        self._check_open()
        dev = self._dev
        kinds = dict.fromkeys(("param", "grad", "master", "state", "absmax", "other"), 0)
        for group in self._groups:
            for b in group.sets:
                kinds["param"] += self._rt.buffer_bytes(b.param)
                kinds["grad"] += self._rt.buffer_bytes(b.grad)
                kinds["master"] += self._rt.buffer_bytes(b.master) if b.master is not None else 0
                kinds["state"] += sum(self._rt.buffer_bytes(t) for t in b.state.values())
                kinds["absmax"] += sum(self._rt.buffer_bytes(t) for t in b.absmax.values())
        other = [dev.status, dev.unused, dev.qtable]
        if dev.clipper is not None:
            other.append(dev.clipper.partials)
        kinds["other"] = sum(self._rt.buffer_bytes(t) for t in other)
        kinds["total"] = sum(kinds.values())
        return kinds

    def dispatches_per_step(self) -> int:
        """How many update dispatches one step records (one per buffer set)."""
        return self._dev.dispatches_per_step()
