"""The stat of every record of a batch dir: the ledger cache's side of each check.

Whether a record may come from the cache is decided by its stat (``ledger_scan``), so every
read of a batch dir stats every record: 100,000 ``stat`` calls, about 0.5 s of one core
when warm, and seconds cold (a page cache dropped, a network filesystem: one round trip
each). :func:`stat_dir` takes them for one model dir, as columns (inodes, sizes, mtimes,
ctimes, modes); cold ones from threads (:class:`Stats`).
"""

from __future__ import annotations

import functools
import operator
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from run_support.names import RUN_META


class DirStats(NamedTuple):
    """The records of one model dir, in name order, as parallel columns.

    A record whose stat failed has -1 in every column and its errno in ``failed``.
    """

    names: list[str]
    inodes: list[int]
    sizes: list[int]
    mtimes: list[int]
    ctimes: list[int]
    modes: list[int]
    #: Position in ``names`` -> errno of the failed stat (ENOENT: a run dir without a
    #: record; ENOTDIR: a stray file).
    failed: dict[int, int]


#: A record's stat, or the errno of its failure (an int, not the exception: a list of
#: exceptions would hold their frames in a reference cycle).
_Stat = os.stat_result | int
#: Stats are timed over a model dir's first ``_PROBE`` records; slower than ``_COLD_STAT_NS``
#: on average means the metadata is not in memory (a cold page cache, after a reboot).
_PROBE = 64
_COLD_STAT_NS = 20_000
#: Cold, each stat waits on the disk and in the kernel; this many at once cut a cold
#: 100,000-record scan's stats from 15 s to 4-5 s here (2 cores, virtio disk). Warm, threads
#: gain nothing, so they are only started once a probe shows the cache is cold.
_STAT_THREADS = 16
_STAT_CHUNK = 256


def _each_stat(dir_fd: int, run_dirs: list[str]) -> Iterator[_Stat]:
    """The stat of each run dir's record, or the errno of the ``OSError`` it raised."""
    stat = os.stat
    for run_dir in run_dirs:
        try:
            yield stat(f"{run_dir}/{RUN_META}", dir_fd=dir_fd)
        except OSError as exc:
            yield exc.errno or 0


def _stat_chunk(dir_fd: int, run_dirs: list[str]) -> list[_Stat]:
    return list(_each_stat(dir_fd, run_dirs))


class Stats:
    """One stat per record, spread over threads once a probe shows the cache is cold."""

    def __init__(self) -> None:
        self._pool: Any = None

    def of(self, dir_fd: int, run_dirs: list[str]) -> Iterator[_Stat]:
        """The stat of each run dir's record under ``dir_fd``, in ``run_dirs`` order.

        Lazily, so that a warm scan holds one ``stat_result`` at a time, as a plain loop
        would (keeping a model dir's worth alive costs more than the stats themselves).
        """
        rest = run_dirs
        if self._pool is None:
            # Only the stats are timed, not what the caller does with them.
            start = time.perf_counter_ns()
            probe = _stat_chunk(dir_fd, run_dirs[:_PROBE])
            cold = time.perf_counter_ns() - start >= _PROBE * _COLD_STAT_NS
            yield from probe
            rest = run_dirs[_PROBE:]
            if not (cold and rest):
                yield from _each_stat(dir_fd, rest)
                return
            # Imported here: a warm scan, the usual case, never needs it.
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(_STAT_THREADS, thread_name_prefix="ledger-stat")
        chunks = [rest[i : i + _STAT_CHUNK] for i in range(0, len(rest), _STAT_CHUNK)]
        for part in self._pool.map(functools.partial(_stat_chunk, dir_fd), chunks):
            yield from part

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()


_signature = operator.attrgetter("st_ino", "st_size", "st_mtime_ns", "st_ctime_ns", "st_mode")
_NO_STAT = (-1, -1, -1, -1, -1)


def stat_dir(batch_dir: Path, model_dir: str, stats: Stats) -> DirStats | None:
    """The stats of ``model_dir``'s records (hidden names skipped); None when the directory
    cannot be opened (gone since it was listed, not a directory)."""
    try:
        # Paths relative to an open directory spare the kernel a walk from / per file.
        dir_fd = os.open(batch_dir / model_dir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        try:
            # Plain names, no is_dir() per entry: the stat tells a run dir (found, or
            # ENOENT) from a stray file (ENOTDIR).
            names = sorted(name for name in os.listdir(dir_fd) if name[0] != ".")
        except OSError:
            names = []
        failed: dict[int, int] = {}
        rows: list[tuple[int, int, int, int, int]] = []
        for position, st in enumerate(stats.of(dir_fd, names)):
            if isinstance(st, int):
                failed[position] = st
                rows.append(_NO_STAT)
            else:
                rows.append(_signature(st))
        # One row per record to one column per field, at C speed.
        inodes, sizes, mtimes, ctimes, modes = (
            [list(column) for column in zip(*rows, strict=True)] if rows else [[], [], [], [], []]
        )
        return DirStats(names, inodes, sizes, mtimes, ctimes, modes, failed)
    finally:
        os.close(dir_fd)
