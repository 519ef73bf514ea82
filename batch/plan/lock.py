"""One live driver per batch dir.

The lock is an ``flock`` on ``batch-logs/driver.lock``, so the kernel releases it the moment
the holder dies, however it dies. The file also names the holder (pid, host, start time)
for the error message, and is removed on a clean release; a file left behind by a driver
that died on this host is taken over with a warning. One left by another host cannot be
checked from here, so it is refused with a hint instead of guessed at.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
from pathlib import Path
from typing import Any

import psutil

from batch.errors import LockedError
from batch.layout import LOCK, LOGS_DIR
from run_support.safe_files import ensure_dir, open_fd


class BatchLock:
    def __init__(self, batch_dir: Path) -> None:
        self.path = Path(batch_dir) / LOGS_DIR / LOCK
        self._fd: int | None = None
        #: Set when a lock left by a dead driver was taken over: (pid, host).
        self.took_over: tuple[int, str] | None = None

    def acquire(self) -> None:
        """Take the lock or raise :class:`LockedError` naming the holder."""
        # batch-logs/ checked once here, before the driver writes anything into it: a
        # symlinked one would take every log and record of the driver out of the batch dir.
        ensure_dir(self.path.parent)
        while True:
            fd = open_fd(self.path, os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                raise LockedError(
                    f"{self.path.parent.parent}: in use by another driver "
                    f"(pid {holder.get('pid', '?')} on {holder.get('host', '?')})"
                ) from None
            # The holder may have released and unlinked the file between our open and flock;
            # a lock on an unlinked inode protects nothing, so start over.
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        previous = _read_holder(fd)
        if previous:
            host = previous.get("host")
            pid = previous.get("pid")
            if host != socket.gethostname():
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
                raise LockedError(
                    f"{self.path.parent.parent}: locked by pid {pid} on host {host}; if that "
                    f"driver is gone, delete {self.path}"
                )
            # Whoever wrote this no longer holds the flock, so it is not running any more.
            self.took_over = (pid if isinstance(pid, int) else -1, str(host))
        me = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "create_time": psutil.Process().create_time(),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> BatchLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_holder(fd: int) -> dict[str, Any]:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def running_driver(batch_dir: Path) -> dict[str, Any] | None:
    """Who holds ``batch_dir``'s lock (pid, host), or None when no driver runs it. Takes
    the lock's shared side without waiting, so it never holds up a driver starting."""
    try:
        # A FIFO or a symlink there is no driver's lock (a driver refuses one): not waited on.
        fd = open_fd(Path(batch_dir) / LOGS_DIR / LOCK, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(fd) or {"pid": "?", "host": "?"}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
