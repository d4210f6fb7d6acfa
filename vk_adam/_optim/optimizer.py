"""The optimizer front: what a user calls (torch.optim's shape), and the order of a step.

``Optimizer`` checks arguments (``groups``), keeps the step counts and the steps in flight, and
asks its device side (``device.DeviceGroups``) for the ops of each step, which the runtime runs,
submits or records. Buffer layout lives in ``layout``, state dicts in ``state_dict``; nothing
here calls kp.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._errors import DeviceCapabilityError
from .._lifetime import Closable
from .._rules import UpdateRule, check_rule_object, default_registry
from .._runtime import Runtime
from .access import DeviceBuffers, WrapperAccess
from .captured import CapturedSteps, refuse_uncapturable
from .clipping import check_max_norm
from .device import MAX_PIPELINES_PER_SET, DeviceGroups, Group
from .groups import (
    check_options,
    check_storage,
    group_options,
)
from .host.to_host import copy_back
from .inflight import InFlight, StepHandle
from .layout import ALIGN_ELEMENTS
from .options import spell_out_options, split_options
from .state_dict import read_state_dict, write_state_dict
from .stepping import MAX_STEPS_IN_FLIGHT, Stepper
from .storage import Storage, Window


class Optimizer(Closable):
    """An update rule from the registry, run on a Vulkan device through kp.

    ``params``: NumPy arrays of float32, float16 or bfloat16 (``ml_dtypes.bfloat16``; updated
    in place, gradients in the same dtype), float32 kp tensors on ``manager``, or param groups
    (dicts with ``"params"`` and per-group hyperparameters), as in torch.optim.
    ``rule``: a registered rule name or an :class:`UpdateRule`. Hyperparameters not given fall
    back to the rule's defaults.

    Keyword options:
      * ``device``: index or name substring (default ``$VK_ADAM_DEVICE``, else the first hardware
        GPU, else lavapipe). Ignored when ``manager`` is given.
      * ``manager``: an existing ``kp.Manager``, or a :class:`vk_adam.DeviceHandle`
        (``vk_adam.open_device()``); required when params are kp tensors.
      * ``zero_grad``: zero the device gradient buffer in the same pass (default True).
      * ``skip_nonfinite``: when any gradient holds NaN/Inf, skip the whole step on the GPU and
        leave params, state and step count untouched (default False: torch's behaviour, the
        NaN propagates).
      * ``clip_grad_norm``: clip the gradients of all params by their global L2 norm to at most
        this value, on the device, before every step (``torch.nn.utils.clip_grad_norm_``);
        :meth:`last_grad_norm` reads the norm. Default None (off).
      * ``state_dtype`` (``"float32"``, ``"bfloat16"``, ``"int8-blockwise"``),
        ``stochastic_rounding`` (16-bit params without an fp32 master copy), ``seed`` (of the
        rounding stream): storage formats, see docs/formats.md.
      * ``profile``: time synchronous steps (``last_gpu_seconds``, ``last_host_seconds``); settable.
      * ``exportable``: make the param, grad and state buffers shareable with other devices and
        processes (:func:`vk_adam.interop.export_memory`; docs/interop.md). Default False.
      * ``device_params``: the device holds the params of NumPy groups, and each step copies the
        updated values into the arrays (a gradient goes up, a param comes down, as with torch's
        params on a GPU). The arrays are then copies: a change written into one between steps
        is not read unless :meth:`reload_params` is called. Default False: the NumPy array is the
        one true copy, read and written every step.
      * ``capturable``: keep the step count and each group's lr on the device (torch's name), so
        a sequence holding :meth:`record_step` may be evaluated any number of times, each
        evaluation one step (docs/usage.md). A new ``param_groups[i]["lr"]`` reaches the device
        when it is set; the other hyperparameters are frozen once a step is recorded. Needs
        params on the device (kp tensors) and a rule that declares it. Default False.
    """

    @spell_out_options()
    def __init__(
        self,
        params: Iterable[Any],
        rule: str | UpdateRule,
        *,
        _windows: Sequence[Window] = (),
        **hyper: Any,
    ) -> None:
        self._closed = True  # until fully built: close() must be safe on a half-built object
        options, hyper = split_options(hyper)
        self.rule = default_registry().get(rule) if isinstance(rule, str) else rule
        # A rule object passed directly gets the checks registration runs (a shader that binds
        # more state buffers than the rule declares would crash the driver).
        check_rule_object(self.rule)
        device, manager, profile = options["device"], options["manager"], options["profile"]
        zero_grad, skip_nonfinite = options["zero_grad"], options["skip_nonfinite"]
        exportable = options["exportable"]
        device_params, capturable = options["device_params"], options["capturable"]
        if not isinstance(device_params, bool):
            raise TypeError(f"device_params must be True or False (got {device_params!r})")
        if not isinstance(capturable, bool):
            raise TypeError(f"capturable must be True or False (got {capturable!r})")
        manager = check_options(
            device,
            manager,
            zero_grad=zero_grad,
            skip_nonfinite=skip_nonfinite,
            profile=profile,
            exportable=exportable,
        )
        #: Whether each step zeroes the device gradient buffer in the same pass.
        self.zeroes_grad, self.skip_nonfinite = bool(zero_grad), bool(skip_nonfinite)
        max_norm = check_max_norm(options["clip_grad_norm"])
        self.defaults, groups = group_options(self.rule, params, hyper, has_manager=manager is not None)
        state_dtype, stochastic_rounding, seed = (
            options["state_dtype"],
            options["stochastic_rounding"],
            options["seed"],
        )
        check_storage(state_dtype, stochastic_rounding, seed, groups)
        if capturable:
            refuse_uncapturable(self.rule, groups)
        #: Whether the step count and lrs live on the device (``capturable=True``).
        self.capturable = capturable
        self._rt = Runtime(manager=manager, device=device)
        self.device = self._rt.facts.info
        self._closed = False
        if exportable and "fd export" not in self.device.external_memory:
            self.close()
            raise DeviceCapabilityError(
                f"exportable=True: {self.device.name} cannot export buffer memory as opaque fds "
                "(VK_KHR_external_memory_fd, and vk-adam's kp build); leave exportable off and "
                "share through host memory (NumPy params) instead"
            )
        if profile and not self.device.timestamps_supported:
            self.close()
            raise DeviceCapabilityError(
                f"profile=True times steps with timestamp queries, and {self.device.name} has none "
                "(timestampComputeAndGraphics); leave profile off"
            )
        self._in_flight = InFlight(copy_back)
        try:
            self._dev = DeviceGroups(
                self._rt,
                self.rule,
                groups,
                self.zeroes_grad,
                self.skip_nonfinite,
                clip=max_norm is not None,
                drain=self._in_flight.drain,  # not self._drain: no reference cycle (CHANGELOG)
                storage=Storage(
                    state_dtype, bool(stochastic_rounding), int(seed), tuple(_windows), bool(exportable)
                ),
                capturable=capturable,
            )
            self._dev.max_norm = max_norm or 0.0
            if exportable:  # an exported flat param buffer stays current
                self._dev.to_device.stop_direct()
            if device_params:
                self._dev.hold_params()
        except BaseException:
            self.close()
            raise
        self._groups: list[Group] = self._dev.groups
        self._captured = CapturedSteps(self._dev, self.rule, self._in_flight.drain) if capturable else None
        self.param_groups: list[dict[str, Any]] = [g.options for g in self._groups]
        self._steps = Stepper(
            self._rt,
            self._dev,
            self.rule,
            self._in_flight,
            zeroes_grad=self.zeroes_grad,
            skip_nonfinite=self.skip_nonfinite,
            profile=bool(profile),
            captured=self._captured,
        )
        # what applications that keep buffers on the GPU read (methods below), and what code
        # that wraps an optimizer reads (internals()): objects held, given no reference to self
        self._buffers = DeviceBuffers(self._dev, self._rt, self._steps, self._in_flight.drain)
        self._internals = WrapperAccess(self._dev, self._rt)

    # -- profiling -----------------------------------------------------------------------

    @property
    def profile(self) -> bool:
        """Whether synchronous steps are timed (``last_gpu_seconds``, ``last_host_seconds``); settable."""
        return self._steps.profile

    @profile.setter
    def profile(self, value: bool) -> None:
        check_options(None, None, profile=value)
        if value and not self.device.timestamps_supported:
            raise DeviceCapabilityError(
                f"profile=True times steps with timestamp queries, and {self.device.name} has none "
                "(timestampComputeAndGraphics)"
            )
        self._steps.profile = bool(value)

    @property
    def last_gpu_seconds(self) -> float | None:
        """With ``profile=True``: GPU time of the last synchronous step's update dispatches (and
        clipping's passes; Vulkan timestamps)."""
        return self._steps.last_gpu_seconds

    @property
    def last_host_seconds(self) -> float | None:
        """With ``profile=True``: the last synchronous step's host time outside submit-and-wait."""
        return self._steps.last_host_seconds

    # -- stepping ------------------------------------------------------------------------

    def step(self, grads: Sequence[Any] | None = None, *, wait: bool = True) -> StepHandle:
        """Apply one update to every param.

        ``grads``: one per param in param order; NumPy arrays (uploaded) or kp tensors already
        on the device (bound directly, no host copy). ``None`` uses the gradients already in
        the optimizer's device gradient buffers (:meth:`grad_buffer`), e.g. written there by
        the application's own shaders; for NumPy params that needs :meth:`grad_buffer` taken
        (or, with ``zero_grad=False``, an earlier step's gradients), else it is a ValueError.
        A wrong count, shape or size raises ValueError and changes nothing.

        ``wait=False`` returns as soon as the work is submitted; the returned handle's
        ``wait()`` finishes it. Later steps are ordered after earlier ones on the GPU.
        """
        started = time.perf_counter()
        wait is True or wait is False or check_options(None, None, wait=wait)
        if self._closed:  # tested here, not by a call: the hot path
            self._refuse_closed()
        return self._steps.step(grads, wait=wait, started=started)

    def record_step(self, sequence: Any, grads: Sequence[Any] | None = None) -> int:
        """Record a step into ``sequence`` (the application's own kp.Sequence) without
        submitting it. For params on the device (kp tensors).

        This is the GPU-resident path of a Vulkan application: record forward, backward and
        this step into one sequence and submit it; several steps can be recorded back to back.
        Each recorded step is bracketed by memory barriers over its buffers: it runs after
        everything recorded or submitted before it (e.g. the application's gradient shaders)
        and the application's next shader sees its writes. Gradients are kp tensors
        (``grads``, one per param: the app's own) or, with ``grads=None``, the optimizer's
        gradient buffer, which the application must write (take it with :meth:`grad_buffer`);
        a gradient buffer nothing was ever given is refused. At most ``MAX_PIPELINES_PER_SET``
        distinct gradient buffers per param buffer can be recorded (their pipelines live as
        long as the optimizer). NumPy params and gradients are refused.

        With ``capturable=True`` the step count, bias corrections and lr come from the device
        when the step runs: evaluate the sequence any number of times, each evaluation one step
        (the Kompute idiom: record once, evaluate in a loop); ``skip_nonfinite`` works there.
        Returns 0 (a captured step's number is decided each time it runs; ``state_dict()``
        reports the device's count). Without it, the step's values are push constants fixed now:
        returns the step number recorded, and a second evaluation of the sequence is refused.
        """
        if self._closed:
            self._refuse_closed()
        return self._steps.record(sequence, grads)

    def schedule_on_device(self, scheduler: Any) -> None:
        """``capturable=True``: run ``scheduler`` (a :mod:`vk_adam.schedules` ``Constant``,
        ``LinearWarmup``, ``LinearDecay`` or ``CosineDecay`` made on this optimizer) on the
        device. Each step then computes its lr from the device's step count when it runs, so
        steps recorded back to back, and every evaluation of a recording, take the schedule's
        lr with no host work. It continues where the scheduler stands (its next lr is the next
        step's). Until it is handed back, an lr set in ``param_groups`` is refused and
        ``scheduler.step()`` must not be called. ``None`` hands the lrs back: the scheduler
        moves to the next step's place and sets its lrs (host stepping goes on from there).
        """
        self._check_open()
        if self._captured is None:
            raise ValueError(
                "schedule_on_device needs a step clock on the device: make the optimizer with "
                "capturable=True (without it, step the scheduler on the host: its lr is a push "
                "constant of each step)"
            )
        self._captured.schedule_on_device(scheduler)

    def _drain(self) -> None:
        if hasattr(self, "_in_flight"):
            self._in_flight.drain()

    def zero_grad(self) -> None:
        """Zero the device gradient buffers the next ``step()`` reads (torch's name; steps
        already do this in their own pass unless the optimizer was made with ``zero_grad=False``)."""
        self._check_open()
        self._drain()
        self._dev.zero_grads()

    def synchronize(self) -> None:
        """Wait for every asynchronous step issued so far."""
        self._check_open()
        self._drain()

    # -- device buffers, layout and clipping (``access.DeviceBuffers`` does the work) -------------

    @property
    def clip_grad_norm(self) -> float | None:
        """The max norm gradients are clipped to (None: no clipping). May change between steps."""
        return self._buffers.clip_grad_norm

    @clip_grad_norm.setter
    def clip_grad_norm(self, value: float) -> None:
        self._buffers.set_clip_grad_norm(value)

    def internals(self) -> WrapperAccess:
        """The interface for code that wraps this optimizer (:class:`WrapperAccess`): its
        groups' buffer sets and storage, the gradient scale and status buffer a ZeRO-1 shard
        sets, the runtime and a step's ops for benchmarks. Advanced: applications need none of
        it, and it may change between releases. It does not check that the optimizer is open
        (its buffers are freed once it is closed)."""
        return self._internals

    def last_grad_norm(self) -> float:
        """The global gradient norm of the last step (before clipping), read from the device.

        Waits for the steps in flight; only this call synchronizes."""
        self._check_open()
        return self._buffers.last_grad_norm()

    def param_buffer(self, group: int = 0, index: int = 0) -> Any:
        """The kp tensor holding a buffer set's params (the flat buffer for NumPy groups, kept
        current from the moment it is taken)."""
        self._check_open()
        return self._buffers.param_buffer(group, index)

    def reload_params(self) -> None:
        """Read the NumPy params into the device's copy at the next step (with
        ``device_params=True``, after writing into the arrays between steps: the device holds
        the params, so such writes are otherwise overwritten by the next step's copy)."""
        self._check_open()
        self._buffers.reload_params()

    def grad_buffer(self, group: int = 0, index: int = 0) -> Any:
        """The kp tensor that ``step()`` (without grads) reads gradients from.

        Write gradients into it on the device (your own shaders), then call ``step()``.
        For NumPy groups it is the group's flat gradient buffer (see :meth:`param_offsets`).
        """
        self._check_open()
        return self._buffers.grad_buffer(group, index)

    def state_buffer(self, name: str, group: int = 0, index: int = 0) -> Any:
        """The kp tensor holding state ``name`` (e.g. ``"exp_avg"``; the rule's
        ``state_names``) of a buffer set, in its storage format (docs/formats.md)."""
        self._check_open()
        return self._buffers.state_buffer(name, group, index)

    def param_offsets(self, group: int = 0) -> list[tuple[int, tuple[int, ...]]]:
        """(offset, shape) of each param of a NumPy group inside its flat buffers.

        A group larger than one device allocation has several buffer sets (``index`` of
        :meth:`grad_buffer`); each offset is then within its param's set, and a param larger
        than one set is cut into pieces, one per set, the offset being its first piece's."""
        return self._buffers.param_offsets(group)

    def memory_bytes(self) -> dict[str, int]:
        """Device memory this optimizer's buffers hold, in bytes, by kind: ``param`` (the
        params as stored: 4 or 2 bytes each, plus alignment padding), ``grad``, ``master``
        (fp32 copies of 16-bit params), ``state``, ``absmax`` (8-bit state's block scales),
        ``other`` (status, quantization tables, clipping's partial sums), and ``total``.
        Divide by the number of params for resident bytes per param."""
        self._check_open()
        return self._buffers.memory_bytes()

    def dispatches_per_step(self) -> int:
        """How many update dispatches one step records (one per buffer set)."""
        return self._dev.dispatches_per_step()

    # -- state dict ------------------------------------------------------------------------

    def state_dict(self, *, float32: bool = False) -> dict[str, Any]:
        """torch.optim's layout: ``{'state': {i: {'step', <state buffers>}}, 'param_groups'}``.

        State arrays are shaped like their params, as stored (float32, bfloat16, or uint8
        codes plus ``'<name>.absmax'``; ``'master_param'`` for 16-bit params with a master
        copy) and load back bit for bit. ``float32=True``: float32 state only, torch.optim's
        layout. Params not stepped yet have no entry (as in torch).
        """
        self._check_open()
        self._drain()
        if self._captured is not None:  # the device's count (recordings may have run) and lrs
            self._captured.read()
            self._captured.refresh_lrs()
        return read_state_dict(self._dev, float32=float32)

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Load a :meth:`state_dict` (or torch.optim's, as NumPy), stored in this optimizer's
        formats. Checked fully before any change: on error nothing is modified."""
        self._check_open()
        if self._captured is None:
            write_state_dict(self._dev, state_dict, self._drain)
            return
        self._captured.check_loadable(state_dict)
        with self._captured.paused():
            write_state_dict(self._dev, state_dict, self._drain, one_count=True)
        self._captured.after_load(g.step for g in self._groups)

    # -- lifetime ----------------------------------------------------------------------------

    def close(self) -> None:
        """Wait for in-flight work and free every Vulkan object this optimizer created."""
        runtime = getattr(self, "_rt", None)
        if runtime is None or runtime.closed:
            self._closed = True
            return
        try:
            self._drain()
        except Exception:  # closing must not raise on a broken device
            pass
        for group in getattr(self, "_groups", []):
            group.param_staging.clear()
            group.grad_staging.clear()
        if hasattr(self, "_dev"):
            self._dev.to_device.close()  # host-memory imports, before their device goes
            self._dev.status_words = self._dev.status_words[:0]  # no view of freed memory
        runtime.close()
        self._closed = True

    def __repr__(self) -> str:
        groups = (
            ", ".join(
                f"{{n_params={len(g.slots)}, lr={g.options['lr']}, step={g.step}}}" for g in self._groups
            )
            if hasattr(self, "_groups")
            else "?"
        )
        return (
            f"{type(self).__name__}(rule={self.rule.name!r}, device={self.device.name!r}, groups=[{groups}])"
        )


__all__ = ["ALIGN_ELEMENTS", "MAX_PIPELINES_PER_SET", "MAX_STEPS_IN_FLIGHT", "Optimizer", "StepHandle"]
