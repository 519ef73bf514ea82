"""The driver's own limits — open files and processes — so that they never fail a job.

Each running job holds descriptors of the driver's (its pidfd; a share of the spawns and
record writes in flight) and is at least one process of the user's. Under ``ulimit -n
256`` with ``max_concurrent: 1000`` the starts past the limit used to fail with ``Too many
open files`` and be recorded as the jobs' errors. At the start the driver raises its soft
limits to the hard ones (:func:`raise_soft_limits`) and caps how many jobs run at once to
what the limits leave room for (:func:`jobs_allowed`, pure), with a warning naming both
numbers. A start that still meets a limit is the execution's to defer
(``batch.processes.spawn.DriverLimit``). docs/reliability.md, "10. Small promises".
"""

from __future__ import annotations

import contextlib
import os
import resource

import attrs

__all__ = [
    "FDS_PER_JOB",
    "FD_RESERVE",
    "Limits",
    "Refusal",
    "RefusedStarts",
    "cap_lines",
    "jobs_allowed",
    "read_limits",
]

#: Descriptors each running job holds of the driver's: its pidfd, and its share of the
#: spawns (the log, the exec pipe) and record writes (the temporary file, the directory).
FDS_PER_JOB = 2
#: Descriptors the driver keeps for itself: the event loop, events.jsonl, the summary, the
#: lock, the watchdog's pipe, the file threads, notify commands' files.
FD_RESERVE = 64
#: Processes kept for the driver's own: the watchdog, notify and between-models commands.
PROC_RESERVE = 16


@attrs.frozen
class Limits:
    """The soft limits after raising them, and what was in use when they were read."""

    files: int | None
    files_open: int
    #: None: no limit (or one that does not apply: root is not held to RLIMIT_NPROC).
    processes: int | None = None
    processes_used: int = 0


def jobs_allowed(limits: Limits) -> tuple[int | None, int | None]:
    """How many jobs may run at once by the open-file limit and by the process limit
    (None: that limit sets none); at least 1 each."""
    by_files = None
    if limits.files is not None:
        room = limits.files - limits.files_open - FD_RESERVE
        by_files = max(1, room // FDS_PER_JOB)
    by_processes = None
    if limits.processes is not None:
        by_processes = max(1, limits.processes - limits.processes_used - PROC_RESERVE)
    return by_files, by_processes


def cap_lines(max_concurrent: int, limits: Limits) -> tuple[int, list[str]]:
    """``max_concurrent`` within the limits, and a warning for each limit that lowered it."""
    by_files, by_processes = jobs_allowed(limits)
    cap, lines = max_concurrent, []
    if by_files is not None and by_files < cap:
        cap = by_files
        lines.append(
            f"warning: max_concurrent {max_concurrent} is more than the open-file limit allows "
            f"({limits.files} files: ulimit -n); running at most {cap} jobs at once"
        )
    if by_processes is not None and by_processes < cap:
        cap = by_processes
        lines.append(
            f"warning: max_concurrent {max_concurrent} is more than the process limit allows "
            f"({limits.processes} processes, {limits.processes_used} in use: ulimit -u); "
            f"running at most {cap} jobs at once"
        )
    return cap, lines


def read_limits() -> Limits:
    """Raise the soft open-file and process limits to the hard ones, then read them."""
    files = _raised(resource.RLIMIT_NOFILE)
    try:
        files_open = len(os.listdir("/proc/self/fd"))
    except OSError:
        files_open = 0
    processes = None if os.geteuid() == 0 else _raised(resource.RLIMIT_NPROC)
    used = 0 if processes is None else _processes_of(os.getuid())
    return Limits(files, files_open, processes, used)


def _raised(which: int) -> int | None:
    """The soft limit ``which``, raised to the hard one first where it is lower; None for
    no limit."""
    soft, hard = resource.getrlimit(which)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(which, (hard, hard))
            soft = hard
    return None if soft == resource.RLIM_INFINITY else soft


def _processes_of(uid: int) -> int:
    """How many processes ``uid`` runs (RLIMIT_NPROC counts the user's, not the driver's)."""
    import psutil

    count = 0
    for process in psutil.process_iter(["uids"]):
        uids = process.info.get("uids")
        if uids is not None and uids.real == uid:
            count += 1
    return count


#: Seconds before a job the driver's limits did not let start is tried again (times the
#: refusals in a row with nothing else running), and how many such refusals stop the sweep.
REFUSED_WAIT = 0.2
REFUSED_ALONE = 10


@attrs.frozen
class Refusal:
    """What to do about one start the driver's limits refused: stop the sweep (not even
    one job can start), or wait ``delay`` seconds, with at most ``cap`` jobs at once from
    now on when it is lower than today's (``say``: the first time, with a warning)."""

    stop: bool
    delay: float
    cap: int | None
    say: bool


@attrs.define
class RefusedStarts:
    """The starts the driver's own limits refused: each waits its turn again with fewer
    jobs at once; refused often enough with nothing else running, the sweep stops."""

    alone: int = 0
    said: bool = False

    def refused(self, others: int, max_concurrent: int) -> Refusal:
        """One refusal, with ``others`` jobs running beside the refused one."""
        self.alone = self.alone + 1 if others == 0 else 0
        if self.alone >= REFUSED_ALONE:
            return Refusal(stop=True, delay=0.0, cap=None, say=False)
        cap = max(1, others)
        lower = cap < max_concurrent
        say = lower and not self.said
        self.said = self.said or say
        return Refusal(
            stop=False, delay=REFUSED_WAIT * max(1, self.alone), cap=cap if lower else None, say=say
        )
