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

The file names are ``batch.layout``'s.

Every job process carries its invocation's token in its environment (``BATCH_JOB_TOKEN``,
``<invocation token>.<serial>``, set by ``batch.processes.spawn.spawn`` from the exec on). That
token is the proof a process is ours:

- a recorded group is only signalled when its leader has the recorded pid, creation time
  *and* job token, or the leader is gone while a member still carries the token (Linux never
  hands out a pgid's number again while the group has members); anything else is left
  alone and named in the result;
- processes that left their job's group (a double fork and ``setsid``) are found by the
  token wherever they were re-parented: :func:`token_carriers` reads ``/proc/PID/environ``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import psutil

from batch.layout import LOGS_DIR, PGIDS
from batch.processes.groups import carried, signal_group
from batch.sweep.features.containers import ContainerSpec
from run_support import jsonio
from run_support.safe_files import read_bytes

#: How often a wait for a group to empty looks again (seconds).
POLL = 0.02
#: The watchdog reads the start times of the groups it was told of at most this late.
STAMP_DELAY = 0.2
#: Creation times of one process read twice agree exactly; allow for float rounding only.
_SAME_START = 1e-3
#: The environment variable that marks a process as one of an invocation's jobs.
TOKEN_VAR = "BATCH_JOB_TOKEN"
_TOKEN_ITEM = TOKEN_VAR.encode() + b"="
#: SIGKILL rounds for token carriers: a job forking while it is killed adds new ones.
_KILL_ROUNDS = 20


def new_invocation_token() -> str:
    """A random token for one driver invocation: no stale file or job can guess it."""
    return secrets.token_hex(8)


def carried_token(pid: int) -> str | None:
    """The job token in process ``pid``'s environment; None when it has none, is gone, is a
    zombie (its environment is empty) or is another user's (unreadable)."""
    return carried(pid, _TOKEN_ITEM)


def token_carriers(invocation: str) -> dict[int, str]:
    """Every live process (but this one) carrying a job token of ``invocation``: pid → token.

    A helper's token (``INVOCATION.hN``, a between-models command) is not a job's: what a
    helper leaves running on purpose (a model server it started) is not swept.
    """
    prefix = invocation + "."
    me = os.getpid()
    found = {}
    for pid in psutil.pids():
        if pid == me:
            continue
        token = carried_token(pid)
        if token is not None and token.startswith(prefix) and token[len(prefix) :].isdigit():
            found[pid] = token
    return found


def kill_carriers(invocation: str, spare: frozenset[str] = frozenset()) -> list[int]:
    """SIGKILL every process carrying a token of ``invocation`` not in ``spare``, until none
    is left (a dying job may still fork); returns their pids."""
    killed: list[int] = []
    for _ in range(_KILL_ROUNDS):
        carriers = [pid for pid, t in token_carriers(invocation).items() if t not in spare]
        if not carriers:
            break
        for pid in carriers:
            signal_pid(pid, signal.SIGKILL)
        killed.extend(carriers)
        time.sleep(POLL)
    return sorted(set(killed))


def signal_pid(pid: int, sig: int) -> None:
    """Send ``sig`` to process ``pid`` if it still exists and is ours to signal."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


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

_WATCHDOG_MAIN = "import sys, batch.processes.watchdog as w; w.watchdog_main(*sys.argv[1:])"


def start_watchdog(
    grace: float,
    invocation: str,
    containers: ContainerSpec | None = None,
    containers_env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start the watchdog of ``invocation``; write ``+PGID TOKEN [LABEL]\\n`` / ``-PGID\\n``
    (and, with ``containers``, ``=LABEL\\n`` once an attempt's containers are removed) to
    its stdin, close it to let go.

    Its stdin is non-blocking: a stalled watchdog must never stall the event loop.
    """
    package_root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ)
    engine = []
    if containers is not None:
        # The engine it may run is the jobs' (DOCKER_HOST, CONTAINERS_CONF...), given by the
        # sweep's env as well as the driver's.
        env.update(containers_env or {})
        engine = [containers.engine, str(containers.stop_timeout)]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    process = subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG_MAIN, str(grace), invocation, *engine],
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


def watchdog_main(grace: str, invocation: str, engine: str = "", stop_timeout: str = "") -> None:
    """Body of the watchdog process: on end of input (the driver is gone) stop live groups
    and every process still carrying one of ``invocation``'s job tokens, then, with an
    ``engine``, remove the containers of every attempt it was told of whose containers
    were not yet removed (``batch.processes.containers``).

    The token sweep also covers a job the driver had started but not yet announced (it died
    in between) and daemons that left their job's group.
    """
    live: dict[int, tuple[float | None, str]] = {}
    #: Attempts (their container labels) whose containers the driver has not yet removed.
    labels: set[str] = set()
    # Start times are read in one go at most every STAMP_DELAY, not per group: most jobs of
    # a fast sweep have ended by then, and reading one costs a real share of a short
    # job's whole cost to the driver (bench/overhead.py). (A pid is not reused within 0.2 s;
    # pgids.json takes its start times just as late.)
    unstamped: set[int] = set()
    stamp_at = 0.0
    stdin = sys.stdin.buffer.fileno()
    rest = b""
    while True:
        wait = max(0.0, stamp_at - time.monotonic()) if unstamped else None
        if select.select([stdin], [], [], wait)[0]:
            chunk = os.read(stdin, 1 << 16)
            if not chunk:
                break  # the driver is gone
            *lines, rest = (rest + chunk).split(b"\n")
            for line in lines:
                if line.startswith(b"="):
                    labels.discard(line[1:].decode(errors="replace"))
                    continue
                fields = line.split(b" ", 2)
                if not fields[0]:
                    continue
                pgid = int(fields[0][1:])
                if line.startswith(b"+"):
                    live[pgid] = (None, fields[1].decode())
                    if len(fields) > 2:
                        labels.add(fields[2].decode(errors="replace"))
                    if not unstamped:
                        stamp_at = time.monotonic() + STAMP_DELAY
                    unstamped.add(pgid)
                else:
                    live.pop(pgid, None)
                    unstamped.discard(pgid)
        if unstamped and time.monotonic() >= stamp_at:
            _stamp(live, unstamped)
    _stamp(live, unstamped)
    entries = [
        {"pgid": pgid, "pid": pgid, "start_time": t, "token": token}
        for pgid, (t, token) in live.items()
    ]
    _reap(entries, float(grace), invocation)
    if engine and labels:
        # Only now, and only with an engine: a sweep without containers imports none of it.
        from batch.processes.containers import remove_labels, run_now

        run_now(remove_labels(ContainerSpec(engine, float(stop_timeout)), labels))


