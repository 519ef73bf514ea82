"""Which file a job's command name runs: a PATH search made once per invocation."""

from __future__ import annotations

import os
from collections.abc import Mapping


class ProgramCache:
    """Which file a command name runs, per PATH, found once per invocation.

    ``Popen`` of a name without a slash tries ``execve`` in each directory of the job's
    PATH in turn, in the child, on every spawn: with the usual PATH (a venv, ``~/.local``,
    ``/usr/local``...) ``true`` cost several failed ``execve`` calls per job, while the
    vfork'd child holds the driver (bench/overhead.py). The search's answer is the first
    directory holding an executable regular file of that name (every earlier candidate
    fails with ENOENT, ENOTDIR or EACCES); that file is found here once per command name
    and PATH, and passed as ``Popen``'s ``executable`` (``argv[0]`` is unchanged). Not
    found, or a relative directory (the job's cwd would decide) before the match: no
    entry, the spawn searches as before. A found file that then fails to start is
    forgotten and the spawn searches again (:func:`spawn_to`).
    """

    def __init__(self) -> None:
        self._found: dict[tuple[str, str | None], str] = {}

    def find(self, name: str, env: Mapping[str, str]) -> str | None:
        """The file a PATH search in ``env`` runs for ``name``; None: let the spawn search."""
        if not name or "/" in name:
            return None  # run as given, relative to the job's cwd: no search
        key = (name, env.get("PATH"))
        found = self._found.get(key)
        if found is None:
            found = _search(name, env)
            if found is not None:
                self._found[key] = found
        return found

    def forget(self, name: str, env: Mapping[str, str]) -> None:
        self._found.pop((name, env.get("PATH")), None)


def _search(name: str, env: Mapping[str, str]) -> str | None:
    for directory in os.get_exec_path(env):  # what Popen itself searches
        if not os.path.isabs(directory):
            return None
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None
