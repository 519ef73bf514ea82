"""The one place that starts and stops job processes.

Every job runs in its own session, so its process group id is its pid and one signal to the
group reaches everything the job started. Stopping is always SIGTERM to the group, a grace
period for the leader to exit, then SIGKILL to the group.

Every job process carries a job token in its environment (``BATCH_JOB_TOKEN``: the
registry's random invocation token, a dot, a serial), set before the exec, so from its first
instruction it, and everything it starts that keeps its environment, is findable as ours
even if it leaves its group (a double fork and ``setsid``) and before anything is recorded.

Three lines of defence keep jobs from outliving the driver:

1. :class:`ProcessRegistry` knows every live group; ``kill_all`` stops them on a user abort,
   and after jobs end it stops processes carrying a finished job's token (escaped daemons).
2. A watchdog process (started, like ``pgids.json``, before the first spawn) is told each
   group as it starts and ends through a pipe; when the pipe closes because the driver
   died, even by SIGKILL, it stops the groups still live and every process carrying one of
   the invocation's tokens. ``prctl(PR_SET_PDEATHSIG)`` would need a ``preexec_fn``, which
   costs ~1.7 ms per spawn here (it disables the vfork path) and reaches only the direct
   child; the watchdog costs nothing per spawn and reaches the whole group.
3. The registry keeps ``batch-logs/pgids.json`` (the invocation token; per group pgid, pid,
   start time, job token) up to date, so a later ``--resume`` calls :func:`reap_leftovers`
   to stop what survived both, after verifying each process is really ours.

The watchdog process, :func:`reap_leftovers` and the group checks they rest on
(:func:`signal_group`) are in ``batch.processes.watchdog``; they are re-exported here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import attrs

from batch.layout import LOGS_DIR, PGIDS
from batch.processes.programs import ProgramCache
from batch.processes.watchdog import (
    POLL,
    TOKEN_VAR,
    carried_token,
    kill_carriers,
    live_members,
    new_invocation_token,
    reap_leftovers,
    signal_group,
    signal_pid,
    start_time,
    start_watchdog,
    token_carriers,
    watchdog_main,
)
from run_support import jsonio
from run_support.atomic import atomic_write_bytes
from run_support.safe_files import open_append_fd

__all__ = [
    "FLUSH_DELAY",
    "TOKEN_VAR",
    "JobProcess",
    "ProcessRegistry",
    "SpawnError",
    "pidfd_child_watcher",
    "reap_leftovers",
    "signal_group",
    "spawn",
    "spawn_to",
    "spawn_tracked",
    "supervise",
    "terminate_group",
    "watchdog_main",
]

#: How long the registry gathers group starts and ends before rewriting ``pgids.json``.
FLUSH_DELAY = 0.2
#: How long it gathers them before telling the watchdog: each write wakes the watchdog
#: process, ~0.3 ms of the driver's time on a small VM, once per loop pass was ~0.8 per job.
WATCHDOG_DELAY = 0.05
#: How long after a job ends its escaped processes are looked for (gathered: one scan of
#: every process's environment per second at most, whatever the job rate).
ESCAPE_SWEEP_DELAY = 1.0
#: An escape sweep that took S seconds is followed by the next one no sooner than this many
#: times S later (when that is longer than ESCAPE_SWEEP_DELAY).
ESCAPE_SWEEP_SHARE = 20


class SpawnError(Exception):
    """The job could not be started (no such executable, not executable, bad cwd, ...)."""


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
) -> JobProcess:
    """Start ``argv`` in its own session, stdout and stderr streamed to ``log_path`` by the OS.

    The job's output never passes through the driver. If the job cannot be started the
    reason is written into the log and :class:`SpawnError` raised; an ``OSError`` opening
    the log itself propagates (the batch dir is unwritable, not the job broken).

    With ``registry`` the process is given a job token in its environment and tracked
    (as job ``case`` of ``model``) before this returns. A ``helper`` (a between-models
    command) gets a helper token: its group is stopped like a job's, but processes it
    leaves behind outside its group (a model server it starts) are not swept.
    """
    fd = open_append_fd(log_path)
    try:
        return await spawn_tracked(
            argv, cwd=cwd, env=env, fd=fd, registry=registry, case=case, model=model, helper=helper
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
) -> JobProcess:
    """:func:`spawn_to`, and with ``registry`` the token and tracking :func:`spawn` describes."""
    token = None
    programs = None
    if registry is not None:
        token = registry.mint(helper=helper)
        env = {**env, TOKEN_VAR: token}
        programs = registry.programs
    try:
        process = await spawn_to(argv, cwd=cwd, env=env, fd=fd, programs=programs)
    except BaseException:
        if registry is not None and token is not None:
            registry.release(token)
        raise
    if registry is not None:
        registry.add(process, case=case, model=model, token=token)
    return process


class ProcessLike(Protocol):
    """What supervising a job needs of its process: :class:`JobProcess`, or an
    ``asyncio.subprocess.Process``."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int: ...