def _stamp(live: dict[int, tuple[float | None, str]], unstamped: set[int]) -> None:
    """Read the start time of every group in ``unstamped`` (then empty) into ``live``."""
    for pgid in unstamped:
        live[pgid] = (start_time(pgid), live[pgid][1])
    unstamped.clear()


# --- leftovers of a dead driver -----------------------------------------------------------


@attrs.frozen
class Reaped:
    """What :func:`reap_leftovers` did: groups stopped, escaped processes killed, and
    recorded groups left alone because nothing proved them ours (pgid → why)."""

    groups: list[int] = attrs.field(factory=list)
    escaped: list[int] = attrs.field(factory=list)
    left_alone: dict[int, str] = attrs.field(factory=dict)


def reap_leftovers(batch_dir: Path, grace: float = 10.0) -> Reaped:
    """Stop the job processes a dead driver of ``batch_dir`` left running.

    Reads ``batch-logs/pgids.json`` (``{"token": ..., "groups": [...]}``). A recorded group
    is stopped (SIGTERM, ``grace``, SIGKILL) only when it is provably that invocation's job
    (see the module docstring); then every process still carrying one of its tokens is
    killed. A group that cannot be verified (a stale file after a reboot, an entry without
    a token, a pid since reused) is never signalled, only reported in ``left_alone``.
    """
    try:
        state = jsonio.loads(read_bytes(batch_dir / LOGS_DIR / PGIDS))
    except (OSError, ValueError):
        return Reaped()
    if isinstance(state, list):  # the format before tokens: nothing in it can be verified
        state = {"token": None, "groups": state}
    if not isinstance(state, dict) or not isinstance(state.get("groups"), list):
        return Reaped()
    invocation = state.get("token") if isinstance(state.get("token"), str) else None
    entries = [e for e in state["groups"] if _is_entry(e)]
    return _reap(entries, grace, invocation)


def _is_entry(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("pgid"), int)
        and isinstance(entry.get("pid"), int)
        and entry["pgid"] > 1
        and isinstance(entry.get("start_time"), float | int | None)
    )


def why_not_ours(entry: Mapping[str, Any]) -> str | None:
    """None when group ``entry["pgid"]`` is provably the recorded job's; else why not."""
    pgid, pid, recorded = entry["pgid"], entry["pid"], entry.get("start_time")
    token = entry.get("token")
    if not isinstance(token, str) or not token:
        return "no job token recorded"
    try:
        leader = psutil.Process(pid)
        if leader.status() != psutil.STATUS_ZOMBIE:
            if recorded is None or abs(leader.create_time() - recorded) >= _SAME_START:
                return f"pid {pid} started at another time"
            if os.getpgid(pid) != pgid:
                return f"pid {pid} is not in group {pgid}"
            if carried_token(pid) != token:
                return f"pid {pid} does not carry the job's token"
            return None
    except (OSError, psutil.Error):
        pass
    # The leader is gone. Members left behind keep the pgid's number reserved, so a member
    # carrying the token proves the group is still the recorded job's.
    members = live_members(pgid)
    if not members:
        return "gone"
    if any(carried_token(member.pid) == token for member in members):
        return None
    return "no member carries the job's token"


def _reap(entries: Sequence[Mapping[str, Any]], grace: float, invocation: str | None) -> Reaped:
    targets, left_alone = [], {}
    for entry in entries:
        why = why_not_ours(entry)
        if why is None:
            targets.append(entry["pgid"])
        elif why != "gone":
            left_alone[entry["pgid"]] = why
    for pgid in targets:
        signal_group(pgid, signal.SIGTERM)
    carriers = list(token_carriers(invocation)) if invocation else []
    escaped = [pid for pid in carriers if _pgid(pid) not in targets]
    for pid in carriers:
        signal_pid(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    pending, pending_pids = targets, carriers
    while (pending or pending_pids) and time.monotonic() < deadline:
        time.sleep(POLL)
        pending = [pgid for pgid in pending if live_members(pgid)]
        pending_pids = [pid for pid in pending_pids if carried_token(pid) is not None]
    for pgid in pending:
        signal_group(pgid, signal.SIGKILL)
    if invocation:
        kill_carriers(invocation)
    return Reaped(targets, escaped, left_alone)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None
