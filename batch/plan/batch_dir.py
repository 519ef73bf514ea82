"""Where a sweep invocation writes: creating a new batch dir, finding the one to resume."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from batch.errors import BatchDirError
from batch.layout import (
    LOGS_DIR,
    MAX_SNAPSHOT_BYTES,
    RUN_META,
    SNAPSHOT,
    SNAPSHOT_HISTORY_GLOB,
    SUMMARY_NAME,
    safe_name,
)
from run_support.safe_files import open_reader, read_bytes

#: The top-level ``name:`` line of a snapshot, which :func:`sweep_snapshot` writes first.
_NAME_LINE = re.compile(r"name:[ \t]")
#: How much of a snapshot's start is searched for that line.
_HEAD_BYTES = 1 << 16
_NAME_WITHIN = 64


def batch_prefix(sweep_name: str | None) -> str:
    """Batch dirs of one sweep share this prefix, so ``--resume`` never picks another's."""
    return f"{safe_name(sweep_name)}-" if sweep_name else "batch-"


def output_root_problem(output: Path) -> str | None:
    """Why batch dirs cannot go under ``output`` because of what is already there, or None.

    A file where the output root (or one of its parents) should be is the user's mistake in
    ``-o`` or ``output:``, found before anything is written; other write failures (no
    permission, disk full) are only found by trying.
    """
    for path in (output, *output.parents):
        if path.is_dir():
            return None
        if path.exists():
            what = "not a directory" if path == output else f"{path} is not a directory"
            return f"output root {output}: {what}"
    return None


