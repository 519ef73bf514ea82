"""Where a sweep invocation writes: creating a new batch dir, finding the one to resume."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from batch.naming import safe_name
from batch.summary import SUMMARY_NAME
from run_support.results import RUN_META

_STAMP = re.compile(r"-(\d{8}T\d{6}Z)(?:-\d+)?$")
LOGS = "batch-logs"
SNAPSHOT = "sweep.yaml"


class BatchDirError(Exception):
    """No batch dir to resume, or the one named is not a batch dir."""


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
        (candidate / LOGS).mkdir()
        return candidate
    raise BatchDirError(f"{output}: cannot create a batch dir named {base}")


def is_batch_dir(path: Path) -> bool:
    """True when ``path`` holds what a driver leaves in a batch dir, or run records laid
    out as one (``<model>/<run>/run-meta.json``, e.g. another harness's).

    Resuming anything else (the output root, a typo'd parent) would write a summary and
    model dirs into a directory that is not a batch.
    """
    if any((path / name).exists() for name in (SUMMARY_NAME, SNAPSHOT, LOGS)):
        return True
    return next(path.glob(f"*/*/{RUN_META}"), None) is not None


def newest_batch_dir(output: Path, sweep_name: str | None) -> Path | None:
    """The most recently started batch dir of this sweep under ``output``, if any."""
    prefix = batch_prefix(sweep_name)
    found: list[tuple[str, str, Path]] = []
    try:
        entries = list(output.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return None
    for entry in entries:
        match = _STAMP.search(entry.name)
        if entry.name.startswith(prefix) and match and entry.is_dir():
            found.append((match.group(1), entry.name, entry))
    return max(found)[2] if found else None


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
                f"{resume}: not a batch dir (no {SUMMARY_NAME}, {SNAPSHOT} or {LOGS}/){hint}"
            )
        return path
    newest = newest_batch_dir(output, sweep_name)
    if newest is None:
        raise BatchDirError(
            f"{output}: no batch dir to resume (expected {batch_prefix(sweep_name)}<stamp>/)"
        )
    return newest
