"""The stat of every record of a batch dir: the ledger index's side of each check.

Whether a record may come from the index is decided by its stat (``ledger_scan``), so every
read of a batch dir stats every record: 100,000 ``stat`` calls, about 0.5 s of one core
when warm, and seconds cold. :func:`stat_dir` takes them for one model dir, as columns
(inodes, sizes, mtimes, ctimes, modes) that compare with the index's own columns at C
speed. :func:`start_stats` has forked children take them while the reader loads the index and
the journal, so on a machine with a second core they cost the reader little more than the
wait for the last child. Anything that goes wrong in a child (it cannot be forked, it dies,
its answer is damaged) leaves the reader to take the stats itself: the children are a
shortcut and never change an answer.
"""

from __future__ import annotations

import functools
import marshal
import operator
import os
import signal
import threading
import time
from array import array
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


#: Above any descriptor a process has open (``closerange`` closes only those it has).
_MAX_FD = 1 << 20
#: How many children share the stats (each takes every other model dir): the reader loads
#: the index meanwhile, so on two cores two children finish first.
CHILDREN = 2


class StatsInChildren:
    """The stats of a batch dir's model dirs, being taken by forked children."""

    def __init__(self) -> None:
        #: (pid, read end of its pipe) of each child not yet reaped; -1: pipe closed.
        self._children: list[tuple[int, int]] = []

    def collect(self) -> dict[str, DirStats | PackedStats] | None:
        """The children's answer: ``{model_dir: stats}`` (a model dir they could not open
        is left out), or None when one of them has none (it failed; take the stats
        yourself)."""
        answer: dict[str, DirStats | PackedStats] | None = {}
        while self._children:
            pid, fd = self._children[0]
            self._children[0] = (pid, -1)
            with open(fd, "rb") as pipe:
                data = pipe.read()
            _, status = os.waitpid(pid, 0)
            del self._children[0]
            part = _answer(data) if status == 0 else None
            if part is None or answer is None:
                answer = None
                continue  # the others are still reaped
            answer.update(part)
        return answer

    def close(self) -> None:
        """End the children whose answer was not collected (the reader failed or was
        interrupted), and reap them."""
        for pid, fd in self._children:
            if fd >= 0:
                os.close(fd)
            # Ours, by pid, and certain not to be reaped by anyone else yet.
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        self._children = []


def _answer(data: bytes) -> dict[str, DirStats | PackedStats] | None:
    try:
        answer = marshal.loads(data)
    except (EOFError, ValueError, TypeError):
        return None
    if type(answer) is not dict:
        return None
    decoded: dict[str, DirStats | PackedStats] = {}
    for model_dir, packed in answer.items():
        found = _unpacked(packed)
        if found is None:
            return None
        decoded[model_dir] = found
    return decoded


#: The five number columns of a model dir's stats, packed as machine integers.
_NUMBERS = "q"


class PackedStats:
    """A model dir's stats as a child sends them: the names as one string, NUL-separated
    (no file name holds a NUL), and the five number columns end to end in one array of
    machine integers.

    Turning 100,000 names and 500,000 numbers back into Python objects costs the reader as
    much as taking the stats would save it; :meth:`same_as` compares them packed with an
    index block instead (the usual resume: nothing changed), and :meth:`unpack` gives the
    columns only for a model dir where something did.
    """

    __slots__ = ("count", "failed", "names", "numbers")

    def __init__(self, names: str, numbers: array[int], failed: dict[int, int]) -> None:
        self.names = names
        self.numbers = numbers
        self.failed = failed
        self.count = len(numbers) // 5

    def same_as(self, block: Any, *, inodes: bool = True) -> bool:
        """Whether ``block`` (an index block: run dirs, inodes, sizes, mtimes, ctimes, ...)
        holds exactly these run dirs, each with exactly this inode (unless ``inodes`` is
        False), size, mtime and ctime; every stat taken."""
        count = self.count
        if self.failed or not count or len(block[0]) != count:
            return False
        numbers = self.numbers
        try:
            if "\0".join(block[0]) != self.names:
                return False
            return all(
                array(_NUMBERS, block[1 + i]) == numbers[i * count : (i + 1) * count]
                for i in range(0 if inodes else 1, 4)
            )
        except (TypeError, OverflowError):  # not what an index holds
            return False

    def unpack(self) -> DirStats:
        count, numbers = self.count, self.numbers
        names = self.names.split("\0") if count else []
        inodes, sizes, mtimes, ctimes, modes = (
            numbers[i * count : (i + 1) * count].tolist() for i in range(5)
        )
        return DirStats(names, inodes, sizes, mtimes, ctimes, modes, self.failed)