def create_batch_dir(output: Path, sweep_name: str | None, now: datetime | None = None) -> Path:
    """A new, empty batch dir ``<prefix><UTC stamp>`` (``-2``, ``-3``… on a same-second clash)."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    output.mkdir(parents=True, exist_ok=True)
    base = f"{batch_prefix(sweep_name)}{stamp}"
    for n in range(1, 1000):
        candidate = output / (base if n == 1 else f"{base}-{n}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        (candidate / LOGS_DIR).mkdir()
        return candidate
    raise BatchDirError(f"{output}: cannot create a batch dir named {base}")


def is_batch_dir(path: Path) -> bool:
    """True when ``path`` holds what a driver leaves in a batch dir, or run records laid
    out as one (``<model>/<run>/run-meta.json``, e.g. another harness's).

    Resuming anything else (the output root, a typo'd parent) would write a summary and
    model dirs into a directory that is not a batch.
    """
    if any((path / name).exists() for name in (SUMMARY_NAME, SNAPSHOT, LOGS_DIR)):
        return True
    return next(path.glob(f"*/*/{RUN_META}"), None) is not None


#: Any sweep's batch dir name: ``<prefix><YYYYmmddTHHMMSSZ>[-<n>]``.
_ANY_BATCH_DIR = re.compile(r".+-(\d{8}T\d{6}Z)(?:-([1-9]\d{0,8}))?")
#: How many batch dirs a "not a batch dir" message names.
_NAMED = 5


def batch_dirs_inside(path: Path) -> list[Path]:
    """The batch dirs of any sweep directly inside ``path`` (an output root), newest first."""
    try:
        entries = list(path.iterdir())
    except OSError:
        return []
    found = []
    for entry in entries:
        match = _ANY_BATCH_DIR.fullmatch(entry.name)
        if match and entry.is_dir() and is_batch_dir(entry):
            found.append(((match.group(1), int(match.group(2) or 1)), entry))
    return [entry for _, entry in sorted(found, reverse=True)]


def not_a_batch_dir(path: Path) -> str | None:
    """Why the directory ``path`` is no batch dir to read, naming the batch dirs inside it
    (newest first) when it is an output root; None when it is a batch dir.

    ``batch status runs/`` would otherwise count the model dirs of nothing as incomplete
    runs, and ``stats``/``report`` would say only that there is no summary.
    """
    if is_batch_dir(path):
        return None
    inside = batch_dirs_inside(path)
    if not inside:
        return (
            f"{path}: not a batch dir (no {SUMMARY_NAME}, {SNAPSHOT}, {LOGS_DIR}/ or run records)"
        )
    named = ", ".join(str(p) for p in inside[:_NAMED])
    more = f" and {len(inside) - _NAMED} more" if len(inside) > _NAMED else ""
    return f"{path}: not a batch dir; the batch dirs in it, newest first: {named}{more}"


def batch_dir_order(name: str, sweep_name: str | None) -> tuple[str, int] | None:
    """The sort key of a batch dir of this sweep named ``name``: its stamp, then its
    same-second counter as a number (so ``-11`` is newer than ``-9``); None when ``name`` is
    not ``<prefix><YYYYmmddTHHMMSSZ>[-<n>]`` exactly.

    The whole name is matched, not a prefix: ``big-v2-<stamp>`` belongs to sweep ``big-v2``,
    never to ``big``.
    """
    pattern = re.escape(batch_prefix(sweep_name)) + r"(\d{8}T\d{6}Z)(?:-([1-9]\d{0,8}))?"
    match = re.fullmatch(pattern, name)
    if match is None:
        return None
    return match.group(1), int(match.group(2) or 1)


def recorded_sweep_name(batch_dir: Path) -> tuple[bool, str | None]:
    """``(True, name)`` when the batch dir's snapshot records the sweep's ``name`` (None for
    an unnamed sweep); ``(False, None)`` when there is no readable snapshot to ask.

    Only the snapshot's top-level ``name:`` line is read, among its first lines: the lookup
    must stay fast beside snapshots listing thousands of cases.
    """
    path = batch_dir / SNAPSHOT
    try:
        # A FIFO in its place must not hang the lookup, nor a symlink lead elsewhere.
        with open_reader(path) as handle:
            head = handle.read(_HEAD_BYTES).decode("utf-8", errors="replace")
            for line in islice(head.splitlines(keepends=True), _NAME_WITHIN):
                if _NAME_LINE.match(line):
                    value = YAML(typ="safe", pure=True).load(line)["name"]
                    return True, None if value is None else str(value)
    except (OSError, YAMLError, TypeError, KeyError):
        pass
    return False, None


def belongs_to(batch_dir: Path, sweep_name: str | None) -> bool:
    """True when ``batch_dir`` is named as a batch dir of this sweep and, where it records
    one, its snapshot names this same sweep (two names can share a safe name)."""
    if batch_dir_order(batch_dir.name, sweep_name) is None:
        return False
    recorded, name = recorded_sweep_name(batch_dir)
    return not recorded or name == sweep_name


def newest_batch_dir(output: Path, sweep_name: str | None) -> Path | None:
    """The most recently started batch dir of this sweep under ``output``, if any."""
    try:
        entries = list(output.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return None
    found: list[tuple[tuple[str, int], Path]] = []
    for entry in entries:
        order = batch_dir_order(entry.name, sweep_name)
        if order is not None and entry.is_dir():
            found.append((order, entry))
    for _, candidate in sorted(found, reverse=True):
        if belongs_to(candidate, sweep_name):
            return candidate
    return None


def latest_snapshot(batch_dir: Path) -> tuple[Path, str] | None:
    """The snapshot of the sweep the batch last ran and its text: the newest
    ``batch-logs/sweep-<stamp>.yaml`` a resume under a changed sweep added, else
    ``sweep.yaml``; None when there is none to read."""
    history = sorted((batch_dir / LOGS_DIR).glob(SNAPSHOT_HISTORY_GLOB), reverse=True)
    for path in (*history, batch_dir / SNAPSHOT):
        try:
            # A FIFO, device or symlink in its place is no snapshot: never read, never hangs.
            return path, read_bytes(path, MAX_SNAPSHOT_BYTES).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    return None


def resolve_resume_dir(resume: str, output: Path, sweep_name: str | None) -> Path:
    """The batch dir ``--resume [DIR]`` means: DIR, or the newest under the output root."""
    if resume:
        path = Path(resume)
        if not path.is_dir():
            raise BatchDirError(f"{resume}: no such batch dir")
        if not is_batch_dir(path):
            newest = newest_batch_dir(path, sweep_name)
            hint = f"; did you mean {newest}?" if newest is not None else ""
            raise BatchDirError(
                f"{resume}: not a batch dir (no {SUMMARY_NAME}, {SNAPSHOT} or {LOGS_DIR}/){hint}"
            )
        return path
    newest = newest_batch_dir(output, sweep_name)
    if newest is None:
        raise BatchDirError(
            f"{output}: no batch dir to resume (expected {batch_prefix(sweep_name)}<stamp>/)"
        )
    return newest


#: A file given where a batch dir is expected, with one of these endings, is a sweep file
#: to look the batch dir up by (``batch status``, ``batch view``).
SWEEP_SUFFIXES = (".yaml", ".yml", ".json")


def is_sweep_file(path: Path) -> bool:
    return path.is_file() and path.suffix in SWEEP_SUFFIXES


def newest_of_sweep(sweep_path: Path, output: Path, name: str | None) -> Path:
    """The newest batch dir of the sweep at ``sweep_path`` (its ``output`` and ``name``),
    the one ``--resume`` would take; :class:`~batch.errors.UsageError` when there is none."""
    from batch.errors import UsageError

    newest = newest_batch_dir(output, name)
    if newest is None:
        raise UsageError(f"{sweep_path}: no batch dir of this sweep under {output} yet")
    return newest
