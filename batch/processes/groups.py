"""Two primitives over processes the driver did not keep a handle on: signal a whole process
group, and read one variable of a process's environment (how a job's token is found).

Below both the watchdog (``batch.processes.watchdog``) and the container removal
(``batch.processes.containers``), which each use them, so neither imports the other.
"""

from __future__ import annotations

import os


def carried(pid: int, item: bytes) -> str | None:
    """The value of ``item`` (``b"NAME="``) in process ``pid``'s environment, as
    :func:`carried_token` reads the token."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read()
    except OSError:
        return None
    # The first NAME=value item wanted, found without splitting the environment: an escape
    # sweep reads every process's.
    if environ.startswith(item):
        start = len(item)
    else:
        at = environ.find(b"\0" + item)
        if at < 0:
            return None
        start = at + 1 + len(item)
    end = environ.find(b"\0", start)
    return environ[start : None if end < 0 else end].decode(errors="replace")


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
