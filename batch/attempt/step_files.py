"""The files of a multi-step job's run dir: what each step changed, reused files, the log.

``batch.attempt.steps`` runs the steps; this module is what it does with their files:

- :func:`tree_state` / :func:`changed_paths`: a snapshot of the run dir before and after a
  step, and the paths the step created or changed (its record's ``files``);
- :func:`link_files` / :func:`copy_log_prefix`: step-level resume brings a reused step's
  files (hard links where possible, copies otherwise) and its part of ``output.log`` into
  the new run dir;
- small helpers on the job's ``output.log`` and ``result.json`` that never raise, which
  ``batch.attempt.run_command`` uses for every command, a step or a single-command job.

The driver's own files (``output.log``, ``run-meta.json``) are never a step's files.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import attrs

from batch.attempt.classify import ResultFile
from batch.layout import OUTPUT_LOG
from batch.sweep.secrets import Redactor, read_end
from run_support.results import RESULT_JSON, RUN_META
from run_support.safe_files import (
    MAX_RECORD_BYTES,
    append_text,
    open_append_fd,
    open_fd,
    read_bytes,
)

#: A step that touches more paths than this records ``files: null`` (the record stays small).
MAX_FILES = 500
#: Log patterns are looked for in this much of the end of ``output.log``.
LOG_TAIL_BYTES = 1 << 20
#: A larger ``result.json`` is an unreadable result, not read (``/dev/zero`` never ends).
MAX_RESULT_BYTES = MAX_RECORD_BYTES
#: Files in a run dir that the driver writes, not a step.
_DRIVER_FILES = (OUTPUT_LOG, RUN_META)


# --- what a step changed ---------------------------------------------------------------------


@attrs.frozen
class TreeState:
    files: dict[str, tuple[int, int, int]]
    dirs: frozenset[str]


def tree_state(run_dir: Path) -> TreeState:
    """Every file under the run dir (but the driver's own) with what tells a change."""
    files: dict[str, tuple[int, int, int]] = {}
    dirs: set[str] = set()
    for top, subdirs, names in os.walk(run_dir):
        rel = os.path.relpath(top, run_dir)
        prefix = "" if rel == "." else rel + "/"
        dirs.update(prefix + name for name in subdirs)
        for name in names:
            if not prefix and name in _DRIVER_FILES:
                continue
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(top, name))
                files[prefix + name] = (st.st_mtime_ns, st.st_size, st.st_ino)
    return TreeState(files, frozenset(dirs))


def changed_paths(before: TreeState, after: TreeState) -> list[str] | None:
    """Paths a step created or changed; a directory it created counts as one path.

    None when there are more than :data:`MAX_FILES`.
    """
    touched = [path for path, key in after.files.items() if before.files.get(path) != key]
    touched.extend(after.dirs - before.dirs)
    found: set[str] = set()
    for path in touched:
        parts = path.split("/")
        top = path
        for n in range(1, len(parts)):
            prefix = "/".join(parts[:n])
            if prefix not in before.dirs:
                top = prefix
                break
        found.add(top)
    return sorted(found) if len(found) <= MAX_FILES else None


# --- reused steps' files and log -------------------------------------------------------------


def link_files(old_dir: Path, new_dir: Path, paths: Sequence[str] | None) -> None:
    """Hard-link ``paths`` (files or whole directories) from ``old_dir`` into ``new_dir``,
    copying where a link is impossible. ``None``: everything but the driver's own files."""
    if paths is None:
        paths = [name for name in os.listdir(old_dir) if name not in _DRIVER_FILES]
    for rel in paths:
        parts = Path(rel).parts
        if not parts or Path(rel).is_absolute() or ".." in parts:
            continue  # a record naming a path outside its run dir is not followed
        source = old_dir / rel
        if source.is_dir() and not source.is_symlink():
            for top, _, names in os.walk(source):
                target = new_dir / os.path.relpath(top, old_dir)
                target.mkdir(parents=True, exist_ok=True)
                for name in names:
                    _link_or_copy(Path(top) / name, target / name)
        elif os.path.lexists(source):
            (new_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            _link_or_copy(source, new_dir / rel)


def _link_or_copy(source: Path, target: Path) -> None:
    if os.path.lexists(target):
        return
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError:  # another filesystem, no link support, too many links
        shutil.copy2(source, target, follow_symlinks=False)


def copy_log_prefix(source: Path, target: Path, end: object) -> None:
    """The first ``end`` bytes of the old log: the reused steps' output, nothing after."""
    if not isinstance(end, int) or end <= 0:
        return
    with open(open_fd(source, os.O_RDONLY), "rb") as src, open(open_append_fd(target), "ab") as dst:
        remaining = end
        while remaining > 0:
            chunk = src.read(min(remaining, 1 << 20))
            if not chunk:
                break
            dst.write(chunk)
            remaining -= len(chunk)


# --- small file helpers: none of them raises -------------------------------------------------


def read_result(run_dir: Path) -> ResultFile:
    """The bytes of ``run_dir/result.json``; None if there is none, the OSError if unreadable."""
    try:
        return read_bytes(run_dir / RESULT_JSON, MAX_RESULT_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc


def stat_key(path: Path) -> tuple[int, int, int] | None:
    """What tells that a file changed (mtime, size, inode); None when it is not there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def file_size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def read_log_from(path: Path, offset: int = 0) -> str:
    """The log from ``offset`` on (its last :data:`LOG_TAIL_BYTES` at most) as text."""
    try:
        with open(open_fd(path, os.O_RDONLY), "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(offset, size - LOG_TAIL_BYTES))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


#: The last line of a log is looked for in this much of its end.
LAST_LINE_BYTES = 8192


def read_log_end(path: Path, redact: Redactor, offset: int = 0) -> str:
    """The last :data:`LAST_LINE_BYTES` of the log from ``offset`` on, as text ("" if
    none), redacted with what comes before them (``batch.sweep.secrets.read_end``)."""
    try:
        with open(open_fd(path, os.O_RDONLY), "rb") as handle:
            return read_end(handle, LAST_LINE_BYTES, redact, offset=offset)[0]
    except OSError:
        return ""


def append_log(path: Path, text: str) -> str:
    """Append a driver line to the job's log; returns the text (without its newline)."""
    with contextlib.suppress(OSError):
        append_text(path, text)
    return text.strip()
