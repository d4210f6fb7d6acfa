"""Asynchronous steps: the handle ``step(wait=False)`` returns, and the queue of steps
submitted and not yet waited for (oldest first; waiting for one waits for all before it)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from .._runtime import Pending
from .device import Group


class StepHandle:
    """The result of :meth:`Optimizer.step`: already finished for a synchronous step.

    ``wait()`` blocks until the GPU finished the step (and, for NumPy params, copies the
    updated values into them). ``skipped`` is True when ``skip_nonfinite`` skipped the step.
    """

    __slots__ = ("_finalize", "_pending", "_queue", "done", "skipped", "step")

    def __init__(self, queue: InFlight, step: int) -> None:
        self._queue = queue
        self._pending: Pending | None = None
        self._finalize: list[Group] = []  # NumPy groups to copy back once the GPU is done
        self.done = False
        self.skipped = False
        self.step = step

    def wait(self) -> StepHandle:
        """Wait for this step (and every step issued before it) to finish on the GPU."""
        if not self.done:
            self._queue.wait_through(self)
        return self

    def __repr__(self) -> str:
        state = "skipped" if self.skipped else ("done" if self.done else "in flight")
        return f"<StepHandle step={self.step} {state}>"


class InFlight:
    """Submitted steps, oldest first. ``copy_back`` finishes a NumPy group once its step ran."""

    def __init__(self, copy_back: Callable[[Group], None]) -> None:
        self._handles: deque[StepHandle] = deque()
        self._copy_back = copy_back

    def __len__(self) -> int:
        return len(self._handles)

    def add(self, step: int, pending: Pending, finalize: list[Group]) -> StepHandle:
        """Queue step ``step``, submitted (``pending``), whose NumPy groups ``finalize`` are
        copied back once it ran; its handle."""
        handle = StepHandle(self, step)
        handle._pending = pending
        handle._finalize.extend(finalize)
        self._handles.append(handle)
        return handle

    def make_room(self, limit: int, *, drain: bool) -> None:
        """Before a submission: wait for the oldest step while ``limit`` or more are in flight,
        or for every one with ``drain``."""
        if drain:
            self.drain()
        elif len(self._handles) >= limit:
            self._handles[0].wait()

    def wait_through(self, target: StepHandle) -> None:
        while self._handles:
            handle = self._handles.popleft()
            if handle._pending is not None:
                handle._pending.wait()
                handle._pending = None
            for group in handle._finalize:
                self._copy_back(group)
            handle.done = True
            if handle is target:
                return

    def drain(self) -> None:
        """Wait for every submitted step."""
        if self._handles:
            self.wait_through(self._handles[-1])

    def synchronous(self) -> StepHandle:
        """Before a synchronous step: wait for every submitted step (the step rewrites what they
        read), and return the synchronous step's handle, done (the caller sets ``step`` and
        ``skipped``)."""
        self.drain()
        handle = StepHandle(self, 0)
        handle.done = True
        return handle
