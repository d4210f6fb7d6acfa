"""Atomic file writes (temp file, fsync, rename) and removal of the temp files a killed write left.

Both file formats of ``vk_adam.lora`` (PEFT folders in :mod:`.peft`, checkpoints in
:mod:`.checkpoint`) write through here, so a reader sees the old file or the new one, never half
of one. Plain ``os`` and ``tempfile``: nothing here knows about adapters or optimizers.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path


def _temp_file_pattern(path: Path) -> re.Pattern[str]:
    # mkstemp's random part has no dots, so the temp files of another checkpoint whose name
    # starts with this one's (``c.safetensors.bak``) never match.
    return re.compile(rf"\.{re.escape(path.name)}\.[A-Za-z0-9_]+\.tmp")


def _remove_orphaned_temp_files(path: Path) -> None:
    """Delete temp files that an interrupted write of ``path`` (say, a SIGKILL) left behind.

    One writer per file is assumed: a concurrent save of the same path would lose its temp file.
    """
    pattern = _temp_file_pattern(path)
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return  # no folder (yet), or unreadable: nothing we could clean
    for entry in entries:
        if pattern.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
            try:
                os.unlink(entry.path)
            except OSError:
                pass  # best effort: a stale temp file must not stop a save or a load


def _atomic_write(path: Path, data: bytes) -> None:
    """Write via a temp file in the same folder, fsync, rename: readers see old or new, never half.

    Temp files that an earlier, killed write of ``path`` left are removed first; this write's
    own temp file is removed if it fails.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_orphaned_temp_files(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
