"""Atomic file replacement: a reader sees the old file or the new one, never a torn one.

Every on-disk record of the project (``run-meta.json``, ``batch-summary.json``, the ledger
index, ``result.json``) goes through :func:`atomic_write_bytes`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes, *, fsync: bool = True) -> os.stat_result:
    """Replace ``path`` with ``data`` atomically; returns the new file's stat.

    The temp file lives in the same directory so ``os.replace`` never crosses a filesystem.
    With ``fsync`` the data and the directory entry are flushed, so the record survives a
    power cut once this returns. On any error (ENOSPC, EACCES, ...) the temp file is removed
    and the previous ``path`` is left exactly as it was.

    The stat is taken from the open file after the rename (which sets its ctime), so it is
    the signature of exactly the file written, whatever is put at ``path`` afterwards.
    """
    path = Path(path)
    # Unique per call, not per process: two threads, or two hosts sharing a filesystem with
    # the same pid, must never write into one temp file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    # O_EXCL never follows a symlink; O_NOFOLLOW says so twice. ``os.replace`` then swaps
    # the directory entry, so a symlink or FIFO at ``path`` is replaced, never written through.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if fsync:
                os.fsync(fd)
            os.replace(tmp, path)
            written_stat = os.fstat(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if fsync:
        _fsync_dir(path.parent)
    return written_stat


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        # Some filesystems (network mounts) refuse fsync on a directory; the file itself is
        # already durable, so this is not worth failing a run over.
        pass
    finally:
        os.close(fd)
