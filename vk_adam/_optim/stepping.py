"""How a step runs, behind ``Optimizer.step`` and ``record_step``: one preamble of checks for
the three paths (synchronous, asynchronous, recorded), the ops of a step, and the step counts.

:class:`Stepper` is an object the optimizer owns: the front keeps the public calls and their
documentation, this keeps their order of work, top-down, each part asked once: the checks
(``groups.StepChecks``), the ops (``device``), the runtime runs, submits or records them, the
counts advance, the NumPy params come back (``host.to_host``).
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._rules import UpdateRule
from .._runtime import Runtime, device_of
from .captured import CapturedSteps
from .device import DeviceGroups, Group
from .groups import ParamKey, StepChecks
from .inflight import InFlight, StepHandle

#: At most this many asynchronous steps in flight; the next one waits for the oldest.
MAX_STEPS_IN_FLIGHT = 8


class Stepper:
    """The step paths of one optimizer (see :class:`vk_adam.Optimizer`): its device groups
    ``dev`` on runtime ``rt``, steps in flight ``in_flight``; ``profile`` and
    ``checks.grad_buffer_taken`` are set by the optimizer, ``last_gpu_seconds`` and
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
        self._groups: list[Group] = dev.groups
        self.zeroes_grad, self.skip_nonfinite, self.profile = zeroes_grad, skip_nonfinite, profile
        self.last_gpu_seconds: float | None = None
        self.last_host_seconds: float | None = None
        #: The checks of every step path, and what they keep from one step to the next (the
        #: device params seen written, the kp tensor gradients checked, the upload counts).
        self.checks = StepChecks(
            rule,
            self._groups,
            [
                ((gi, pi), bset.param)
                for gi, group in enumerate(self._groups)
                if not group.host_mode
                for pi, bset in enumerate(group.sets)
            ],
            device_of(rt.manager),  # the VkDevice every buffer of a step must be on
            zeroes_grad=zeroes_grad,
            skip_nonfinite=skip_nonfinite,
            captured=captured is not None,
        )
        # The sequence record_step last recorded into (its type and device checked; a weak
        # reference: the application owns it), so that steps recorded back to back skip those
        # checks.
        self._sequence: weakref.ref[Any] | None = None

    def step(self, grads: Sequence[Any] | None, *, wait: bool, started: float) -> StepHandle:
        """``Optimizer.step``: checked, then run and waited for (``wait``) or submitted."""
        prepared, counts = self._begin(grads, wait=wait)
        if wait:
            return self._step_sync(prepared, counts, started)
        return self._step_async(prepared, counts)

    def record(self, sequence: Any, grads: Sequence[Any] | None) -> int:
        """``Optimizer.record_step``: checked, then recorded into ``sequence``; the step number."""
        prepared, counts = self._begin(grads, recording=True, sequence=sequence)
        ops, _, _ = self._dev.ops(prepared, recording=True)
        if self.captured is not None:
            # Captured: the step reads its number and lr from the device's clock when it runs,
            # and advances the clock itself, so the sequence may be evaluated any number of times.
            self._rt.record(sequence, ops)
            self.captured.recorded = self.captured.stale = True
            self.checks.uploads.update(counts)
            self._remember_sequence(sequence)
            return 0
        step = self._groups[0].step + 1
        # The step's push constants (step size, bias corrections) are the host's for step
        # ``step``: evaluating the sequence again would apply them again. Refused on replay.
        once = (
            f"this sequence holds step {step} of a vk-adam optimizer, recorded by record_step(); "
            "a recorded step applies once (its step count and bias corrections are fixed when it "
            "is recorded). Record a new step for each evaluation: sequence.clear(), then record "
            "your work and opt.record_step(sequence) again (docs/usage.md)"
        )
        self._rt.record(sequence, ops, once=once)
        self._advance()
        self.checks.uploads.update(counts)
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
    ) -> tuple[list[list[Any]] | None, dict[ParamKey, int]]:
        """The preamble of every step path (``recording``: ``record_step`` into ``sequence``):
        every check, in one order, before anything is written (``checks``); returns the prepared
        gradients and the device params' upload counts, which the step notes once it ran.

        The counts are those the checks read: nothing the step runs uploads a device param (its
        uploads are the optimizer's own buffers), so they are the counts after it too."""
        known = recording and self._sequence is not None and self._sequence() is sequence
        return self.checks.check(
            grads,
            wait=wait,
            recording=recording,
            sequence=sequence,
            known_sequence=known,
            scaled=self._dev.grad_scale is not None,
        )

    def _advance(self) -> None:
        for group in self._groups:
            group.step += 1

    def _step_sync(
        self, prepared: list[list[Any]] | None, counts: dict[ParamKey, int], started: float
    ) -> StepHandle:
        handle = self._in_flight.synchronous()  # every submitted step waited for
        before = self.captured.steps() if self.captured is not None else self._groups[0].step
        handle.step = before + 1
        ops, first, last = self._dev.ops(prepared, status=True)
        if self.captured is not None:  # the device's count after the step
            ops.append(self._dev.status_download)
        eval_start = time.perf_counter()
        ticks = self._rt.run(ops, timestamps=self.profile)
        eval_seconds = time.perf_counter() - eval_start
        if ticks is not None:
            # One timestamp before the first op and one after each op.
            self.last_gpu_seconds = (ticks[last] - ticks[first]) * self._rt.facts.timestamp_period * 1e-9
        if self.captured is not None:  # the device counted the step unless it skipped it
            after = self.captured.clock.steps_in(self._dev.status_words)
            handle.skipped = after == before
            self.captured.set_steps(after)
            if not handle.skipped:
                self._dev.to_host.finish()
        else:
            handle.skipped = self.skip_nonfinite and int(self._dev.status_words[0]) != 0
        if not handle.skipped and self.captured is None:
            self._advance()
            self._dev.to_host.finish()
        self.checks.uploads.update(counts)
        if self.profile:
            self.last_host_seconds = time.perf_counter() - started - eval_seconds
        return handle

    def _step_async(self, prepared: list[list[Any]] | None, counts: dict[ParamKey, int]) -> StepHandle:
        writes_staging = any(g.host_mode for g in self._groups) or (
            prepared is not None and any(isinstance(g, np.ndarray) for gs in prepared for g in gs)
        )
        # At most MAX_STEPS_IN_FLIGHT submitted; and every one of them finished first when this
        # step writes staging memory (a submitted step's upload may not have read it yet: each
        # buffer has one staging copy).
        self._in_flight.make_room(MAX_STEPS_IN_FLIGHT, drain=writes_staging)
        if self.captured is not None:
            self.captured.steps()  # the device's count, if a recording may have run since
        step = self._groups[0].step + 1
        ops, _, _ = self._dev.ops(prepared)
        pending = self._rt.submit(ops)  # one submission (patched kp)
        self._advance()
        self.checks.uploads.update(counts)
        return self._in_flight.add(step, pending, [g for g in self._groups if g.host_mode])
