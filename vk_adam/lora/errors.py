""":class:`CheckpointError`, in a module of its own because two layers raise it.

:func:`load_checkpoint` (in :mod:`.checkpoint`) raises it for a bad file, and
:func:`import_torch_adamw_state` (in :mod:`.torch_state`, which :mod:`.checkpoint` imports)
raises it for optimizer state that does not match the adapter. Defined below both, the
dependency between them stays one way.
"""

from __future__ import annotations


class CheckpointError(ValueError):
    """A checkpoint is truncated, corrupted, or does not match the run being resumed.

    The one error :func:`load_checkpoint` raises for a bad file; when it does, nothing changed.
    """
