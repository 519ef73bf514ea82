"""One live driver per batch dir.

The lock is an ``flock`` on ``batch-logs/driver.lock``, so the kernel releases it the moment
the holder dies, however it dies. The file also names the holder (pid, host, start time)
for the error message, and is removed on a clean release; a file left behind by a driver
that died on this host is taken over with a warning. One left by another host cannot be
checked from here, so it is refused with a hint instead of guessed at.

A job can delete or replace that file while its driver runs: a lock on a file no longer at
its path keeps no one out. So the driver also holds an ``flock`` on the batch dir itself,
which no job can take away short of removing the batch, and a second driver never takes a
batch whose driver lives (where the filesystem has no locks on directories, the file's
lock alone). The holder checks now and then that the file is still its own
(:meth:`BatchLock.keep`) and makes it again if not, so that ``batch steer`` and the view
still find it.
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
        #: The lock on the batch dir itself (None where directories take no ``flock``).
        self._dir_fd: int | None = None
        #: Set when a lock left by a dead driver was taken over: (pid, host).
        self.took_over: tuple[int, str] | None = None

    def acquire(self) -> None:
        """Take the lock or raise :class:`LockedError` naming the holder."""
        # batch-logs/ checked once here, before the driver writes anything into it: a
        # symlinked one would take every log and record of the driver out of the batch dir.
        ensure_dir(self.path.parent)
        self._dir_fd = self._lock_batch_dir()
        try:
            self._take_file()
        except BaseException:
            self._unlock_batch_dir()
            raise

    def _lock_batch_dir(self) -> int | None:
        """The batch dir's own lock, held; :class:`LockedError` when a driver holds it."""
        batch_dir = self.path.parent.parent
        fd = os.open(batch_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = _holder_of(self.path)
            raise LockedError(
                f"{batch_dir}: in use by another driver (pid {holder.get('pid', '?')} on "
                f"{holder.get('host', '?')})"
            ) from None
        except OSError:  # no locks on directories here: the file's lock alone
            os.close(fd)
            return None
        return fd

    def _unlock_batch_dir(self) -> None:
        if self._dir_fd is not None:
            os.close(self._dir_fd)  # the lock goes with its last descriptor
            self._dir_fd = None

    def _take_file(self) -> None:
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
        _write_holder(fd)
        self._fd = fd

    def keep(self) -> str | None:
        """Make sure ``driver.lock`` is still this driver's: when a job removed or replaced
        it, make it again and hold it (the batch dir's lock kept other drivers out
        meanwhile). A warning to show when it had to, else None."""
        if self._fd is None or self._is_mine():
            return None
        try:
            found = open_fd(self.path, os.O_RDWR)
        except FileNotFoundError:
            pass
        except OSError as exc:
            return f"warning: {self.path} was replaced and cannot be read: {exc.strerror}"
        else:
            try:
                fcntl.flock(found, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return f"warning: {self.path} was replaced by a file another process holds"
            finally:
                os.close(found)
        # Made whole beside it, then renamed into place: a reader (batch steer, the view)
        # never finds the file empty between its creation and its holder's line.
        spare = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(spare)
            fd = os.open(spare, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            return f"warning: {self.path} was removed and cannot be made again: {exc.strerror}"
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            _write_holder(fd)
            os.rename(spare, self.path)
        except OSError as exc:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(spare)
            return f"warning: {self.path} was removed and cannot be made again: {exc.strerror}"
        os.close(self._fd)
        self._fd = fd
        return f"warning: {self.path} was removed or replaced while this driver ran; made again"

    def _is_mine(self) -> bool:
        assert self._fd is not None
        try:
            found, mine = os.stat(self.path, follow_symlinks=False), os.fstat(self._fd)
        except OSError:
            return False
        return (found.st_dev, found.st_ino) == (mine.st_dev, mine.st_ino)

    def release(self) -> None:
        if self._fd is None:
            return
        if self._is_mine():  # not another's, should a job have put one in its place
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        os.close(self._fd)
        self._fd = None
        self._unlock_batch_dir()

    def __enter__(self) -> BatchLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _write_holder(fd: int) -> None:
    me = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "create_time": psutil.Process().create_time(),
    }
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(me).encode(), 0)


def _holder_of(path: Path) -> dict[str, Any]:
    """What ``driver.lock`` says of its holder; empty when it is gone or unreadable."""
    try:
        fd = open_fd(path, os.O_RDONLY)
    except OSError:
        return {}
    try:
        return _read_holder(fd)
    except OSError:
        return {}
    finally:
        os.close(fd)


def _read_holder(fd: int) -> dict[str, Any]:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def running_driver(batch_dir: Path) -> dict[str, Any] | None:
    """Who holds ``batch_dir``'s lock (pid, host), or None when no driver runs it. Takes
    the lock's shared side without waiting, so it never holds up a driver starting; the
    batch dir's own lock too, should a job have removed ``driver.lock``."""
    try:
        # A FIFO or a symlink there is no driver's lock (a driver refuses one): not waited on.
        fd = open_fd(Path(batch_dir) / LOGS_DIR / LOCK, os.O_RDONLY)
    except OSError:
        pass
    else:
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return _read_holder(fd) or {"pid": "?", "host": "?"}
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    return {"pid": "?", "host": "?"} if _batch_dir_locked(Path(batch_dir)) else None


def _batch_dir_locked(batch_dir: Path) -> bool:
    try:
        fd = os.open(batch_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False