class JobProcess:
    """A job process started by :func:`spawn_to`: its ``pid``, its ``returncode`` once it
    has exited (-N when signal N ended it) and ``wait()``, as ``asyncio.subprocess.Process``.

    Its end is seen through a pidfd on the event loop, then reaped: no transport, protocol
    or pipe-connecting task per job, which costs asyncio's own subprocess about 0.3 ms of
    driver CPU per spawn. Without pidfds (Linux before 5.3) a thread waits for it instead.
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
) -> JobProcess:
    """:func:`spawn` with stdout and stderr to the open file ``fd`` (not closed here).

    With ``programs`` a command named without a slash is looked up in ``env``'s PATH once
    (:class:`~batch.processes.programs.ProgramCache`) instead of by every spawn.
    """
    if not argv:
        raise SpawnError(_log_start_failure(fd, "the command is empty"))
    program = None if programs is None else programs.find(argv[0], env)
    try:
        popen = _popen(argv, program, cwd=cwd, env=env, fd=fd)
    except (OSError, ValueError) as exc:
        if program is None:
            raise SpawnError(_log_start_failure(fd, f"cannot start {argv[0]!r}: {exc}")) from exc
        # The file found earlier would not run (gone, replaced, a script whose interpreter
        # is missing): PATH is searched again, as a spawn without the cache would.
        assert programs is not None
        programs.forget(argv[0], env)
        return await spawn_to(argv, cwd=cwd, env=env, fd=fd)
    return JobProcess(popen)


def _popen(
    argv: Sequence[str], program: str | None, *, cwd: Path | str, env: Mapping[str, str], fd: int
) -> subprocess.Popen[bytes]:
    # Popen takes the vfork path (no preexec_fn), as asyncio's subprocess does.
    return subprocess.Popen(
        argv,
        executable=program,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=fd,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _log_start_failure(fd: int, message: str) -> str:
    with contextlib.suppress(OSError):
        os.write(fd, f"batch: {message}\n".encode(errors="replace"))
    return message


@contextlib.contextmanager
def pidfd_child_watcher() -> Iterator[None]:
    """Inside a running loop: reap job processes through pidfds rather than a thread each.

    Python 3.11's default child watcher starts one thread per process, ~0.15 ms of driver
    CPU per job; 3.12 and later use pidfds by themselves, so there this does nothing, as it
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


@attrs.define
class _Group:
    process: ProcessLike
    case: str
    model: str
    token: str | None = None
    start_time: float | None = None


