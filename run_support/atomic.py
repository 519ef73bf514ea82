"""Atomic file replacement: a reader sees the old file or the new one, never a torn one.

Every on-disk record of the project (``run-meta.json``, ``batch-summary.json``, the ledger
index, ``result.json``) goes through :func:`atomic_write_bytes`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterable
from pathlib import Path

from run_support.safe_files import parent_fd


def atomic_write_bytes(
    path: Path, data: bytes | Iterable[bytes], *, fsync: bool = True, real_dirs: int = 0
) -> os.stat_result:
    """Replace ``path`` with ``data`` (bytes, or pieces of them written in turn, so that a
    large file is never held whole) atomically; returns the new file's stat.

    The temp file lives in the same directory so ``os.replace`` never crosses a filesystem.
    With ``fsync`` the data and the directory entry are flushed, so the record survives a
    power cut once this returns. On any error (ENOSPC, EACCES, ...) the temp file is removed
    and the previous ``path`` is left exactly as it was.

    The stat is taken from the open file after the rename (which sets its ctime), so it is
    the signature of exactly the file written, whatever is put at ``path`` afterwards.
    """
    path = Path(path)
    if real_dirs:
        # The last ``real_dirs`` directories must be real ones (not a symlink a job put in
        # place of ``batch-logs/``): everything below is done relative to that directory.
        dir_fd = parent_fd(path, real_dirs)
        try:
            return _write_in(dir_fd, Path(path.name), data, fsync)
        finally:
            os.close(dir_fd)
    return _write_in(None, path, data, fsync)


def _write_in(
    dir_fd: int | None, path: Path, data: bytes | Iterable[bytes], fsync: bool
) -> os.stat_result:
    # Unique per call, not per process: two threads, or two hosts sharing a filesystem with
    # the same pid, must never write into one temp file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    # O_EXCL never follows a symlink; O_NOFOLLOW says so twice. ``os.replace`` then swaps
    # the directory entry, so a symlink or FIFO at ``path`` is replaced, never written through.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o644, dir_fd=dir_fd)
    try:
        try:
            for piece in (data,) if isinstance(data, bytes) else data:
                view = memoryview(piece)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
            if fsync:
                os.fsync(fd)
            os.replace(tmp, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            written_stat = os.fstat(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    if fsync:
        if dir_fd is None:
            _fsync_dir(path.parent)
        else:
            with contextlib.suppress(OSError):
                os.fsync(dir_fd)
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
