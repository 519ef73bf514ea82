"""Find and parse every ``run-meta.json`` of a batch dir, fast, with a cache that is never stale.

A batch dir holds one record per run at ``<model_dir>/<run_dir>/run-meta.json``. Parsing
100,000 of them costs seconds; most are unchanged since the last look. The index
(``.ledger-index`` in the batch dir) keeps each record's parsed JSON beside its stat
signature (inode, size, mtime, ctime); a record is taken from the index only when its
signature is unchanged. A record whose ctime is within ``RACY_WINDOW_NS`` of the moment the
index was built is never cached, because a rewrite in the same clock tick could keep the
same signature (git's "racy clean" problem). ctime cannot be set by ``os.utime``, so a file
rewritten in place is always seen on the next call.

The index is an optimisation only: an unreadable, foreign or unwritable index is ignored.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

import attrs

from run_support import jsonio
from run_support.atomic import atomic_write_bytes

RUN_META = "run-meta.json"
INDEX_NAME = ".ledger-index"
INDEX_SCHEMA = 1
RACY_WINDOW_NS = 2_000_000_000
#: Larger records are re-read every time rather than copied into the index.
MAX_CACHED_BYTES = 1 << 20
#: Top-level directories that hold driver files, not runs.
NOT_MODEL_DIRS = frozenset({"batch-logs"})


@attrs.define
class LedgerFiles:
    """Every record file found: ``(relative path, parsed JSON or None, error or None)``."""

    files: list[tuple[str, Any, str | None]] = attrs.Factory(list)
    #: Run dirs (relative paths) that have no ``run-meta.json``.
    incomplete: list[str] = attrs.Factory(list)


def _signature(st: os.stat_result) -> list[int]:
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _parse(path: str) -> tuple[Any, str | None]:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"
    if not data.strip():
        return None, "empty file"
    try:
        return jsonio.loads(data), None
    except ValueError as exc:
        return None, f"not valid JSON (truncated?): {exc}"


def _load_index(path: Path) -> dict[str, list[Any]]:
    try:
        index = jsonio.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(index, dict) or index.get("schema") != INDEX_SCHEMA:
        return {}
    entries = index.get("entries")
    return entries if isinstance(entries, dict) else {}


def _save_index(path: Path, entries: dict[str, list[Any]]) -> None:
    # A read-only batch dir (someone else's, an archive) still reads, just uncached.
    with contextlib.suppress(OSError):
        atomic_write_bytes(
            path, jsonio.dumps({"schema": INDEX_SCHEMA, "entries": entries}), fsync=False
        )


def read_ledger_files(
    batch_dir: Path, *, use_index: bool = True, update_index: bool = True
) -> LedgerFiles:
    """Read every ``*/*/run-meta.json`` under ``batch_dir`` (hidden names skipped, like glob).

    ``update_index=False`` still reads the index but never writes it, for commands that
    promise to change nothing on disk (``batch plan``, ``batch status``).
    """
    found = LedgerFiles()
    try:
        top = sorted(e.name for e in os.scandir(batch_dir) if e.is_dir() and e.name[0] != ".")
    except (FileNotFoundError, NotADirectoryError):
        return found

    index_path = batch_dir / INDEX_NAME
    cached = _load_index(index_path) if use_index else {}
    racy_after = time.time_ns() - RACY_WINDOW_NS
    kept: dict[str, list[Any]] = {}
    changed = False
    base = os.fspath(batch_dir)

    for model_dir in top:
        try:
            runs = sorted(e.name for e in os.scandir(os.path.join(base, model_dir)) if e.is_dir())
        except OSError:
            continue
        for run_dir in runs:
            if run_dir[0] == ".":
                continue
            rel = f"{model_dir}/{run_dir}/{RUN_META}"
            path = os.path.join(base, rel)
            try:
                st = os.stat(path)
            except OSError:
                if model_dir not in NOT_MODEL_DIRS:
                    found.incomplete.append(f"{model_dir}/{run_dir}")
                continue
            signature = _signature(st)
            entry = cached.get(rel)
            fresh = entry is not None and entry[:4] == signature
            raw, error = (entry[4], entry[5]) if fresh else _parse(path)
            found.files.append((rel, raw, error))
            if use_index and st.st_ctime_ns < racy_after and st.st_size <= MAX_CACHED_BYTES:
                kept[rel] = [*signature, raw, error]
                changed = changed or not fresh

    if use_index and update_index and (changed or len(kept) != len(cached)):
        _save_index(index_path, kept)
    return found
