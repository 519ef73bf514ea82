"""The ledger of one batch dir as its readers see it: :class:`Ledger`, the one handle that
the planner, ``batch status``, ``batch stats`` and the driver read it through.

A handle owns what a read needs beyond the files: the cache database
(``run_support.ledger_cache``) and the threads that take cold stats
(``run_support.ledger_fstat``). It hands out the newest record per (case, model, repeat),
whole (:meth:`Ledger.load`) or a model dir at a time (:meth:`Ledger.read_blocks`); the
scan that decides what the cache may serve is ``run_support.ledger_scan``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from run_support.filesystems import inodes_per_mount
from run_support.heap import gc_paused
from run_support.ledger_cache import Cache
from run_support.ledger_fstat import Stats
from run_support.ledger_scan import ModelDirRecords, scan
from run_support.names import OLD_CACHE_NAMES, RUN_META
from run_support.run_meta import FIELD_NAMES, RunMeta

#: ``{(test_case, model, repeat): RunMeta}``: a model dir's newest records, as
#: :meth:`Ledger.read_blocks` hands them on.
BlockRecords = dict[tuple[str, str, int], RunMeta]


class RecordedRuns(dict[tuple[str, str, int], RunMeta]):
    """``{(test_case, model, repeat): newest RunMeta}`` plus what the scan could not use.

    ``unreadable`` lists ``(run-meta path relative to the batch dir, reason)`` for every
    record that was skipped; ``incomplete`` lists run dirs that have no record at all (a run
    that was killed, or is still running).
    """

    def __init__(self) -> None:
        super().__init__()
        self.unreadable: list[tuple[str, str]] = []
        self.incomplete: list[str] = []


_OLDEST = datetime.min.replace(tzinfo=UTC)


def timestamp_order(stamp: str) -> datetime:
    """Sort key for a record's timestamp; unparsable or missing ones sort oldest."""
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return _OLDEST
    if moment.tzinfo is None:
        # Naive stamps from other harnesses are taken as UTC, as ours are.
        return moment.replace(tzinfo=UTC)
    return moment


def record_order(meta: RunMeta) -> tuple[bool, int, datetime, str]:
    """Sort key of one pair's records: the greatest is the newest.

    The attempt number comes first because the driver assigns it (each attempt one more
    than the newest record's), while a timestamp is the clock of whichever host ran the
    job and may run fast. A record naming no attempt sorts below every record that names
    one; the timestamp, then the run dir path, only order records of the same attempt.
    """
    attempt = meta.attempt
    return (
        attempt is not None,
        attempt or 0,
        timestamp_order(meta.timestamp),
        meta.run_dir or "",
    )


def keep_newest(records: dict[tuple[str, str, int], RunMeta], meta: RunMeta) -> None:
    """``meta`` as ``records``' record of its job unless it holds a newer one."""
    current = records.setdefault(meta.key, meta)
    if current is not meta and record_order(meta) > record_order(current):
        records[meta.key] = meta


#: Fields whose few distinct values repeat across 100,000 records (a model, an outcome, the
#: batch id): made one object each in memory, whether a record was parsed or cached.
_SHARED = tuple(
    FIELD_NAMES.index(name)
    for name in ("test_case", "model", "outcome", "failure_category", "stop_reason", "batch_id")
)
_RUN_DIR = FIELD_NAMES.index("run_dir")


class Ledger:
    """One batch dir's ledger, read through its cache (``cached=False``: every record from
    its file, for comparison and for tests; the answer is the same). Close it, or use it
    as a context manager: it holds the cache database and, once a read found the stats
    cold, a pool of stat threads."""

    def __init__(self, batch_dir: Path | str, *, cached: bool = True) -> None:
        self.batch_dir = Path(batch_dir)
        self._cached = cached
        self._cache: Cache | None = None
        self._stats = Stats()
        #: How many records the last read parsed (the rest came from the cache).
        self.parsed = 0

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._stats.close()
        if self._cache is not None:
            self._cache.close()
            self._cache = None

    def _open_cache(self) -> Cache | None:
        if self._cached and self._cache is None and self.batch_dir.is_dir():
            self._cache = Cache.of(self.batch_dir)
        return self._cache

    def read_blocks(self, each: Callable[[str, BlockRecords], None]) -> RecordedRuns:
        """Every record, a model dir at a time: ``each(model_dir, newest)`` is called as each
        model dir is read, with the newest record per (test_case, model, repeat) among that
        dir's own records. The ``RecordedRuns`` returned holds no records, only
        ``unreadable`` and ``incomplete``.

        A caller that keeps less of a record than its ``RunMeta`` (a resume's decisions)
        holds no more than one model dir's records at once. A pair's records are normally
        all in its model's own dir (``batch.layout``), but nothing here relies on it:
        merging the blocks by :func:`record_order` is the caller's.
        """
        return self._read(each, share=False)

    def _read(self, each: Callable[[str, BlockRecords], None], *, share: bool) -> RecordedRuns:
        """``share``: make the repeated values of every record one object each (a caller
        that keeps every record: 100,000 records name ten models); a caller that keeps a
        model dir's records at a time need not pay for it."""
        found = RecordedRuns()
        seen: dict[Any, Any] = {}
        setdefault = seen.setdefault

        def take(block: ModelDirRecords) -> None:
            prefix = f"{block.model_dir}/"
            newest: BlockRecords = {}
            for run_dir, fields, error in zip(
                block.run_dirs, block.values, block.errors, strict=True
            ):
                if fields is None:
                    found.unreadable.append((f"{prefix}{run_dir}/{RUN_META}", error or ""))
                    continue
                values = list(fields)
                if share:
                    for i in _SHARED:
                        values[i] = setdefault(values[i], values[i])
                values[_RUN_DIR] = prefix + run_dir
                keep_newest(newest, RunMeta(*values))
            del block
            each(prefix[:-1], newest)

        with gc_paused():
            totals = scan(
                self.batch_dir,
                self._open_cache(),
                self._stats,
                take,
                by_path=self._cached and inodes_per_mount(self.batch_dir),
            )
        found.incomplete = totals.incomplete
        self.parsed = totals.parsed
        return found

    def load(self) -> RecordedRuns:
        """The newest recorded outcome per (test_case, model, repeat) (see
        ``run_support.results.load_recorded_runs``)."""
        recorded = RecordedRuns()

        def merge(model_dir: str, newest: BlockRecords) -> None:
            if recorded.keys().isdisjoint(newest):  # the usual case: a model's own dir
                recorded.update(newest)
                return
            for meta in newest.values():
                keep_newest(recorded, meta)

        found = self._read(merge, share=True)
        recorded.unreadable, recorded.incomplete = found.unreadable, found.incomplete
        return recorded

    def remove_old_files(self) -> None:
        """Remove the cache files earlier versions kept in the batch dir (``.ledger-index``,
        ``.ledger-journal``): the driver's, once it holds the batch's lock."""
        for name in OLD_CACHE_NAMES:
            with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
                os.unlink(self.batch_dir / name)


__all__ = [
    "BlockRecords",
    "Ledger",
    "RecordedRuns",
    "keep_newest",
    "record_order",
    "timestamp_order",
]
