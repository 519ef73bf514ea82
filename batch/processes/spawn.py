"""The one place that starts and stops job processes.

Every job runs in its own session, so its process group id is its pid and one signal to the
group reaches everything the job started. Stopping is always SIGTERM to the group, a grace
period for the leader to exit, then SIGKILL to the group.

Every job process carries a job token in its environment (``BATCH_JOB_TOKEN``: the
registry's random invocation token, a dot, a serial), set before the exec, so from its first
instruction it, and everything it starts that keeps its environment, is findable as ours
even if it leaves its group (a double fork and ``setsid``) and before anything is recorded.

Three lines of defence keep jobs from outliving the driver:

1. :class:`~batch.processes.registry.ProcessRegistry` knows every live group; ``kill_all``
   stops them on a user abort, and after jobs end it stops processes carrying a finished
   job's token (escaped daemons).
2. A watchdog process (started, like ``pgids.json``, before the first spawn) is told each
   group as it starts and ends through a pipe; when the pipe closes because the driver
   died, even by SIGKILL, it stops the groups still live and every process carrying one of
   the invocation's tokens. ``prctl(PR_SET_PDEATHSIG)`` would need a ``preexec_fn``, which
   disables Popen's vfork path (a cost per spawn; bench/overhead.py) and reaches only the direct
   child; the watchdog costs nothing per spawn and reaches the whole group.
3. The registry keeps ``batch-logs/pgids.json`` (the invocation token; per group pgid, pid,
   start time, job token) up to date, so a later ``--resume`` calls
   :func:`~batch.processes.watchdog.reap_leftovers` to stop what survived both, after
   verifying each process is really ours.

The watchdog process, ``reap_leftovers`` and the group checks they rest on
(``signal_group``) are in :mod:`batch.processes.watchdog`; the registry in
:mod:`batch.processes.registry`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

from batch.processes.programs import ProgramCache
from batch.processes.registry import ProcessLike, ProcessRegistry
from batch.processes.watchdog import POLL, TOKEN_VAR, live_members, signal_group
from run_support.safe_files import open_append_fd

__all__ = [
    "LIMIT_ERRNOS",
    "DriverLimit",
    "JobProcess",
    "SpawnError",
    "limit_error",
    "pidfd_child_watcher",
    "spawn",
    "spawn_to",
    "spawn_tracked",
    "supervise",
    "terminate_group",
]


class SpawnError(Exception):
    """The job could not be started (no such executable, not executable, bad cwd, ...)."""


#: A start that failed with one of these failed for want of the driver's own resources —
#: its open files, its processes, its memory — not because of anything the job is.
LIMIT_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.EAGAIN, errno.ENOMEM})


class DriverLimit(Exception):
    """The driver could not start the job for want of its own resources (open files,
    processes, memory): the job never started, so it has no outcome, no record, and has
    spent no attempt. The driver starts fewer at once and tries it again
    (``batch.execution.execute``)."""


def limit_error(exc: OSError) -> DriverLimit | None:
    """``exc`` as a :class:`DriverLimit`, when it is one (:data:`LIMIT_ERRNOS`)."""
    if exc.errno not in LIMIT_ERRNOS:
        return None
    return DriverLimit(f"[Errno {exc.errno}] {exc.strerror or os.strerror(exc.errno or 0)}")


async def spawn(
    argv: Sequence[str],
    *,
    cwd: Path | str,
    env: Mapping[str, str],
    log_path: Path,
    registry: ProcessRegistry | None = None,
    case: str = "",
    model: str = "",
    helper: bool = False,
    label: str | None = None,
) -> JobProcess:
    """Start ``argv`` in its own session, stdout and stderr streamed to ``log_path`` by the OS.

    The job's output never passes through the driver. If the job cannot be started the
    reason is written into the log and :class:`SpawnError` raised; an ``OSError`` opening
    the log itself propagates (the batch dir is unwritable, not the job broken).

    With ``registry`` the process is given a job token in its environment and tracked
    (as job ``case`` of ``model``, ``label`` its attempt's container label) before this
    returns. A ``helper`` (a between-models
    command) gets a helper token: its group is stopped like a job's, but processes it
    leaves behind outside its group (a model server it starts) are not swept.
    """
    try:
        fd = open_append_fd(log_path)
    except OSError as exc:
        limit = limit_error(exc)
        if limit is not None:
            raise limit from exc
        raise
    try:
        return await spawn_tracked(
            argv,
            cwd=cwd,
            env=env,
            fd=fd,
            registry=registry,
            case=case,
            model=model,
            helper=helper,
            label=label,
        )
    finally:
        os.close(fd)


async def spawn_tracked(
    argv: Sequence[str],
    *,
    cwd: Path | str,
    env: Mapping[str, str],
    fd: int,
    registry: ProcessRegistry | None,
    case: str = "",
    model: str = "",
    helper: bool = False,
    label: str | None = None,
    pipes: bool = False,
) -> JobProcess:
    """:func:`spawn_to`, and with ``registry`` the token and tracking :func:`spawn` describes.

    ``pipes``: stdin, stdout and stderr are pipes to the driver (``JobProcess.pipes``), a
    warm worker's (``batch.attempt.worker_pool``); ``fd`` then only gets the reason a start
    failed."""
    token = None
    programs = None
    if registry is not None:
        token = registry.mint(helper=helper)
        env = {**env, TOKEN_VAR: token}
        programs = registry.programs
    try:
        process = await spawn_to(argv, cwd=cwd, env=env, fd=fd, programs=programs, pipes=pipes)
    except BaseException:
        if registry is not None and token is not None:
            registry.release(token)
        raise
    if registry is not None:
        registry.add(process, case=case, model=model, token=token, label=label)
    return process


class JobProcess:
    """A job process started by :func:`spawn_to`: its ``pid``, its ``returncode`` once it
    has exited (-N when signal N ended it) and ``wait()``, as ``asyncio.subprocess.Process``.

    Its end is seen through a pidfd on the event loop, then reaped: no transport, protocol
    or pipe-connecting task per job, which asyncio's own subprocess pays per spawn
    (bench/overhead.py). Without pidfds (Linux before 5.3) a thread waits for it instead.
    """

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self.pid = popen.pid
        loop = asyncio.get_running_loop()
        self._exited: asyncio.Future[int] = loop.create_future()
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            self._pidfd = -1
            waiter = loop.run_in_executor(None, popen.wait)
            waiter.add_done_callback(lambda _: self._reap())
        else:
            loop.add_reader(self._pidfd, self._reap)

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    @property
    def pipes(self) -> tuple[IO[bytes], IO[bytes], IO[bytes]]:
        """stdin, stdout and stderr of a process spawned with ``pipes=True``."""
        popen = self._popen
        assert popen.stdin is not None and popen.stdout is not None and popen.stderr is not None
        return popen.stdin, popen.stdout, popen.stderr

    def _reap(self) -> None:
        if self._popen.poll() is None or self._exited.done():
            return  # not exited after all (cannot happen with a pidfd), or already seen
        if self._pidfd >= 0:
            asyncio.get_running_loop().remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = -1
        self._exited.set_result(self._popen.returncode)

    async def wait(self) -> int:
        """Its exit status, once it has exited; cancelling a wait leaves other waits alone."""
        return await asyncio.shield(self._exited)

    def send_signal(self, signum: int) -> None:
        """Signal the process itself (not its group), unless it has been reaped."""
        self._popen.send_signal(signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


async def spawn_to(
    argv: Sequence[str],
    *,
    cwd: Path | str,
    env: Mapping[str, str],
    fd: int,
    programs: ProgramCache | None = None,
    pipes: bool = False,
) -> JobProcess:
    """:func:`spawn` with stdout and stderr to the open file ``fd`` (not closed here), or
    with ``pipes`` all three to pipes (``fd`` gets only a failed start's reason).

    With ``programs`` a command named without a slash is looked up in ``env``'s PATH once
    (:class:`~batch.processes.programs.ProgramCache`) instead of by every spawn.
    """
    if not argv:
        raise SpawnError(_log_start_failure(fd, "the command is empty"))
    program = None if programs is None else programs.find(argv[0], env)
    try:
        popen = _popen(argv, program, cwd=cwd, env=env, fd=fd, pipes=pipes)
    except (OSError, ValueError) as exc:
        limit = limit_error(exc) if isinstance(exc, OSError) else None
        if limit is not None:  # the driver's want, not the job's: nothing in its log
            raise limit from exc
        if program is None:
            raise SpawnError(_log_start_failure(fd, f"cannot start {argv[0]!r}: {exc}")) from exc
        # The file found earlier would not run (gone, replaced, a script whose interpreter
        # is missing): PATH is searched again, as a spawn without the cache would.
        assert programs is not None
        programs.forget(argv[0], env)
        return await spawn_to(argv, cwd=cwd, env=env, fd=fd, pipes=pipes)
    return JobProcess(popen)


def _popen(
    argv: Sequence[str],
    program: str | None,
    *,
    cwd: Path | str,
    env: Mapping[str, str],
    fd: int,
    pipes: bool = False,
) -> subprocess.Popen[bytes]:
    # Popen takes the vfork path (no preexec_fn), as asyncio's subprocess does.
    pipe = subprocess.PIPE
    return subprocess.Popen(
        argv,
        executable=program,
        cwd=cwd,
        env=env,
        stdin=pipe if pipes else subprocess.DEVNULL,
        stdout=pipe if pipes else fd,
        stderr=pipe if pipes else subprocess.STDOUT,
        start_new_session=True,
        bufsize=0,
    )


def _log_start_failure(fd: int, message: str) -> str:
    with contextlib.suppress(OSError):
        os.write(fd, f"batch: {message}\n".encode(errors="replace"))
    return message


@contextlib.contextmanager
def pidfd_child_watcher() -> Iterator[None]:
    """Inside a running loop: reap job processes through pidfds rather than a thread each.

    Python 3.11's default child watcher starts one thread per process, a cost per job
    (bench/overhead.py); 3.12 and later use pidfds by themselves, so there this does nothing, as it
    does where the kernel has no pidfds. The previous watcher is restored on exit, so later
    event loops of the same process are unaffected.
    """
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        yield
        return
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        yield
        return
    previous = asyncio.get_child_watcher()
    watcher = asyncio.PidfdChildWatcher()
    watcher.attach_loop(asyncio.get_running_loop())
    asyncio.set_child_watcher(watcher)
    try:
        yield
    finally:
        # Not closed: a job still running keeps its pidfd reader on the loop until it ends.
        asyncio.set_child_watcher(previous)


async def terminate_group(pgid: int, grace: float, *, leader: ProcessLike | None = None) -> None:
    """SIGTERM group ``pgid``, wait up to ``grace`` for it to exit, then SIGKILL the group.

    With ``leader`` (the group's first process, a child of ours) the wait ends when it
    exits; without, when no process is left in the group. Members still there afterwards
    get SIGKILL either way, so nothing the job started outlives it.
    """
    if not signal_group(pgid, signal.SIGTERM):
        return
    if leader is not None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await leader.wait()
    else:
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and live_members(pgid):
            await asyncio.sleep(POLL)
    signal_group(pgid, signal.SIGKILL)


async def supervise(
    process: ProcessLike,
    registry: ProcessRegistry,
    *,
    case: str,
    model: str,
    timeout: float | None,
    grace: float,
) -> bool | None:
    """Track a job started by :func:`spawn` in ``registry`` and wait for it to end.

    Returns True when ``timeout`` ran out and the group was stopped, False when the job
    exited by itself (its exit status is ``process.returncode``), None when the user's
    abort (``registry.kill_all``) killed it, so its outcome is unknown. Members left in the
    group after its leader exits are stopped too: nothing outlives its job. Cancelling
    stops the group.
    """
    pgid = registry.add(process, case=case, model=model)
    try:
        timed_out = await _wait(process, timeout, grace)
        if signal_group(pgid, 0):
            # The leader is gone but something it started is not.
            await terminate_group(pgid, grace)
    except asyncio.CancelledError:
        await terminate_group(pgid, grace, leader=process)
        await process.wait()
        raise
    finally:
        registry.discard(pgid)
    return None if registry.was_killed(pgid) else timed_out


async def _wait(process: ProcessLike, timeout: float | None, grace: float) -> bool:
    """Wait for the job to exit; True when its timeout ran out and it was stopped."""
    if timeout is None:
        # No timer to arm: the common case of a job without a timeout stays one await.
        await process.wait()
        return False
    try:
        async with asyncio.timeout(timeout):
            await process.wait()
    except TimeoutError:
        await terminate_group(process.pid, grace, leader=process)
        await process.wait()
        return True
    return False
