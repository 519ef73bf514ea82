"""Job process groups that must not outlive their driver: the watchdog and leftover reaping.

``batch.processes`` starts and stops jobs while the driver lives; this module is for when
it dies (the three lines of defence are listed in ``batch.processes``):

- :func:`start_watchdog` starts a process that is told each group as it starts and ends
  through a pipe (``+PGID`` / ``-PGID`` lines); when the pipe closes because the driver
  died, even by SIGKILL, :func:`watchdog_main` stops the groups still live;
- :func:`reap_leftovers` stops the groups a dead driver left in ``batch-logs/pgids.json``
  (a later ``--resume`` calls it);
- :func:`signal_group`, :func:`live_members` and :func:`start_time` are the group checks
  both rest on, and ``batch.processes`` uses them too.

``batch.processes`` re-exports ``signal_group``, ``reap_leftovers``, ``watchdog_main``,
``LOGS_DIR`` and ``PGIDS_FILE``, so imports from there keep working.

A group is only signalled when it is provably the one recorded: its leader's pid *and*
creation time match, or the leader is gone while members remain (Linux never hands out a
pgid's number again while the group has members).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

from run_support import jsonio
from run_support.safe_files import read_bytes

PGIDS_FILE = "pgids.json"
LOGS_DIR = "batch-logs"
#: How often a wait for a group to empty looks again (seconds).
POLL = 0.02
#: Creation times of one process read twice agree exactly; allow for float rounding only.
_SAME_START = 1e-3


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to group ``pgid``; False when the group no longer exists."""
    if pgid <= 1:
        # killpg(0) would signal the driver's own group; no job ever has these ids.
        return False
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        # EPERM: the number now belongs to someone else's group, which is not ours to touch.
        return False
    return True


def start_time(pid: int) -> float | None:
    """The creation time of process ``pid``; None when it is gone."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def live_members(pgid: int) -> list[psutil.Process]:
    """Processes of group ``pgid`` that are still running (zombies excluded)."""
    if not signal_group(pgid, 0):
        return []
    members = []
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) != pgid:
                continue
            process = psutil.Process(pid)
            if process.status() != psutil.STATUS_ZOMBIE:
                members.append(process)
        except (OSError, psutil.Error):
            continue
    return members


# --- the watchdog process ---------------------------------------------------------------------

_WATCHDOG_MAIN = "import sys, batch.watchdog as w; w.watchdog_main(sys.argv[1])"


def start_watchdog(grace: float) -> subprocess.Popen[bytes]:
    """Start the watchdog; write ``+PGID\\n`` / ``-PGID\\n`` to its stdin, close it to let go.

    Its stdin is non-blocking: a stalled watchdog must never stall the event loop.
    """
    package_root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    process = subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG_MAIN, str(grace)],
        stdin=subprocess.PIPE,
        # Holding none of the driver's output pipes open: whoever reads the driver's output
        # sees its end when the driver ends, not when the watchdog does.
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd="/",
        env=env,
        # Its own session: a terminal's Ctrl-C or hangup for the driver does not reach it.
        start_new_session=True,
    )
    assert process.stdin is not None
    os.set_blocking(process.stdin.fileno(), False)
    return process


def watchdog_main(grace: str) -> None:
    """Body of the watchdog process: on end of input (the driver is gone) stop live groups."""
    live: dict[int, float | None] = {}
    for line in sys.stdin.buffer:
        pgid = int(line[1:])
        if line.startswith(b"+"):
            live[pgid] = start_time(pgid)
        else:
            live.pop(pgid, None)
    entries = [{"pgid": pgid, "pid": pgid, "start_time": t} for pgid, t in live.items()]
    _reap(entries, float(grace))


# --- leftovers of a dead driver -----------------------------------------------------------


def reap_leftovers(batch_dir: Path, grace: float = 10.0) -> list[int]:
    """Stop job groups a dead driver of ``batch_dir`` left running; returns their pgids.

    Reads ``batch-logs/pgids.json``. A recorded group is stopped (SIGTERM, ``grace``,
    SIGKILL) only when its leader has the recorded pid and creation time, or the leader is
    gone but members remain; a pid since reused by another process is left alone.
    """
    try:
        entries = jsonio.loads(read_bytes(batch_dir / LOGS_DIR / PGIDS_FILE))
    except (OSError, ValueError):
        return []
    if not isinstance(entries, list):
        return []
    return _reap([e for e in entries if _is_entry(e)], grace)


def _is_entry(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("pgid"), int)
        and isinstance(entry.get("pid"), int)
        and entry["pgid"] > 1
        and isinstance(entry.get("start_time"), float | int | None)
    )


def _is_ours(entry: Mapping[str, Any]) -> bool:
    """True when group ``entry["pgid"]`` is provably the one recorded."""
    pgid, pid, recorded = entry["pgid"], entry["pid"], entry.get("start_time")
    try:
        leader = psutil.Process(pid)
        if leader.status() != psutil.STATUS_ZOMBIE:
            same = recorded is not None and abs(leader.create_time() - recorded) < _SAME_START
            return same and os.getpgid(pid) == pgid
    except (OSError, psutil.Error):
        pass
    # The leader is gone. Members left behind keep the pgid's number reserved, so any
    # process still in the group is one the recorded job started.
    return bool(live_members(pgid))


def _reap(entries: Sequence[Mapping[str, Any]], grace: float) -> list[int]:
    targets = [entry["pgid"] for entry in entries if _is_ours(entry)]
    for pgid in targets:
        signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    pending = targets
    while pending and time.monotonic() < deadline:
        time.sleep(POLL)
        pending = [pgid for pgid in pending if live_members(pgid)]
    for pgid in pending:
        signal_group(pgid, signal.SIGKILL)
    return targets
