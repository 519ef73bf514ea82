"""Find and read every ``run-meta.json`` of a batch dir, fast, with a cache that is never stale.

A batch dir holds one record per run at ``<model_dir>/<run_dir>/run-meta.json``. Parsing
100,000 of them costs seconds; most are unchanged since the last look. The cache
(``run_support.ledger_cache``) keeps what each record was read as beside its stat signature
(inode, size, mtime, ctime); a record is taken from it only when its signature now is
exactly the cached one. A record whose ctime is within ``RACY_WINDOW_NS`` of the moment a
read began is never cached by that read, because a rewrite in the same clock tick could
keep the same signature (git's "racy clean" problem). ctime cannot be set by ``os.utime``,
so a file rewritten in place is always seen on the next read. On a filesystem that numbers
inodes per mount (sshfs: ``run_support.filesystems``) a read caches inode 0 and matches
such a row on the rest of the signature, so that a remount still serves from it; what that
trusts is in ``docs/ledger.md``, "On a network filesystem".

Nothing here depends on the cache for an answer: without one, or with one that fails part
way, every record is read from its file.
"""

from __future__ import annotations

import errno
import itertools
import math
import operator
import os
import time
from collections.abc import Callable
from pathlib import Path
from stat import S_ISREG
from typing import Any

import attrs

from run_support import jsonio, safe_files
from run_support.ledger_cache import Cache, stored
from run_support.ledger_fstat import DirStats, Stats, stat_dir
from run_support.names import LOGS_DIR, RUN_META
from run_support.run_meta import (
    FIELD_NAMES,
    FIELDS,
    OUTCOMES,
    fields_of,
    run_meta_from_dict,
)

RACY_WINDOW_NS = 2_000_000_000
#: Larger records are read every time rather than cached.
MAX_CACHED_BYTES = 1 << 20
#: Top-level directories that hold driver files, not runs.
NOT_MODEL_DIRS = frozenset({LOGS_DIR})

#: A record read: its RunMeta fields in declaration order (``run_dir`` None: where it was
#: found is the caller's), or None with the reason it could not be used.
Fields = tuple[Any, ...]
_RUN_DIR = FIELD_NAMES.index("run_dir")
_AT = {name: i for i, name in enumerate(FIELD_NAMES)}
_NONE = type(None)
_signature = operator.itemgetter(1, 2, 3, 4)


@attrs.define
class ModelDirRecords:
    """The records of one model dir, in run dir name order (three parallel lists).

    For each run dir exactly one of ``values[i]`` (the record's fields) and ``errors[i]``
    (why the record could not be used) is None.
    """

    model_dir: str
    run_dirs: list[str] = attrs.Factory(list)
    values: list[Fields | None] = attrs.Factory(list)
    errors: list[str | None] = attrs.Factory(list)


@attrs.define
class ScanTotals:
    """What a whole read found besides the records."""

    #: Run dirs (relative to the batch dir) that have no ``run-meta.json``.
    incomplete: list[str] = attrs.Factory(list)
    #: How many records were parsed; the others came from the cache.
    parsed: int = 0


def read_record(path: str) -> tuple[Fields | None, str | None]:
    """One record's fields as the reader makes them, or None and why it cannot be used."""
    try:
        data = safe_files.read_bytes(path, safe_files.MAX_RUN_META_BYTES)
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"
    if not data.strip():
        return None, "empty file"
    try:
        raw = jsonio.loads(data)
    except ValueError as exc:
        return None, f"not valid JSON (truncated?): {exc}"
    try:
        return fields_from(raw), None
    except ValueError as exc:
        return None, str(exc)


def fields_from(raw: Any) -> Fields:
    """The fields of a parsed record, ``run_dir`` left out (raises ``InvalidRecord``)."""
    fields = list(fields_of(run_meta_from_dict(raw)))
    fields[_RUN_DIR] = None
    return tuple(fields)


def model_dirs(batch_dir: Path) -> list[str] | None:
    """The batch dir's subdirectories (hidden ones left out); None if it is not a dir."""
    try:
        with os.scandir(batch_dir) as entries:
            return sorted(e.name for e in entries if e.name[0] != "." and e.is_dir())
    except (FileNotFoundError, NotADirectoryError):
        return None


def scan(
    batch_dir: Path,
    cache: Cache | None,
    stats: Stats,
    each: Callable[[ModelDirRecords], None],
    *,
    by_path: bool,
) -> ScanTotals:
    """Read every ``*/*/run-meta.json`` under ``batch_dir`` (hidden names skipped, like
    glob), handing ``each`` one model dir's records at a time, in name order; the cache
    (None: none) serves every record whose stat is unchanged and takes every record read."""
    totals = ScanTotals()
    top = model_dirs(batch_dir)
    if top is None:
        return totals
    # Taken before any record is statted, as the racy rule needs.
    cacheable_before = time.time_ns() - RACY_WINDOW_NS
    for model_dir in top:
        found = stat_dir(batch_dir, model_dir, stats)
        if found is None:
            continue
        rows = cache.rows(model_dir) if cache is not None else None
        records, writes, gone, parsed = _scan_model_dir(
            batch_dir, model_dir, found, _usable(rows), cacheable_before, totals.incomplete,
            by_path=by_path,
        )  # fmt: skip
        del rows, found
        totals.parsed += parsed
        if cache is not None:
            cache.write(model_dir, writes, gone)
        del writes
        each(records)
    if cache is not None:
        cache.keep_only(top)
    return totals


