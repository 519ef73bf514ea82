"""Find and read every ``run-meta.json`` of a batch dir, fast, with a cache that is never stale.

A batch dir holds one record per run at ``<model_dir>/<run_dir>/run-meta.json``. Parsing
100,000 of them costs seconds; most are unchanged since the last look. The index
(``.ledger-index`` in the batch dir) keeps what each record was read as beside its stat
signature (inode, size, mtime, ctime); a record is taken from the index only when its
signature is unchanged. A record whose ctime is within ``RACY_WINDOW_NS`` of the moment the
index was built is never cached, because a rewrite in the same clock tick could keep the
same signature (git's "racy clean" problem). ctime cannot be set by ``os.utime``, so a file
rewritten in place is always seen on the next call. On a filesystem that numbers inodes per
mount (sshfs: ``run_support.filesystems``) the index keeps inode 0 and matches such an
entry on the rest of the signature, so that a remount still serves from it; what that
trusts is in ``docs/ledger.md``, "On a network filesystem".

What is cached is the caller's :class:`Digest` of the parsed JSON (by default the JSON
itself). The index names the digest it holds and carries a checksum of its body, so a
reader that digests differently never takes another's entries and a damaged index is
never trusted. The index is an optimisation only: an unreadable, foreign, damaged or
unwritable index is ignored, and no result depends on whether one was used. The format
is described in ``docs/ledger.md``.

The journal (``.ledger-journal`` beside the index) keeps the index current between reads:
whoever writes a record (the driver, a Dask worker) appends one line with the record's
signature, taken from the written file itself, and its digest (:func:`journal_record`).
A reader takes journal lines as index entries — each still used only while the record's
stat matches — and a reader that may write the index folds them into it and removes the
journal. So the first read after a crash is as fast as a second one.

The index file is ``run_support.ledger_index``; the journal, its appends and its folds,
``run_support.ledger_journal``; this module decides what each read may take from them.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import operator
import os
import time
from collections.abc import Callable, Iterator
from itertools import repeat
from pathlib import Path
from stat import S_ISREG
from typing import Any

import attrs

from run_support import jsonio, safe_files
from run_support.filesystems import inodes_per_mount
from run_support.ledger_fstat import (
    DirStats,
    PackedStats,
    Stats,
    StatsInChildren,
    start_stats,
    stat_dir,
)
from run_support.ledger_index import (
    MAX_CACHED_BYTES,
    RAW_JSON,
    AsRead,
    Block,
    Digest,
    IndexBlocks,
    Spill,
    aligned,
    gc_paused,
    open_index,
    save_index,
    well_formed,
    with_journal,
)
from run_support.ledger_journal import JournalLines, fold_journal, journal_locked, load_journal
from run_support.names import INDEX_NAME, JOURNAL_NAME, LOGS_DIR, RUN_META

RACY_WINDOW_NS = 2_000_000_000
#: Top-level directories that hold driver files, not runs.
NOT_MODEL_DIRS = frozenset({LOGS_DIR})


@attrs.define
class ModelDirRecords:
    """The records of one model dir, in run dir name order (three parallel lists).

    For each run dir exactly one of ``values[i]`` (the digest) and ``errors[i]`` (why the
    record could not be used) is None.
    """

    model_dir: str
    run_dirs: list[str] = attrs.Factory(list)
    values: list[Any] = attrs.Factory(list)
    errors: list[str | None] = attrs.Factory(list)


@attrs.define
class LedgerFiles:
    """Every record found under a batch dir, and every run dir without one."""

    model_dirs: list[ModelDirRecords] = attrs.Factory(list)
    #: Run dirs (relative to the batch dir) that have no ``run-meta.json``.
    incomplete: list[str] = attrs.Factory(list)
    #: How many records were read and parsed; the others came from the index or journal.
    parsed: int = 0
    #: With ``defer_index``: writes the index this read would have written (and folds the
    #: journal), for the caller to call when it suits it; None when there is nothing to write.
    save_index: Callable[[], None] | None = None

    def files(self) -> Iterator[tuple[str, Any, str | None]]:
        """``(run dir relative to the batch dir, digest, error)`` for every record."""
        for block in self.model_dirs:
            for run_dir, value, error in zip(
                block.run_dirs, block.values, block.errors, strict=True
            ):
                yield f"{block.model_dir}/{run_dir}", value, error


def _read(path: str, digest: Digest) -> tuple[Any, str | None]:
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
        return digest.make(raw), None
    except ValueError as exc:
        return None, str(exc)


# --- the scan -----------------------------------------------------------------------------


def read_ledger_files(
    batch_dir: Path,
    *,
    digest: Digest = RAW_JSON,
    use_index: bool = True,
    update_index: bool = True,
    defer_index: bool = False,
    children: StatsInChildren | None = None,
    each: Callable[[ModelDirRecords], None] | None = None,
) -> LedgerFiles:
    """Read every ``*/*/run-meta.json`` under ``batch_dir`` (hidden names skipped, like glob).

    Each record comes back as ``digest.make`` of its parsed JSON, from the index when the
    file is provably unchanged. ``update_index=False`` still reads the index but never
    writes it, for commands that promise to change nothing on disk (``batch plan``,
    ``batch status``). ``use_index=False`` neither reads nor writes it. ``defer_index=True``
    writes nothing either, but leaves what it would write in ``save_index`` (a resume
    writes it once its first jobs started). ``children`` (:func:`stats_ahead`, of this batch
    dir) are used for the stats, and ended. ``each``, when given, is handed each model
    dir's records as soon as they are read, in place of ``model_dirs`` (which stays
    empty): a caller that keeps less of them than their digests holds no more than a
    model dir's worth of digests at once.
    """
    with gc_paused():
        return _scan(
            Path(batch_dir),
            digest,
            use_index=use_index,
            update_index=update_index,
            defer_index=defer_index,
            children=children,
            each=each,
        )


def stats_ahead(batch_dir: Path) -> StatsInChildren | None:
    """Children that start on the stats of ``batch_dir``'s records now, for a
    ``read_ledger_files(batch_dir, children=...)`` to come (which ends them); None where
    that read would start none itself. A caller that does not read after all must
    ``close()`` them."""
    top = _model_dirs(batch_dir)
    if top is None or not _worth_a_child(batch_dir):
        return None
    return start_stats(batch_dir, top)


def _model_dirs(batch_dir: Path) -> list[str] | None:
    """The batch dir's subdirectories (hidden ones left out); None if it is not a dir."""
    try:
        with os.scandir(batch_dir) as entries:
            return sorted(e.name for e in entries if e.name[0] != "." and e.is_dir())
    except (FileNotFoundError, NotADirectoryError):
        return None


def _scan(
    batch_dir: Path,
    digest: Digest,
    *,
    use_index: bool,
    update_index: bool,
    defer_index: bool,
    children: StatsInChildren | None,
    each: Callable[[ModelDirRecords], None] | None,
) -> LedgerFiles:
    found = LedgerFiles()
    top = _model_dirs(batch_dir)
    if top is None:
        if children is not None:
            children.close()
        return found

    index_path = batch_dir / INDEX_NAME
    journal_path = batch_dir / JOURNAL_NAME
    # Children take the stats while the index and the journal load (ledger_stats); a model
    # dir they were not given (made since they started) is statted here.
    if children is None and use_index and _worth_a_child(batch_dir):
        children = start_stats(batch_dir, top)
    stats = Stats()
    try:
        index = open_index(index_path, digest) if use_index else IndexBlocks()
        journal, journal_stat = (
            load_journal(journal_path, digest) if use_index else (JournalLines(), None)
        )
        # A journal is folded only by a reader of its digest: another's would lose its entries.
        folding = journal_stat if journal else None
        # Taken before any record is read, as the racy rule needs; a stat may be older (the
        # children's): a record changed between its stat and its read is cached with the
        # older signature, which its next stat no longer matches.
        cacheable_before = time.time_ns() - RACY_WINDOW_NS
        by_path = use_index and inodes_per_mount(batch_dir)
        # Only what a save will write is kept: nothing when no index is written.
        saving = use_index and update_index
        kept: dict[str, Block | AsRead] = {}
        spill = Spill(batch_dir)
        changed = not journal.keys() <= set(top)
        from_children = children.collect() if children is not None else None
        for model_dir in top:
            # A block at a time, dropped with its dir once its records are handed on.
            cached, as_read = index.take(model_dir)
            journaled = journal.take(model_dir)
            if journaled is not None:
                cached, as_read = with_journal(cached, journaled), None
            dir_stats = from_children.get(model_dir) if from_children is not None else None
            if dir_stats is None:  # or one the children could not open: try again here
                dir_stats = stat_dir(batch_dir, model_dir, stats)
            if dir_stats is None:
                continue
            records, block, block_changed, parsed = _scan_model_dir(
                batch_dir,
                model_dir,
                dir_stats,
                cached,
                digest,
                cacheable_before if use_index else -1,
                found.incomplete,
                by_path=by_path,
            )
            del cached, dir_stats
            if each is None:
                found.model_dirs.append(records)
            else:
                each(records)
            del records
            found.parsed += parsed
            if saving and block[0]:
                # Served whole from the index, a save writes the block as read; else it is
                # put aside now rather than held for the save, which a resume puts off until
                # its first jobs started (the first resume after a sweep finds most records
                # changed, journaled: ≈ 1 KB a record decoded).
                if as_read is not None and not block_changed:
                    kept[model_dir] = as_read
                else:
                    kept[model_dir] = spill.keep(block)
            del block
            changed = changed or block_changed
        changed = changed or not index.untouched()
        del index
    finally:
        stats.close()
        if children is not None:
            children.close()

    if saving and (changed or folding is not None):
        save = functools.partial(_save_and_fold, batch_dir, digest, kept, folding)
        if defer_index:
            found.save_index = save
        else:
            save()
    return found


def _save_and_fold(
    batch_dir: Path,
    digest: Digest,
    kept: dict[str, Block | AsRead],
    folding: os.stat_result | None,
) -> None:
    """Write the index; then fold the journal read into it, if any.

    With a journal to fold, only while holding its lock, and only if it is still the one
    read: a writer's fold in between has put the same entries in the index already.
    """
    if folding is None:
        save_index(batch_dir / INDEX_NAME, digest, kept)
        return
    with journal_locked(batch_dir / JOURNAL_NAME, folding) as handle:
        if handle is not None and save_index(batch_dir / INDEX_NAME, digest, kept):
            fold_journal(batch_dir / JOURNAL_NAME, folding)


#: Below this many bytes of index and journal together (about 5,000 records), the stats are
#: taken in the reader's own process: a child costs a fork and a pipe.
CHILD_MIN_BYTES = 1 << 20


def _worth_a_child(batch_dir: Path) -> bool:
    size = 0
    for name in (INDEX_NAME, JOURNAL_NAME):
        with contextlib.suppress(OSError):
            size += os.stat(batch_dir / name).st_size
    return size >= CHILD_MIN_BYTES


def _entry_ok(value: Any, error: Any, check: Callable[[Any], bool]) -> bool:
    """Whether an index entry has a usable shape: a value ``check`` takes and no error, or
    an error message; so not even a forged index can crash the scan."""
    return check(value) and error is None if value is not None else type(error) is str


def _all_unchanged(found: DirStats, block: Block, digest: Digest) -> bool:
    """True when every record of a well-formed cached ``block`` of the same run dirs is
    exactly as cached: the same inode, size, mtime and ctime (list against list, at C
    speed), and every entry of a usable shape."""
    _, inodes, sizes, mtimes, ctimes, values, errors = block
    if not (
        not found.failed
        and found.mtimes == mtimes
        and found.ctimes == ctimes
        and found.sizes == sizes
        and found.inodes == inodes
    ):
        return False
    return _entries_ok(values, errors, digest)


def _entries_ok(values: list[Any], errors: list[Any], digest: Digest) -> bool:
    """Whether every entry of a block has a usable shape (:func:`_entry_ok`)."""
    check = digest.check
    if errors.count(None) == len(errors):  # the usual case: every entry a record
        return all(map(check, values)) if digest.check_all is None else digest.check_all(values)
    return all(_entry_ok(value, error, check) for value, error in zip(values, errors, strict=True))


def _keyed_by_path(block: Any) -> bool:
    """Whether every entry of an index block has inode 0: kept by a reader on a filesystem
    that numbers inodes per mount, to be matched on the rest of its signature."""
    return well_formed(block) and not any(block[1])


def _scan_model_dir(
    batch_dir: Path,
    model_dir: str,
    found: DirStats | PackedStats,
    cached_block: Any,
    digest: Digest,
    cacheable_before: int,
    incomplete: list[str],
    *,
    by_path: bool,
) -> tuple[ModelDirRecords, Block, bool, int]:
    """The records of one model dir, the index block to keep for it, whether it changed, and
    how many records were parsed.

    ``by_path``: the model dir is on a filesystem whose inodes hold only within one mount
    (``run_support.filesystems``). There an entry this reader keeps has inode 0, and one
    with inode 0 is matched on its size, mtime and ctime; an entry with an inode (a
    writer's journal line, taken in the writer's mount) is matched on it as anywhere else.
    A block holding such inodes is rewritten keyed by path.
    """
    keyed_by_path = by_path and _keyed_by_path(cached_block)
    rekey = by_path and well_formed(cached_block) and not keyed_by_path
    if isinstance(found, PackedStats):  # a child's
        if (
            not rekey
            and well_formed(cached_block)
            and found.same_as(cached_block, inodes=not keyed_by_path)
        ):
            # As below, compared packed: no 10,000 names and 50,000 numbers made first.
            _, _, _, _, _, values, errors = cached_block
            if _entries_ok(values, errors, digest):
                records = ModelDirRecords(model_dir, cached_block[0], values, errors)
                return records, cached_block, False, 0
        found = found.unpack()
    names = found.names
    cached_dirs, columns = aligned(cached_block, names)
    if by_path:
        # Each inode as compared: 0 where the entry is keyed by path. Not strict: with
        # nothing cached, the column is an endless repeat(None).
        inodes = zip(found.inodes, columns[0], strict=False)
        seen = [0 if cached == 0 else ino for ino, cached in inodes]
        found = found._replace(inodes=seen)
    if not rekey and names and cached_dirs == names and _all_unchanged(found, cached_block, digest):
        # The usual case on a resume: the block serves every record as it is.
        _, _, _, _, _, values, errors = cached_block
        return ModelDirRecords(model_dir, cached_dirs, values, errors), cached_block, False, 0
    if not found.failed and type(columns[0]) is list:
        # Every stat taken, the block lined up: compared a column at a time, so that a few
        # records added or changed (a journal line lost, say) cost their own reads, not a
        # loop over the model dir's 10,000.
        records, block, changed, parsed = _scan_by_column(
            batch_dir, model_dir, found, cached_dirs, columns, digest, cacheable_before, by_path
        )
    else:
        records, block, changed, parsed = _scan_one_by_one(
            batch_dir, model_dir, found, cached_dirs, columns, digest, cacheable_before,
            incomplete, by_path,
        )  # fmt: skip
    return records, block, changed or rekey, parsed


def _scan_by_column(
    batch_dir: Path,
    model_dir: str,
    found: DirStats,
    cached_dirs: list[str],
    columns: tuple[list[Any], ...],
    digest: Digest,
    cacheable_before: int,
    by_path: bool,
) -> tuple[ModelDirRecords, Block, bool, int]:
    """:func:`_scan_one_by_one`'s answer for a model dir whose every stat was taken and
    whose cached ``columns`` are lists lined up with its run dirs."""
    names, inodes, sizes, mtimes, ctimes, modes, _ = found
    cached_inodes, cached_sizes, cached_mtimes, cached_ctimes, cached_values, cached_errors = (
        columns
    )
    # Each record's stat against its cached one, all four numbers at once, in C.
    same = list(
        map(
            operator.eq,
            zip(mtimes, ctimes, sizes, inodes, strict=True),
            zip(cached_mtimes, cached_ctimes, cached_sizes, cached_inodes, strict=True),
        )
    )
    # A hit also needs a usable entry: checked a block at a time when every entry whose
    # stat matches is a record (the usual case), else one by one.
    if _entries_ok(
        list(itertools.compress(cached_values, same)),
        list(itertools.compress(cached_errors, same)),
        digest,
    ):
        hit = same
    else:
        check = digest.check
        usable = map(operator.truth, map(_entry_ok, cached_values, cached_errors, repeat(check)))
        hit = list(map(operator.and_, same, usable))
    values, errors = list(cached_values), list(cached_errors)
    parsed = 0
    for position in itertools.compress(range(len(names)), map(operator.not_, hit)):
        if not S_ISREG(modes[position]):
            # A FIFO or device would block or flood the read; a record is only ever a file.
            values[position], errors[position] = None, "not a regular file"
            continue
        path = f"{batch_dir}/{model_dir}/{names[position]}/{RUN_META}"
        values[position], errors[position] = _read(path, digest)
        parsed += 1
    keep = list(
        map(
            operator.and_,
            map(operator.lt, ctimes, repeat(cacheable_before)),
            map(operator.le, sizes, repeat(MAX_CACHED_BYTES)),
        )
    )
    kept_inodes = [0] * len(names) if by_path else inodes
    block = [
        list(itertools.compress(column, keep))
        for column in (names, kept_inodes, sizes, mtimes, ctimes, values, errors)
    ]
    hits = hit.count(True)
    # As in _scan_one_by_one: every record kept came from the index unchanged.
    changed = not (hits == len(block[0]) and block[0] == cached_dirs)
    return ModelDirRecords(model_dir, list(names), values, errors), block, changed, parsed


def _scan_one_by_one(
    batch_dir: Path,
    model_dir: str,
    found: DirStats,
    cached_dirs: list[str],
    columns: tuple[Any, ...],
    digest: Digest,
    cacheable_before: int,
    incomplete: list[str],
    by_path: bool,
) -> tuple[ModelDirRecords, Block, bool, int]:
    """The records of one model dir, compared with the cached ``columns`` (lined up with
    its run dirs, or endless ``repeat(None)`` when nothing is cached) record by record."""
    names = found.names
    records = ModelDirRecords(model_dir)
    run_dirs, values, errors = records.run_dirs, records.values, records.errors
    block: Block = [[], [], [], [], [], [], []]
    kept_dirs, kept_inodes, kept_sizes, kept_mtimes, kept_ctimes, kept_values, kept_errors = block
    check = digest.check
    hits = parsed = 0
    # Not strict: with nothing cached, the columns are endless repeat(None).
    for position, (run_dir, ino, size, mtime, ctime, mode, *entry) in enumerate(
        zip(names, *found[1:6], *columns, strict=False)
    ):
        failed = found.failed.get(position)
        if failed is not None:
            if failed != errno.ENOTDIR and model_dir not in NOT_MODEL_DIRS:
                incomplete.append(f"{model_dir}/{run_dir}")
            continue
        cached_ino, cached_size, cached_mtime, cached_ctime, value, error = entry
        if (
            mtime == cached_mtime
            and ctime == cached_ctime
            and size == cached_size
            and ino == cached_ino
            and _entry_ok(value, error, check)
        ):
            hits += 1
        elif not S_ISREG(mode):
            # A FIFO or device would block or flood the read; a record is only ever a file.
            value, error = None, "not a regular file"
        else:
            value, error = _read(f"{batch_dir}/{model_dir}/{run_dir}/{RUN_META}", digest)
            parsed += 1
        run_dirs.append(run_dir)
        values.append(value)
        errors.append(error)
        if ctime < cacheable_before and size <= MAX_CACHED_BYTES:
            kept_dirs.append(run_dir)
            kept_inodes.append(0 if by_path else ino)
            kept_sizes.append(size)
            kept_mtimes.append(mtime)
            kept_ctimes.append(ctime)
            kept_values.append(value)
            kept_errors.append(error)

    # A record can only be a hit if it was cacheable then, so it still is: ``hits ==
    # len(kept_dirs)`` means every record kept came from the index unchanged.
    return records, block, not (hits == len(kept_dirs) and kept_dirs == cached_dirs), parsed
