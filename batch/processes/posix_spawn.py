"""The cheapest exact way to start a job: ``os.posix_spawn``, where it does what Popen would.

``subprocess.Popen`` costs the driver about 0.4 ms of CPU per ``true`` on this VM, most of
it in Python: the environment encoded one ``os.fsencode`` per name and value (~95 calls),
``/dev/null`` opened and closed, an error pipe made and read, the fds checked. With
``os.posix_spawn`` the environment is encoded in C, glibc starts the child with
``clone(CLONE_VFORK)`` and reports a failed exec as the call's error: about 0.1 ms
(``bench/overhead.py``; measured 0.38-0.43 against 0.11-0.14 ms per spawn).

It is used only where the job sees exactly what Popen would give it
(``start_new_session=True``, stdin ``/dev/null``, stdout and stderr to ``fd``,
``close_fds=True``, ``restore_signals=True``); :func:`spawn_exact` returns None otherwise
and the caller uses Popen:

- **cwd.** Python 3.11's ``posix_spawn`` cannot set the child's working directory, and
  changing the driver's own would race with its threads; so the fast path is taken only
  when the job's cwd is the driver's cwd already (the common case: ``batch sweep.yaml``
  run where the sweep is).
- **The executable** is looked up in the job's ``PATH`` as Popen does (its ``PATH``, not
  the driver's), each directory in order: by ``posix_spawnp`` in the child when the job's
  ``PATH`` is the driver's (glibc searches the driver's), else here. Where glibc's search
  would stop at an error Popen would look past, the spawn fails and Popen runs it; a name
  found nowhere is left to Popen, whose error the log then says word for word.
- **fds.** Popen closes every fd but 0-2 in the child. The fds Python opens are
  non-inheritable (PEP 446) and so are closed by the exec anyway; any other (inherited by
  the driver from its parent, or made inheritable) is closed by a file action.
- **Signals.** SIGPIPE and SIGXFSZ, which Python ignores, are set back to their default,
  as ``restore_signals`` does; the signal mask is inherited, as with Popen.
- **A failure** (exec error, an fd gone, a bad argument) falls back to Popen, which then
  raises exactly the error it always raised: a failed ``posix_spawn`` leaves no process
  behind (glibc reaps it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

#: Signals Python sets to SIG_IGN at start-up and Popen's ``restore_signals`` resets.
_RESTORED = tuple(
    getattr(signal, name) for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, name)
)
_FD_DIR = "/proc/self/fd"


class SpawnedChild:
    """A child started by :func:`spawn_exact`: the part of ``subprocess.Popen`` a
    ``JobProcess`` uses (``pid``, ``returncode``, ``poll``, ``wait``, ``send_signal``)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        #: Python's convention: -N when signal N ended it.
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                # Reaped by someone else (SIGCHLD ignored): what Popen says then too.
                self.returncode = 0
            else:
                if pid == self.pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self) -> int:
        while self.returncode is None:
            try:
                _, status = os.waitpid(self.pid, 0)
            except ChildProcessError:
                self.returncode = 0
            else:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        """Signal the process unless it has been reaped (its pid may be another's now)."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # as Popen: ended meanwhile
                os.kill(self.pid, signum)


def spawn_exact(
    argv: Sequence[str], *, cwd: Path | str, env: Mapping[str, str], fd: int
) -> SpawnedChild | None:
    """Start ``argv`` as Popen would (see the module docstring), or None when this path
    cannot promise that or failed: then the caller starts it with Popen."""
    if not hasattr(os, "posix_spawn") or not _is_driver_cwd(cwd):
        return None
    try:
        name = os.fsdecode(argv[0])
        if not os.path.dirname(name) and env.get("PATH") == os.environ.get("PATH"):
            # glibc looks it up in the child, in the same PATH (the driver's is the job's):
            # no stat per directory here.
            spawn, executable = os.posix_spawnp, name
        else:
            spawn, found = os.posix_spawn, _find_executable(name, env)
            if found is None:
                return None
            executable = found
        actions: list[tuple[int, ...] | tuple[int, int, str, int, int]] = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDWR, 0),
            (os.POSIX_SPAWN_DUP2, fd, 1),
            (os.POSIX_SPAWN_DUP2, fd, 2),
        ]
        actions.extend((os.POSIX_SPAWN_CLOSE, extra) for extra in _inheritable_fds())
        pid = spawn(
            executable, list(argv), env, file_actions=actions, setsid=True, setsigdef=_RESTORED
        )
    except (OSError, ValueError, TypeError):
        return None
    return SpawnedChild(pid)


def _is_driver_cwd(cwd: Path | str) -> bool:
    path = os.fspath(cwd)
    if not os.path.isabs(path):
        return os.path.normpath(path) == "."
    try:
        return os.path.normpath(path) == os.getcwd()
    except OSError:  # the driver's own cwd is gone
        return False


def _find_executable(name: str, env: Mapping[str, str]) -> str | None:
    """Where Popen's exec would find ``name``: as given when it holds a slash, else the
    first directory of the job's ``PATH`` holding an executable file of that name."""
    if os.path.dirname(name):
        return name
    for directory in os.get_exec_path(env):
        candidate = os.path.join(directory, name)
        try:
            found = os.stat(candidate)
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(found.st_mode) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _inheritable_fds() -> list[int]:
    """The driver's fds above 2 that would survive an exec: Popen's ``close_fds`` closes
    them in the child (after the dup2s that make the job's stdout and stderr)."""
    found = []
    for entry in os.listdir(_FD_DIR):
        number = int(entry)
        if number > 2:
            try:
                if os.get_inheritable(number):
                    found.append(number)
            except OSError:  # the listing's own fd, closed by now
                continue
    return found
