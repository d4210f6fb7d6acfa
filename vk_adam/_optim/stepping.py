"""How a step runs, behind ``Optimizer.step`` and ``record_step``: one preamble of checks for
the three paths (synchronous, asynchronous, recorded), the ops of a step, and the step counts.

:class:`Stepper` is an object the optimizer owns: the front keeps the public calls and their
documentation, this keeps their order of work, top-down (checks, ops from ``device``, the
runtime runs, submits or records them, the counts advance).
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._errors import LostUpdateWarning, warn_at_caller
from .._rules import UpdateRule
from .._runtime import Runtime, device_of, element_count, host_view, refuse_unwritten, uploads_of
from .captured import CapturedSteps
from .device import DeviceGroups, Group
from .groups import (
    check_recordable,
    prepare_grads,
    refuse_foreign,
    refuse_host_grads,
    refuse_resized,
    revalidate,
)
from .inflight import InFlight, StepHandle

#: At most this many asynchronous steps in flight; the next one waits for the oldest.
MAX_STEPS_IN_FLIGHT = 8


class Stepper:
    """The step paths of one optimizer (see :class:`vk_adam.Optimizer`): its device groups
    ``dev`` on runtime ``rt``, steps in flight ``in_flight``; ``profile`` and
    ``grad_buffer_taken`` are set by the optimizer, ``last_gpu_seconds`` and
    ``last_host_seconds`` read by it."""

    def __init__(
        self,
        rt: Runtime,
        dev: DeviceGroups,
        rule: UpdateRule,
        in_flight: InFlight,
        *,
        zeroes_grad: bool,
        skip_nonfinite: bool,
        profile: bool,
        captured: CapturedSteps | None = None,
    ) -> None:
        self._rt, self._dev, self.rule, self._in_flight = rt, dev, rule, in_flight
        #: capturable=True: the step clock's host side (the count and lrs live on the device).
        self.captured = captured
        #: A step copied NumPy gradients into the optimizer's own gradient buffers (so a
        #: recorded step without grads reads something that was given).
        self.own_grads_given = False
        self._groups: list[Group] = dev.groups
        self.zeroes_grad, self.skip_nonfinite, self.profile = zeroes_grad, skip_nonfinite, profile
        #: The application took ``grad_buffer()`` to write gradients there itself.
        self.grad_buffer_taken = False
        self.last_gpu_seconds: float | None = None
        self.last_host_seconds: float | None = None
        self._device = device_of(rt.manager)  # the VkDevice every buffer of a step must be on
        # Each device param's evaluated uploads as of the last step ((group, param) -> count), and
        # the params already warned about: an upload between two steps discards the first's update.
        self._uploads: dict[tuple[int, int], int] = {}
        self._warned: set[tuple[int, int]] = set()
        # What does not change from one step to the next, kept so that steps recorded back to
        # back pay for it once: the device params (a group's buffer sets are fixed once made),
        # those seen written (device memory, once written, stays so), the upload counts the
        # checks read (recording evaluates nothing, so they hold after it), and the sequence
        # record_step last recorded into (its type and device checked; weak references here
        # and below: the application owns them).
        self._params = self._device_params()
        self._written: set[tuple[int, int]] = set()
        self._counts: list[tuple[tuple[int, int], int | None]] = []
        self._sequence: weakref.ref[Any] | None = None
        # and the kp tensor gradients of the last step, checked, and their prepared form
        self._grads_seen: list[weakref.ref[Any]] | None = None
        self._grads_prepared: list[list[Any]] | None = None

    def _drain(self) -> None:
        self._in_flight.drain()

    def step(self, grads: Sequence[Any] | None, *, wait: bool, started: float) -> StepHandle:
        """``Optimizer.step``: checked, then run and waited for (``wait``) or submitted."""
        prepared = self._begin(grads, wait=wait)
        if wait:
            return self._step_sync(prepared, started)
        return self._step_async(prepared)

    def record(self, sequence: Any, grads: Sequence[Any] | None) -> int:
        """``Optimizer.record_step``: checked, then recorded into ``sequence``; the step number."""
        prepared = self._begin(grads, recording=True, sequence=sequence)
        ops, _, _ = self._ops(prepared, recording=True)
        if self.captured is not None:
            # Captured: the step reads its number and lr from the device's clock when it runs,
            # and advances the clock itself, so the sequence may be evaluated any number of times.
            self._rt.record(sequence, ops)
            self.captured.recorded = self.captured.stale = True
            self._note_uploads(self._counts)
            self._remember_sequence(sequence)
            return 0
        step = self._groups[0].step + 1
        # The step's push constants (step size, bias corrections) are the host's for step
        # ``step``: evaluating the sequence again would apply them again. Refused on replay.
        once = self._rt.eval_once_op(
            f"this sequence holds step {step} of a vk-adam optimizer, recorded by record_step(); "
            "a recorded step applies once (its step count and bias corrections are fixed when it "
            "is recorded). Record a new step for each evaluation: sequence.clear(), then record "
            "your work and opt.record_step(sequence) again (docs/usage.md)"
        )
        self._rt.record(sequence, [once, *ops] if once is not None else ops)
        self._advance()
        self._note_uploads(self._counts)  # as read by the checks: nothing was evaluated since
        self._remember_sequence(sequence)
        return step

    def _remember_sequence(self, sequence: Any) -> None:
        """Keep ``sequence`` (checked, recorded into) so that the next ``record_step`` into it
        skips the checks of its type and device, which cannot change."""
        if self._sequence is None or self._sequence() is not sequence:
            try:
                self._sequence = weakref.ref(sequence)
            except TypeError:  # a type without weak references: checked every time
                self._sequence = None

    def _begin(
        self, grads: Sequence[Any] | None, *, wait: bool = True, recording: bool = False, sequence: Any = None
    ) -> Any:
        """The preamble of every step path (``recording``: ``record_step`` into ``sequence``):
        every check, in one order, before anything is written; returns the prepared gradients."""
        where = "record_step()" if recording else "step()"
        # the sequence of the last record_step passed the checks of a sequence already
        known = recording and self._sequence is not None and self._sequence() is sequence
        if recording and not known:
            check_recordable(self._groups, self.skip_nonfinite and self.captured is None, sequence)
        self._refuse_unwritten_params()
        refuse_resized(self._groups)
        prepared = self._known_grads(grads)
        if prepared is None:
            prepared = prepare_grads(grads, self._groups, where)
            refuse_foreign(
                self._device, self._groups, prepared, sequence if recording and not known else None
            )
        elif recording and not known:
            refuse_foreign(self._device, self._groups, None, sequence)
        self._warn_lost_updates()
        if recording:
            refuse_host_grads(prepared)
            if prepared is None:
                self._refuse_ungiven_grads()
        elif prepared is None:
            self._refuse_unwritten_grads(where)
        elif not self.own_grads_given:
            self.own_grads_given = any(
                isinstance(g, np.ndarray)
                for group, gs in zip(self._groups, prepared, strict=True)
                if not group.host_mode
                for g in gs
            )
        if not wait and self.skip_nonfinite:
            raise ValueError(
                "skip_nonfinite steps are synchronous (the host must learn whether the step was "
                "skipped before the next step's bias correction); use wait=True"
            )
        revalidate(self.rule, self._groups, self.zeroes_grad)
        if not wait and self._dev.grad_scale is not None:
            raise ValueError("a gradient scale set by the host applies to synchronous steps: use wait=True")
        self._remember_grads(grads, prepared)
        return prepared

    def _known_grads(self, grads: Sequence[Any] | None) -> list[list[Any]] | None:
        """The last step's prepared gradients when ``grads`` holds the same kp tensors, each
        still holding its buffer (a kp tensor's kind, size and device do not change, nor does
        written memory become unwritten: the checks they passed hold); else None."""
        seen = self._grads_seen
        if seen is None or not isinstance(grads, (list, tuple)) or len(grads) != len(seen):
            return None
        for ref, g in zip(seen, grads, strict=True):
            if ref() is not g or element_count(g) == 0:  # 0: destroyed since
                return None
        return self._grads_prepared

    def _remember_grads(self, grads: Sequence[Any] | None, prepared: list[list[Any]] | None) -> None:
        """Keep gradients that are all kp tensors, checked, for :meth:`_known_grads`."""
        if prepared is self._grads_prepared and prepared is not None:
            return
        self._grads_seen, self._grads_prepared = None, None
        if prepared is None or not isinstance(grads, (list, tuple)):
            return
        if any(isinstance(g, np.ndarray) for gs in prepared for g in gs):
            return  # NumPy gradients: checked every step (their values and shapes are the caller's)
        try:
            self._grads_seen = [weakref.ref(g) for g in grads]
        except TypeError:  # a type without weak references: checked every time
            return
        self._grads_prepared = prepared

    def _device_params(self) -> list[tuple[tuple[int, int], Any]]:
        return [
            ((gi, pi), bset.param)
            for gi, group in enumerate(self._groups)
            if not group.host_mode
            for pi, bset in enumerate(group.sets)
        ]

    def _refuse_unwritten_params(self) -> None:
        """Refuse a device param whose memory was never written (each is asked until it was)."""
        if len(self._written) == len(self._params):
            return
        for (gi, pi), param in self._params:
            if (gi, pi) not in self._written:
                refuse_unwritten(param, f"param {pi} of group {gi}")
                self._written.add((gi, pi))

    def _note_uploads(self, counts: list[tuple[tuple[int, int], int | None]] | None = None) -> None:
        """After a step: each device param's upload count (``counts``, or read now), to compare
        at the next step."""
        if counts is None:
            counts = [(key, uploads_of(param)) for key, param in self._params]
        for key, count in counts:
            if count is not None:
                self._uploads[key] = count

    def _warn_lost_updates(self) -> None:
        """Warn once per param the application uploaded from the host since the last step: the
        upload copied the host's stale values over the device memory, and the update is lost.
        The counts read are kept in ``_counts``."""
        self._counts = [(key, uploads_of(param)) for key, param in self._params]
        for (gi, pi), count in self._counts:
            before = self._uploads.get((gi, pi))
            if count is None or before is None or count == before or (gi, pi) in self._warned:
                continue
            self._warned.add((gi, pi))
            where = f" of param group {gi}" if len(self._groups) > 1 else ""
            warn_at_caller(
                f"param {pi}{where} (a kp tensor) was uploaded from its host copy "
                f"(OpTensorSyncDevice) {count - before} time(s) since step {self._groups[gi].step}: "
                "each upload overwrote the device memory the optimizer updated, so that update is "
                "lost. Upload a param once, before the first step, and read it back with "
                "OpTensorSyncLocal (docs/usage.md, 'A Kompute-style training loop')",
                LostUpdateWarning,
            )

    def _refuse_ungiven_grads(self) -> None:
        """``record_step(seq)`` without grads reads the optimizer's own gradient buffers: refuse
        it when nothing was ever given to them (``grad_buffer()`` never taken, no gradients
        copied in), or each recorded step would silently apply zero gradients."""
        if self.grad_buffer_taken or self.own_grads_given:
            return
        raise ValueError(
            "record_step(sequence) without grads steps on the optimizer's own gradient buffer, but "
            "nothing was ever given to it: the recorded steps would read zeros, not your gradients. "
            "Pass the kp tensors that hold your gradients, opt.record_step(sequence, [grads]), or "
            "write the gradients into opt.grad_buffer(...) on the device (your own shaders) and "
            "record that work before the step"
        )

    def _refuse_unwritten_grads(self, where: str) -> None:
        """``step()`` without gradients on NumPy params reads a device buffer nobody wrote (zeros:
        weight decay and momentum would still move the params), unless the application took
        ``grad_buffer()`` to write it or an earlier step left its gradients (``zero_grad=False``)."""
        host = [gi for gi, g in enumerate(self._groups) if g.host_mode]
        kept = not self.zeroes_grad and self._groups[0].step > 0
        if host and not self.grad_buffer_taken and not kept:
            raise ValueError(
                f"{where} without grads on NumPy params (param group {host[0]}): pass the gradients, "
                f"{where[:-2]}(grads), or write them into opt.grad_buffer({host[0]}) on the device first"
            )

    def _ops(
        self, prepared: list[list[Any]] | None, *, recording: bool = False, status: bool = False
    ) -> tuple[list[Any], int, int]:
        """The ops of one step (and the indices of its first and last update op): this step's
        push constants, its inputs staged (uploads, copies, or bound device grads). ``status``:
        a synchronous step (the host sets the status; NumPy arrays may be copied in place)."""
        pushes = self._dev.pushes()
        upload = self._dev.stage_inputs(prepared, recording=recording, direct=status)
        if status:
            upload += self._dev.stage_status()
        return self._dev.step_ops([] if recording else upload, pushes)

    def _advance(self) -> None:
        for group in self._groups:
            group.step += 1

    def _step_sync(self, prepared: list[list[Any]] | None, started: float) -> StepHandle:
        self._drain()
        before = self.captured.steps() if self.captured is not None else self._groups[0].step
        ops, first, last = self._ops(prepared, status=True)
        if self.captured is not None:  # the device's count after the step
            ops.append(self._dev.status_download)
        eval_start = time.perf_counter()
        ticks = self._rt.run(ops, timestamps=self.profile)
        eval_seconds = time.perf_counter() - eval_start
        if ticks is not None:
            # One timestamp before the first op and one after each op.
            self.last_gpu_seconds = (ticks[last] - ticks[first]) * self._rt.facts.timestamp_period * 1e-9
        handle = StepHandle(self._in_flight, before + 1)
        handle.done = True
        if self.captured is not None:  # the device counted the step unless it skipped it
            after = self.captured.clock.steps_in(host_view(self._dev.status))
            handle.skipped = after == before
            self.captured.set_steps(after)
            if not handle.skipped:
                self._dev.traffic.finish()
        else:
            handle.skipped = self.skip_nonfinite and int(host_view(self._dev.status)[0]) != 0
        if not handle.skipped and self.captured is None:
            self._advance()
            self._dev.traffic.finish()
        self._note_uploads()
        if self.profile:
            self.last_host_seconds = time.perf_counter() - started - eval_seconds
        return handle

    def _step_async(self, prepared: list[list[Any]] | None) -> StepHandle:
        self._in_flight.throttle(MAX_STEPS_IN_FLIGHT)
        writes_staging = any(g.host_mode for g in self._groups) or (
            prepared is not None and any(isinstance(g, np.ndarray) for gs in prepared for g in gs)
        )
        if writes_staging and self._in_flight:
            # A submitted step's upload may not have read the staging memory yet: rewriting it
            # now would change that step's inputs (each buffer has one staging copy).
            self._drain()
        if self.captured is not None:
            self.captured.steps()  # the device's count, if a recording may have run since
        handle = StepHandle(self._in_flight, self._groups[0].step + 1)
        ops, _, _ = self._ops(prepared)
        handle._pending = self._rt.submit(ops)  # one submission (patched kp)
        self._advance()
        self._note_uploads()
        handle._finalize.extend(g for g in self._groups if g.host_mode)
        self._in_flight.add(handle)
        return handle