class ProcessRegistry:
    """The live job process groups of one driver, and the means to stop them all.

    ``batch_dir`` (None: keep no ``pgids.json``) is where ``batch-logs/pgids.json`` lives.
    ``kill_grace`` is what the watchdog allows jobs between SIGTERM and SIGKILL when the
    driver has died. ``watchdog=False`` leaves out the watchdog process (for tests).
    """

    def __init__(
        self,
        batch_dir: Path | None,
        *,
        kill_grace: float = 10.0,
        watchdog: bool = True,
        flush_delay: float = FLUSH_DELAY,
    ) -> None:
        self.state_file = batch_dir / LOGS_DIR / PGIDS if batch_dir is not None else None
        self.kill_grace = kill_grace
        self.flush_delay = flush_delay
        #: True once ``kill_all`` ran: the user aborted, and no killed run gets a record.
        self.aborting = False
        self._live: dict[int, _Group] = {}
        self._killed: set[int] = set()
        self._flush_handle: asyncio.TimerHandle | None = None
        self._use_watchdog = watchdog
        self._watchdog: subprocess.Popen[bytes] | None = None
        #: This invocation's token: job tokens are ``TOKEN.SERIAL`` (batch.processes.watchdog).
        self.token = new_invocation_token()
        self._serial = 0
        self._started = False
        #: Tokens handed to spawns still in progress: their processes are not escapees.
        self._minted: set[str] = set()
        self._sweep_handle: asyncio.TimerHandle | None = None
        #: Seconds between two escape sweeps: ESCAPE_SWEEP_DELAY, or more when a sweep is slow.
        self._sweep_gap = ESCAPE_SWEEP_DELAY
        #: Lines for the watchdog not yet written (sent at most every WATCHDOG_DELAY).
        self._watchdog_lines: list[bytes] = []
        self._watchdog_handle: asyncio.TimerHandle | None = None
        #: The files this invocation's commands run (:class:`ProgramCache`).
        self.programs = ProgramCache()

    def __len__(self) -> int:
        return len(self._live)

    def mint(self, *, helper: bool = False) -> str:
        """A new job token, for a process about to be spawned.

        The first call starts the watchdog and writes ``pgids.json`` (with the invocation
        token) before anything is spawned: a driver SIGKILLed at any later moment leaves
        nothing that neither of them can find.
        """
        if not self._started:
            self._started = True
            self._start_watchdog()
            self.flush()
        self._serial += 1
        token = f"{self.token}.{'h' if helper else ''}{self._serial}"
        self._minted.add(token)
        return token

    def release(self, token: str) -> None:
        """Forget a minted token whose spawn failed."""
        self._minted.discard(token)

    def add(
        self,
        process: ProcessLike,
        *,
        case: str,
        model: str,
        token: str | None = None,
    ) -> int:
        """Track a job started by :func:`spawn` (``token``: its job token); returns its
        process group id. Tracking one already tracked does nothing more."""
        pgid = process.pid  # its own session: the leader's pid is the group's id
        if pgid in self._live:
            return pgid
        if token is not None:
            self._minted.discard(token)
        self._live[pgid] = _Group(process, case, model, token)
        self._tell_watchdog(b"+%d %s\n" % (pgid, (token or "-").encode()))
        self._changed()
        if self.aborting:
            # Started while kill_all was running: it would otherwise escape the abort.
            self._killed.add(pgid)
            signal_group(pgid, signal.SIGKILL)
        return pgid

    def discard(self, pgid: int) -> None:
        """Forget a group whose job is over."""
        if self._live.pop(pgid, None) is not None:
            self._tell_watchdog(b"-%d\n" % pgid)
            self._changed()
            self._schedule_escape_sweep()

    def was_killed(self, pgid: int) -> bool:
        """True when ``kill_all`` signalled this group: its outcome is unknown."""
        return pgid in self._killed

    async def kill_all(self, grace: float) -> list[int]:
        """Stop every live group (user abort): SIGTERM, ``grace`` seconds, SIGKILL.

        Returns the pgids signalled. Groups started from now on are killed at once.
        """
        self.aborting = True
        groups = list(self._live.items())
        for pgid, _ in groups:
            self._killed.add(pgid)
            signal_group(pgid, signal.SIGTERM)
        waiters = [asyncio.ensure_future(group.process.wait()) for _, group in groups]
        if waiters:
            _, pending = await asyncio.wait(waiters, timeout=grace)
            for waiter in pending:
                waiter.cancel()
        for pgid, _ in groups:
            signal_group(pgid, signal.SIGKILL)
        return [pgid for pgid, _ in groups]

    # --- pgids.json -----------------------------------------------------------------------

    def _changed(self) -> None:
        if self.state_file is None or self._flush_handle is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        # Gathered: at 4 jobs of 1 ms each, one rewrite per start and end would double the
        # cost of a job. The watchdog covers the gap in real time.
        self._flush_handle = loop.call_later(self.flush_delay, self.flush)

    def flush(self) -> None:
        """Rewrite ``pgids.json`` with the live groups now."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        if self.state_file is None:
            return
        entries: list[dict[str, object]] = []
        for pgid, group in self._live.items():
            if group.start_time is None:
                group.start_time = start_time(pgid)
            entries.append(
                {
                    "pgid": pgid,
                    "pid": group.process.pid,
                    "start_time": group.start_time,
                    "case": group.case,
                    "model": group.model,
                    "token": group.token,
                }
            )
        state = {"token": self.token, "groups": entries}
        try:
            self.state_file.parent.mkdir(parents=True, exist_ok=True)
            # No fsync: after a power cut no job survives, so the file has nothing to say.
            atomic_write_bytes(self.state_file, jsonio.dumps(state), fsync=False)
        except OSError:
            # A hint for a later resume, not a record: losing it must not stop the sweep.
            pass

    # --- escaped processes -----------------------------------------------------------------

    def _schedule_escape_sweep(self) -> None:
        if self._sweep_handle is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop, no later: close() sweeps
        self._sweep_handle = loop.call_later(self._sweep_gap, self._sweep_escapees)

    def _spared(self) -> frozenset[str]:
        live = {group.token for group in self._live.values() if group.token is not None}
        return frozenset(live | self._minted)

    def _sweep_escapees(self) -> None:
        """SIGTERM processes carrying a finished job's token; SIGKILL them a grace later."""
        self._sweep_handle = None
        began = time.monotonic()
        spared = self._spared()
        strays = {pid: t for pid, t in token_carriers(self.token).items() if t not in spared}
        # A scan reads every process's environment: on a host with thousands of processes
        # it is kept to at most 1/ESCAPE_SWEEP_SHARE of the driver's time.
        self._sweep_gap = max(ESCAPE_SWEEP_DELAY, ESCAPE_SWEEP_SHARE * (time.monotonic() - began))
        for pid in strays:
            signal_pid(pid, signal.SIGTERM)
        if strays:
            asyncio.get_running_loop().call_later(self.kill_grace, _kill_if_still, strays)

    def _stop_escapees(self) -> None:
        """At the end: stop every process carrying a finished job's token, waiting for them."""
        if self._sweep_handle is not None:
            self._sweep_handle.cancel()
            self._sweep_handle = None
        if not self._started:
            return
        spared = self._spared()
        strays = [pid for pid, t in token_carriers(self.token).items() if t not in spared]
        for pid in strays:
            signal_pid(pid, signal.SIGTERM)
        deadline = time.monotonic() + self.kill_grace
        while strays and time.monotonic() < deadline:
            time.sleep(POLL)
            strays = [pid for pid in strays if carried_token(pid) is not None]
        kill_carriers(self.token, spared)

    # --- watchdog -------------------------------------------------------------------------

    def _start_watchdog(self) -> None:
        if not self._use_watchdog or self._watchdog is not None:
            return
        try:
            self._watchdog = start_watchdog(self.kill_grace, self.token)
        except OSError:
            self._use_watchdog = False

    def _tell_watchdog(self, line: bytes) -> None:
        if not self._use_watchdog:
            return
        self._watchdog_lines.append(line)
        if self._watchdog_handle is not None:
            return  # a write is already due
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._write_watchdog()
            return
        self._watchdog_handle = loop.call_later(WATCHDOG_DELAY, self._write_watchdog)

    def _write_watchdog(self) -> None:
        """Send the lines gathered over WATCHDOG_DELAY in one write: one wake-up of the
        watchdog for many jobs rather than two per job. A driver killed before this write
        leaves the watchdog unaware of those groups, but their processes carry the
        invocation's job tokens, which the watchdog sweeps for when the driver is gone; an
        end not yet told leaves it a group it verifies before signalling (leader's start
        time and token), as it does every recorded group."""
        if self._watchdog_handle is not None:
            self._watchdog_handle.cancel()
            self._watchdog_handle = None
        lines, self._watchdog_lines = self._watchdog_lines, []
        if not lines or not self._use_watchdog:
            return
        if self._watchdog is None:
            self._start_watchdog()
            if self._watchdog is None:
                return
        stdin = self._watchdog.stdin
        assert stdin is not None
        try:
            os.write(stdin.fileno(), b"".join(lines))
        except (BrokenPipeError, BlockingIOError, ValueError):
            # Gone or not reading: the driver's own kill_all and pgids.json still hold.
            self._use_watchdog = False

    def close(self) -> None:
        """Write ``pgids.json``, stop escaped processes of finished jobs and let the
        watchdog go: it stops groups still live."""
        self.flush()
        self._write_watchdog()
        self._stop_escapees()
        if self._watchdog is not None and self._watchdog.stdin is not None:
            self._watchdog.stdin.close()
            self._watchdog = None

    def __enter__(self) -> ProcessRegistry:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _kill_if_still(strays: Mapping[int, str]) -> None:
    """SIGKILL the processes of ``strays`` that still carry the token they had (a pid since
    reused by another process does not)."""
    for pid, token in strays.items():
        if carried_token(pid) == token:
            signal_pid(pid, signal.SIGKILL)
