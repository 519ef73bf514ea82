"""The live job process groups of one driver invocation, and the means to stop them all.

:class:`ProcessRegistry` is the first and third line of defence that
:mod:`batch.processes.spawn` describes: it knows every live group (``kill_all`` stops them
on a user abort), stops processes that carry a finished job's token (escaped daemons),
tells the watchdog process (:mod:`batch.processes.watchdog`) each group as it starts and
ends, and keeps ``batch-logs/pgids.json`` up to date for a later ``--resume``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

import attrs

from batch.layout import LOGS_DIR, PGIDS
from batch.processes.programs import ProgramCache
from batch.processes.watchdog import (
    POLL,
    carried_token,
    kill_carriers,
    new_invocation_token,
    signal_group,
    signal_pid,
    start_time,
    start_watchdog,
    token_carriers,
)
from batch.sweep.features.containers import ContainerSpec
from run_support import jsonio
from run_support.atomic import atomic_write_bytes

__all__ = ["FLUSH_DELAY", "ProcessLike", "ProcessRegistry"]

#: How long the registry gathers group starts and ends before rewriting ``pgids.json``.
FLUSH_DELAY = 0.2
#: How long it gathers them before telling the watchdog: each write wakes the watchdog
#: process, which costs the driver's loop; gathered, there are far fewer writes than jobs
#: (bench/overhead.py).
WATCHDOG_DELAY = 0.05
#: How long after a job ends its escaped processes are looked for (gathered: one scan of
#: every process's environment per second at most, whatever the job rate).
ESCAPE_SWEEP_DELAY = 1.0
#: An escape sweep that took S seconds is followed by the next one no sooner than this many
#: times S later (when that is longer than ESCAPE_SWEEP_DELAY).
ESCAPE_SWEEP_SHARE = 20
#: What a guest (a notify command) leaves behind gets this long after SIGTERM at the end,
#: as the notify command itself does after its timeout (``batch.notify.commands.KILL_GRACE``).
GUEST_GRACE = 1.0


class ProcessLike(Protocol):
    """What supervising a job needs of its process: :class:`JobProcess`, or an
    ``asyncio.subprocess.Process``."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int: ...


@attrs.define
class _Group:
    process: ProcessLike
    case: str
    model: str
    token: str | None = None
    start_time: float | None = None
    #: A guest (a notify command): tracked like a job, but not stopped by ``kill_all``.
    guest: bool = False
    #: The attempt's container label, when the sweep has a container engine.
    label: str | None = None


class ProcessRegistry:
    """The live job process groups of one driver, and the means to stop them all.

    ``batch_dir`` (None: keep no ``pgids.json``) is where ``batch-logs/pgids.json`` lives.
    ``kill_grace`` is what the watchdog allows jobs between SIGTERM and SIGKILL when the
    driver has died. ``watchdog=False`` leaves out the watchdog process (for tests). With
    ``containers`` (the sweep's engine) the watchdog is told each job's container label
    and, when the driver dies, removes the containers of the attempts whose containers
    were not yet removed (:meth:`containers_removed`), its engine run with
    ``containers_env`` (the sweep's ``env``) on top of this process's environment.
    """

    def __init__(
        self,
        batch_dir: Path | None,
        *,
        kill_grace: float = 10.0,
        watchdog: bool = True,
        flush_delay: float = FLUSH_DELAY,
        containers: ContainerSpec | None = None,
        containers_env: Mapping[str, str] | None = None,
    ) -> None:
        self.state_file = batch_dir / LOGS_DIR / PGIDS if batch_dir is not None else None
        self.kill_grace = kill_grace
        self.containers = containers
        #: Set on top of this process's environment for the watchdog's engine (the sweep's
        #: ``env``, as the jobs get it).
        self.containers_env = containers_env or {}
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
        #: Guests' tokens (:meth:`mint` ``guest=True``).
        self._guests: set[str] = set()

    def __len__(self) -> int:
        return len(self._live)

    def mint(self, *, helper: bool = False, guest: bool = False) -> str:
        """A new job token, for a process about to be spawned.

        The first call starts the watchdog and writes ``pgids.json`` (with the invocation
        token) before anything is spawned: a driver SIGKILLed at any later moment leaves
        nothing that neither of them can find.

        A ``guest`` (a notify command) is a job to the watchdog and to the escape sweep,
        but the user's abort and ``halt now`` do not stop it — it tells of them, bounded by
        its own timeout — and what it leaves behind gets :data:`GUEST_GRACE`, not
        ``kill_grace``, before SIGKILL at the end: a notifier's daemon cannot hold the
        driver's exit (docs/notify.md).
        """
        if not self._started:
            self._started = True
            self._start_watchdog()
            self.flush()
        self._serial += 1
        token = f"{self.token}.{'h' if helper else ''}{self._serial}"
        self._minted.add(token)
        if guest:
            self._guests.add(token)
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
        label: str | None = None,
    ) -> int:
        """Track a job started by :func:`spawn` (``token``: its job token, ``label``: its
        attempt's container label); returns its process group id. Tracking one already
        tracked does nothing more."""
        pgid = process.pid  # its own session: the leader's pid is the group's id
        if pgid in self._live:
            return pgid
        if token is not None:
            self._minted.discard(token)
        guest = token in self._guests
        self._live[pgid] = _Group(process, case, model, token, guest=guest, label=label)
        told = b"+%d %s" % (pgid, (token or "-").encode())
        if label is not None and self.containers is not None and "\n" not in label:
            told += b" " + label.encode(errors="replace")
        self._tell_watchdog(told + b"\n")
        self._changed()
        if self.aborting and not guest:
            # Started while kill_all was running: it would otherwise escape the abort.
            self._killed.add(pgid)
            signal_group(pgid, signal.SIGKILL)
        return pgid

    def containers_removed(self, label: str) -> None:
        """The containers of attempt ``label`` are removed: the watchdog need not."""
        if self.containers is not None and "\n" not in label:
            self._tell_watchdog(b"=" + label.encode(errors="replace") + b"\n")

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
        groups = [(pgid, group) for pgid, group in self._live.items() if not group.guest]
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
            # batch-logs/ checked at each write: a job may have swapped it for a symlink.
            atomic_write_bytes(self.state_file, jsonio.dumps(state), fsync=False, real_dirs=1)
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
        carriers = {pid: t for pid, t in token_carriers(self.token).items() if t not in spared}
        strays = list(carriers)
        for pid in strays:
            signal_pid(pid, signal.SIGTERM)
        # A job's daemon gets the job's grace; a guest's (a notifier's) only a short one.
        jobs_left = any(token not in self._guests for token in carriers.values())
        deadline = time.monotonic() + (self.kill_grace if jobs_left else GUEST_GRACE)
        while strays and time.monotonic() < deadline:
            time.sleep(POLL)
            strays = [pid for pid in strays if carried_token(pid) is not None]
        kill_carriers(self.token, spared)

    # --- watchdog -------------------------------------------------------------------------

    def _start_watchdog(self) -> None:
        if not self._use_watchdog or self._watchdog is not None:
            return
        try:
            self._watchdog = start_watchdog(
                self.kill_grace, self.token, self.containers, self.containers_env
            )
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
