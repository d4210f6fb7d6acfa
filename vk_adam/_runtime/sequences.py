"""The kp sequences of one :class:`~.runtime.Runtime`, and the work submitted through them.

This lives apart from ``runtime.py`` so that ``Runtime`` keeps to the project's terms (buffers,
pipelines, ops; run, submit, record, close) while this owns the kp bookkeeping behind them:
``run()``'s two reused sequences (one without timestamp queries, one with; recorded, evaluated
and waited for here), the free list that finished submissions go back to, the idle sequences
borrowed from and given back to the shared device (:mod:`.shared`), and their destruction at
close. Only the runtime makes one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from . import shared as _shared


def rerecord(manager: Any, sequence: Any, ops: Sequence[Any], *, timestamps: int = 0) -> Any:
    """``sequence`` (made on ``manager`` when None), cleared, with ``ops`` recorded into it: the
    one way a kp sequence is (re)filled in vk-adam."""
    if sequence is None:
        sequence = manager.sequence(total_timestamps=timestamps)
    sequence.clear()
    for op in ops:
        sequence.record(op)
    return sequence


class RecordedByKey:
    """Sequences recorded once and submitted many times, one per name, each recorded again only
    when its key changes: the kp objects its ops use, compared by identity (a fresh ``id()`` of
    a new object may equal a freed one's, so the key's objects are kept alive here)."""

    def __init__(self, manager: Any) -> None:
        self._manager = manager
        self._made: dict[str, tuple[tuple[Any, ...], Any]] = {}
        #: How many times a sequence was recorded (once per name while its key stays).
        self.recordings = 0

    def get(
        self, name: str, key: tuple[Any, ...], ops: Callable[[], Sequence[Any]]
    ) -> tuple[Any, tuple[Any, ...]]:
        """``name``'s sequence, recorded from ``ops()`` when first asked for or when ``key``
        changed; and the key it replaced (``()`` if none), whose objects the caller may now free."""
        made = self._made.get(name)
        kept: tuple[Any, ...] = made[0] if made is not None else ()
        if made is not None and len(kept) == len(key) and all(a is b for a, b in zip(kept, key, strict=True)):
            return made[1], ()
        sequence = rerecord(self._manager, made[1] if made is not None else None, ops())
        self._made[name] = (key, sequence)
        self.recordings += 1
        return sequence, kept

    def keys(self) -> list[tuple[Any, ...]]:
        """The keys of the sequences recorded now (their objects are in use)."""
        return [key for key, _ in self._made.values()]

    def close(self) -> None:
        """Destroy every sequence (destroying one waits for its submitted work)."""
        made, self._made = self._made, {}
        for _key, sequence in made.values():
            sequence.destroy()


class Pending:
    """Work submitted with :meth:`Runtime.submit` or :meth:`Runtime.evaluate_async`;
    :meth:`wait` blocks until the GPU is done. ``pool``: the runtime's sequences, which its
    sequences go back to once done (None: the caller's own sequence, kept by the caller)."""

    __slots__ = ("_pool", "_sequences")

    def __init__(self, pool: Sequences | None, sequences: list[Any]) -> None:
        self._pool = pool
        self._sequences = sequences

    @property
    def done(self) -> bool:
        """True once :meth:`wait` returned (or nothing was left to wait for)."""
        return not self._sequences

    def wait(self) -> None:
        for seq in self._sequences:
            seq.eval_await()
            if self._pool is not None:
                self._pool.free.append(seq)
        self._sequences = []


def evaluate_async(sequence: Any, *, asynchronous: bool) -> Pending:
    """Submit ``sequence`` (recorded by its owner) without waiting for it; ``asynchronous``: this
    kp's ``eval_async()`` submits a whole sequence (a patched kp), else it is evaluated, and
    waited for, here (stock kp's ``eval_async()`` with no op runs the synchronous ``eval()``)."""
    if not asynchronous:
        sequence.eval()
        return Pending(None, [])
    sequence.eval_async()
    return Pending(None, [sequence])


class Sequences:
    """Every kp sequence one runtime made on ``manager``; ``shared``: the shared device it
    borrows idle sequences from (None for an application's manager)."""

    def __init__(self, manager: Any, shared: _shared.SharedDevice | None) -> None:
        self._manager = manager
        self._shared = shared
        self.made: list[Any] = []
        #: Sequences of finished submissions, for the next submission.
        self.free: list[Any] = []
        #: ids of the sequences made with timestamp queries (never given back to the device).
        self.timed: set[int] = set()
        # run()'s sequences: one without timestamp queries, one with (made when first asked
        # for; a sequence made with queries writes timestamps on every evaluation, which costs
        # time on every step, most on a software device such as lavapipe).
        self.run_sequence: Any = None
        self.timed_run_sequence: Any = None
        self._run_timestamps = 0

    def for_run(self, timestamps: int) -> Any:
        """``run()``'s sequence: the untimed one for ``timestamps=0``, else the timed one,
        made again with more queries when it has fewer than ``timestamps``."""
        if not timestamps:
            if self.run_sequence is None:
                self.run_sequence = self._new()
            return self.run_sequence
        if self.timed_run_sequence is None or self._run_timestamps < timestamps:
            if self.timed_run_sequence is not None:
                self.timed_run_sequence.destroy()
                self.timed.discard(id(self.timed_run_sequence))
                self.made.remove(self.timed_run_sequence)
            self.timed_run_sequence = self._new(timestamps)
            self._run_timestamps = timestamps
        return self.timed_run_sequence

    def run(self, ops: Sequence[Any], *, timestamps: bool) -> list[int] | None:
        """``Runtime.run``: ``ops`` recorded into :meth:`for_run`'s sequence (the timed one with
        ``timestamps``, one query before the first op and one after each), submitted and waited
        for; the raw timestamps, or None."""
        seq = rerecord(self._manager, self.for_run(len(ops) + 1 if timestamps else 0), ops)
        seq.eval()
        if timestamps:
            return [int(t) for t in seq.get_timestamps()]
        return None

    def submit(self, ops: Sequence[Any], *, one_submission: bool) -> Pending:
        """Submit ``ops`` without waiting: recorded into one sequence (``one_submission``, a
        patched kp), else one sequence per op (stock kp's ``eval_async`` takes one op)."""
        if one_submission:
            seq = rerecord(self._manager, self._acquire(), ops)
            seq.eval_async()
            return Pending(self, [seq])
        sequences = []
        for op in ops:
            seq = self._acquire()
            seq.eval_async(op)
            sequences.append(seq)
        return Pending(self, sequences)

    def _new(self, timestamps: int = 0) -> Any:
        seq = None
        if timestamps == 0 and self._shared is not None:
            seq = _shared.take_sequence(self._shared)
        if seq is None:
            seq = self._manager.sequence(total_timestamps=timestamps)
        if timestamps:
            self.timed.add(id(seq))
        self.made.append(seq)
        return seq

    def _acquire(self) -> Any:
        if self.free:
            return self.free.pop()
        return self._new()

    def close(self, *, destroy: bool) -> None:
        """Forget every sequence; with ``destroy`` (the device is still open), first give the
        idle, untimed ones back to the shared device for its next user and destroy the rest
        (destroying one waits for its submitted work)."""
        shared, self._shared = self._shared, None
        if destroy:
            for seq in self.made:
                reusable = id(seq) not in self.timed and not seq.is_running()
                if not (shared is not None and reusable and _shared.give_sequence(shared, seq)):
                    seq.destroy()
        self.made, self.free, self.timed = [], [], set()
        self.run_sequence = self.timed_run_sequence = None
        self._manager = None


__all__ = ["Pending", "RecordedByKey", "Sequences", "evaluate_async", "rerecord"]