def _packed(found: DirStats) -> tuple[Any, ...]:
    """``found`` as a child sends it (see :class:`PackedStats`); as its seven columns when a
    number does not fit in 64 bits (an inode past 2**63)."""
    numbers = array(_NUMBERS)
    try:
        for column in found[1:6]:
            numbers.extend(column)
    except OverflowError:
        return tuple(found)
    return (os.fsencode("\0".join(found.names)), numbers.tobytes(), found.failed)


def _unpacked(packed: Any) -> DirStats | PackedStats | None:
    """What :func:`_packed` sent; None when it is damaged."""
    if type(packed) is not tuple:
        return None
    if len(packed) == len(DirStats._fields):
        return DirStats(*packed)
    if len(packed) != 3 or not all(map(isinstance, packed, (bytes, bytes, dict))):
        return None
    blob, data, failed = packed
    numbers = array(_NUMBERS)
    try:
        numbers.frombytes(data)
    except ValueError:  # not a whole number of items
        return None
    count = blob.count(b"\0") + 1 if blob else 0
    if len(numbers) != 5 * count:
        return None
    # Decoded as os.listdir decodes each name: the NULs between them stay where they were.
    return PackedStats(os.fsdecode(blob), numbers, failed)


def _other_threads() -> bool:
    return threading.active_count() > 1


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def start_stats(batch_dir: Path, model_dirs: list[str]) -> StatsInChildren | None:
    """Start children that stat every record of ``model_dirs``; None when there are none:
    no ``fork`` here, one core only (a child would only take turns with the reader), or
    threads running (a child forked beside threads can deadlock on a lock one of them
    held)."""
    if not hasattr(os, "fork") or _other_threads() or _usable_cores() < 2:
        return None
    started = StatsInChildren()
    count = max(1, min(CHILDREN, len(model_dirs)))
    for first in range(count):
        child = _fork(batch_dir, model_dirs[first::count])
        if child is None:
            started.close()
            return None
        started._children.append(child)
    return started


def _fork(batch_dir: Path, model_dirs: list[str]) -> tuple[int, int] | None:
    """Fork a child that stats ``model_dirs``: its pid and the read end of its pipe."""
    read_end, write_end = os.pipe()
    # Until the child has dropped the parent's signal handlers, a signal must not run
    # one of them in the child (a driver's handler writes the batch's files).
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        pid = os.fork()
    except OSError:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        os.close(read_end)
        os.close(write_end)
        return None
    if pid == 0:  # pragma: no cover - the child; it ends here, in os._exit
        status = 1
        try:
            for number in signal.valid_signals():
                if callable(signal.getsignal(number)):
                    signal.signal(number, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            # Nothing of the reader's held open here: not a driver's batch lock, which a
            # child outliving a killed driver would otherwise keep from the next one.
            os.closerange(3, write_end)
            os.closerange(write_end + 1, _MAX_FD)
            _send(write_end, batch_dir, model_dirs)
            status = 0
        finally:
            os._exit(status)
    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    os.close(write_end)
    return pid, read_end


def _send(fd: int, batch_dir: Path, model_dirs: list[str]) -> None:
    """In the child: stat every record and write the answer, marshalled, to ``fd``."""
    stats = Stats()
    try:
        answer = {}
        for model_dir in model_dirs:
            found = stat_dir(batch_dir, model_dir, stats)
            if found is not None:
                answer[model_dir] = _packed(found)
    finally:
        stats.close()
    with open(fd, "wb") as pipe:
        pipe.write(marshal.dumps(answer))