def _usable(rows: list[tuple[Any, ...]] | None) -> list[tuple[Any, ...]]:
    """The cached rows of a model dir when every one is well formed, else none: a cache is
    trusted no more than the records it stands for, so a row no record could give (a forged
    one, another shape) makes the reader read that dir's records afresh."""
    if not rows:
        return []
    records = [row for row in rows if row[5] is None]
    if len(records) != len(rows) and not all(
        type(row[5]) is str and all(value is None for value in row[6:])
        for row in rows
        if row[5] is not None
    ):
        return []
    columns = list(zip(*(row[:5] for row in rows), strict=True))
    if set(map(type, columns[0])) != {str} or set(
        map(type, itertools.chain.from_iterable(columns[1:]))
    ) != {int}:
        return []
    return rows if rows_are_records(records, offset=6) else []


def rows_are_records(rows: list[tuple[Any, ...]], offset: int = 0) -> bool:
    """Whether every row holds, from ``offset`` on, what :func:`run_meta_from_dict` makes
    of some record, field by field (``run_dir`` None: where it was found is not cached):
    each field's type, a known outcome, an identity of non-empty text, an attempt and a
    repeat of at least 1, a finite duration. A column at a time, in C: the distinct types of
    a column (one or two) are what is checked, not each row."""
    if not rows:
        return True
    columns = list(zip(*rows, strict=True))
    if len(columns) != offset + len(FIELDS):
        return False
    for field, column in zip(FIELDS, columns[offset:], strict=True):
        kinds = {_NONE} if field.name == "run_dir" else field.kinds
        if not set(map(type, column)) <= kinds:
            return False
    at = offset
    identities = columns[at + _AT["test_case"]] + columns[at + _AT["model"]]
    attempts = set(columns[at + _AT["attempt"]]) - {None}
    return (
        set(columns[at + _AT["outcome"]]) <= OUTCOMES
        and all(identities)
        and ("".join(identities).isascii() or all(map(jsonio.is_text, identities)))
        and (not attempts or min(attempts) >= 1)
        and min(columns[at + _AT["repeat"]]) >= 1
        and all(map(math.isfinite, columns[at + _AT["duration_seconds"]]))
    )


def _scan_model_dir(
    batch_dir: Path,
    model_dir: str,
    found: DirStats,
    rows: list[tuple[Any, ...]],
    cacheable_before: int,
    incomplete: list[str],
    *,
    by_path: bool,
) -> tuple[ModelDirRecords, list[tuple[Any, ...]], list[str], int]:
    """One model dir's records, the rows to cache, the cached run dirs to forget, and how
    many records were parsed.

    ``by_path``: the dir is on a filesystem whose inodes hold only within one mount. There
    a row this reader caches has inode 0, and one with inode 0 is matched on its size, mtime
    and ctime; a row with an inode (a writer's, taken in the writer's mount) is matched on
    it as anywhere else, and cached again keyed by path once it may be.
    """
    names = found.names
    if not found.failed and [row[0] for row in rows] == names:
        inodes = [0] * len(names) if by_path else found.inodes
        now = list(zip(inodes, found.sizes, found.mtimes, found.ctimes, strict=True))
        if now == list(map(_signature, rows)):
            # The usual case on a resume: the cache serves every record as it is.
            records = ModelDirRecords(
                model_dir,
                list(names),
                [row[6:] if row[5] is None else None for row in rows],
                [row[5] for row in rows],
            )
            return records, [], [], 0
    cached = {row[0]: row for row in rows}
    records = ModelDirRecords(model_dir)
    run_dirs, values, errors = records.run_dirs, records.values, records.errors
    writes: list[tuple[Any, ...]] = []
    gone: list[str] = []
    parsed = 0
    columns = zip(
        names, found.inodes, found.sizes, found.mtimes, found.ctimes, found.modes, strict=True
    )
    for position, (run_dir, ino, size, mtime, ctime, mode) in enumerate(columns):
        row = cached.pop(run_dir, None)
        failed = found.failed.get(position)
        if failed is not None:
            if failed != errno.ENOTDIR and model_dir not in NOT_MODEL_DIRS:
                incomplete.append(f"{model_dir}/{run_dir}")
            if row is not None:
                gone.append(run_dir)
            continue
        signature = (ino, size, mtime, ctime)
        cacheable = ctime < cacheable_before and size <= MAX_CACHED_BYTES
        keep = (0, size, mtime, ctime) if by_path else signature
        value: Fields | None
        if row is not None and (
            _signature(row) == signature or (by_path and row[1] == 0 and row[2:5] == keep[1:])
        ):
            value, error = (row[6:], None) if row[5] is None else (None, row[5])
            if by_path and row[1] != 0 and cacheable:
                write = stored(model_dir, run_dir, keep, value, error)
                if write is not None:
                    writes.append(write)
        else:
            if not S_ISREG(mode):
                # A FIFO or device would block or flood the read; a record is only a file.
                value, error = None, "not a regular file"
            else:
                value, error = read_record(f"{batch_dir}/{model_dir}/{run_dir}/{RUN_META}")
                parsed += 1
            write = stored(model_dir, run_dir, keep, value, error) if cacheable else None
            if write is not None:
                writes.append(write)
            elif row is not None:
                gone.append(run_dir)
        run_dirs.append(run_dir)
        values.append(value)
        errors.append(error)
    gone.extend(cached)  # run dirs removed since they were cached
    return records, writes, gone, parsed
