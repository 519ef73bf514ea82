"""Find and read every ``run-meta.json`` of a batch dir, fast, with a cache that is never stale.

A batch dir holds one record per run at ``<model_dir>/<run_dir>/run-meta.json``. Parsing
100,000 of them costs seconds; most are unchanged since the last look. The index
(``.ledger-index`` in the batch dir) keeps what each record was read as beside its stat
signature (inode, size, mtime, ctime); a record is taken from the index only when its
signature is unchanged. A record whose ctime is within ``RACY_WINDOW_NS`` of the moment the
index was built is never cached, because a rewrite in the same clock tick could keep the
same signature (git's "racy clean" problem). ctime cannot be set by ``os.utime``, so a file
rewritten in place is always seen on the next call.

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
"""

from __future__ import annotations

import binascii
import contextlib
import errno
import fcntl
import functools
import gc
import itertools
import marshal
import operator
import os
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from itertools import repeat
from pathlib import Path
from stat import S_ISREG
from typing import Any, BinaryIO

import attrs

from run_support import jsonio, safe_files
from run_support.atomic import atomic_write_bytes
from run_support.ledger_stats import (
    DirStats,
    PackedStats,
    Stats,
    StatsInChildren,
    start_stats,
    stat_dir,
)
from run_support.names import INDEX_NAME, JOURNAL_NAME, LOGS_DIR, RUN_META

INDEX_SCHEMA = 3
RACY_WINDOW_NS = 2_000_000_000
#: Larger records are re-read every time rather than copied into the index.
MAX_CACHED_BYTES = 1 << 20
#: Top-level directories that hold driver files, not runs.
NOT_MODEL_DIRS = frozenset({LOGS_DIR})
#: A journal line is one ``write()`` of at most this much (under Linux's ``PIPE_BUF``), so
#: appends from several processes never interleave; a larger digest is not journaled.
MAX_JOURNAL_LINE = 4096
#: A larger journal is not read (a reader would rather parse the records than hold it).
MAX_JOURNAL_BYTES = 1 << 30
#: A writer folds the journal into the index once the journal has grown by this much, or
#: by a quarter of the index's size if that is more. The first read after a crash then
#: decodes at most that much journal (100,000 lines took 0.6-0.8 s; the index's entries
#: for the same records, about a third of that), and since each fold rewrites the whole
#: index, folding at a size proportional to it keeps each record's share of the folds
#: bounded.
FOLD_MIN_BYTES = 4 << 20
FOLD_INDEX_SHARE = 4


def _any_value(value: Any) -> bool:
    return True


@attrs.frozen
class Digest:
    """What a reader keeps of one parsed record, and so what the index caches for it.

    ``make(raw)`` returns a value made of plain built-in types (what JSON gives, and tuples)
    or raises ``ValueError`` (whose message becomes the record's error). ``check(value)``
    says whether a value from the index has the shape ``make`` returns; one that does not
    is read afresh. ``id`` must change whenever ``make`` could return something different
    for the same input: an index is only used by a reader with the same ``id``.
    ``check_all(values)``, when given, is ``all(map(check, values))``, faster (a block of
    10,000 entries is checked at once).
    """

    id: str
    make: Callable[[Any], Any]
    check: Callable[[Any], bool] = _any_value
    check_all: Callable[[list[Any]], bool] | None = None


#: The parsed JSON itself.
RAW_JSON = Digest(id="json", make=lambda raw: raw)


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


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small acyclic objects.

    A 100,000-record scan allocates millions of containers; each allocation burst triggers
    collections that find nothing to free, and pausing them saves a third of the scan.
    Reference counting still frees everything as usual.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _read(path: str, digest: Digest) -> tuple[Any, str | None]:
    try:
        data = safe_files.read_bytes(path, limit=None)
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


# --- the index file -----------------------------------------------------------------------
#
# A JSON header line, then a marshal body (marshal reads back ~2x faster than JSON, and the
# index is a private cache):
#
#   {"schema": 3, "digest": "<Digest.id>", "marshal": 4, "crc32": <of the body>}\n
#   {model_dir: [run_dirs, inodes, sizes, mtimes_ns, ctimes_ns, values, errors]}
#
# Each model dir is a block of seven parallel lists, run dirs sorted by name. The body is
# unmarshalled only after its checksum matched, so damaged bytes never reach marshal.

_Block = list[list[Any]]
_COLUMNS = 7


def _load_index(path: Path, digest: Digest) -> dict[str, Any]:
    """``{model_dir: block}`` from the index, or ``{}`` when it is not usable."""
    try:
        data = safe_files.read_bytes(path, limit=None)
        end = data.find(b"\n")
        header = jsonio.loads(data[:end]) if end >= 0 else None
    except (OSError, ValueError):
        return {}
    # The body as a view of what was read, not a copy: 20 MB for 100,000 records.
    with memoryview(data) as view:
        body = view[end + 1 :]
        if (
            not isinstance(header, dict)
            or header.get("schema") != INDEX_SCHEMA
            or header.get("digest") != digest.id
            or header.get("marshal") != marshal.version
            or header.get("crc32") != zlib.crc32(body)
        ):
            return {}
        try:
            blocks = marshal.loads(body)
        except (ValueError, EOFError, TypeError):
            return {}
        finally:
            body.release()
    return blocks if type(blocks) is dict else {}


def _save_index(path: Path, digest: Digest, blocks: dict[str, _Block]) -> bool:
    """Write the index; False when it could not be written."""
    try:
        body = marshal.dumps(blocks, marshal.version)
    except ValueError:  # a digest holding a type marshal cannot write: no index this time
        return False
    header = {"schema": INDEX_SCHEMA, "digest": digest.id, "marshal": marshal.version}
    header["crc32"] = zlib.crc32(body)
    try:
        atomic_write_bytes(path, jsonio.dumps(header) + body, fsync=False)
    except OSError:
        # A read-only batch dir (someone else's, an archive) still reads, just uncached.
        return False
    return True


def _well_formed(block: Any) -> bool:
    """Whether a cached ``block`` is seven lists of one length."""
    return (
        type(block) is list
        and len(block) == _COLUMNS
        and all(type(column) is list for column in block)
        and len({len(column) for column in block}) == 1
    )


def _aligned(block: Any, run_dirs: list[str]) -> tuple[list[str], tuple[Any, ...]]:
    """The run dirs a cached block holds, and its columns lined up with ``run_dirs``.

    A block that is not seven lists of one length is treated as empty.
    """
    if not _well_formed(block):
        return [], (repeat(None),) * (_COLUMNS - 1)
    cached_dirs = block[0]
    if cached_dirs == run_dirs:  # the usual case: nothing added or removed since
        return cached_dirs, tuple(block[1:])
    position = {name: i for i, name in enumerate(cached_dirs) if type(name) is str}
    rows = [position.get(name) for name in run_dirs]
    columns = tuple([None if i is None else column[i] for i in rows] for column in block[1:])
    return cached_dirs, columns


# --- the journal ---------------------------------------------------------------------------
#
# One line per record written, appended by the writer, never rewritten:
#
#   <crc32 of the base64, 8 hex digits> m<marshal version> <base64 of the marshal of
#       ["<Digest.id>", model_dir, run_dir, inode, size, mtime_ns, ctime_ns, digest]>\n
#
# marshal, as in the index, because it reads back several times faster than JSON; base64
# keeps a line free of newlines.
# A line is one O_APPEND write() under PIPE_BUF, so lines from several processes never
# interleave. A line without its newline (the writer killed mid-append), with a checksum
# that does not match (a power cut before the unsynced journal reached the disk) or of
# another digest is skipped: the record it names is then read from the file, as without a
# journal. Nothing is fsynced: the record itself is, and the journal is only a cache.

#: Which marshal format a line is in; a reader of another skips the line.
_JOURNAL_MARSHAL = b"m%d " % marshal.version
#: ``{model_dir: {run_dir: (inode, size, mtime_ns, ctime_ns, digest)}}``
_Journal = dict[str, dict[str, tuple[int, int, int, int, Any]]]


def journal_record(
    batch_dir: Path,
    model_dir: str,
    run_dir: str,
    written: os.stat_result,
    digest: Digest,
    value: Any,
) -> None:
    """Note in the journal that ``model_dir/run_dir``'s record, whose stat after it was
    written is ``written``, reads as ``value`` under ``digest``. Never raises ``OSError``.

    ``value`` must be ``digest.make`` of the parsed file; one that does not read back from
    marshal as itself (a NaN) is not journaled.
    """
    if written.st_size > MAX_CACHED_BYTES:
        return
    entry = [
        digest.id,
        model_dir,
        run_dir,
        written.st_ino,
        written.st_size,
        written.st_mtime_ns,
        written.st_ctime_ns,
        value,
    ]
    try:
        blob = marshal.dumps(entry, marshal.version)
        if marshal.loads(blob)[-1] != value:
            return
    except ValueError:  # a type marshal cannot write
        return
    payload = binascii.b2a_base64(blob, newline=False)
    line = b"%08x %s%s\n" % (zlib.crc32(payload), _JOURNAL_MARSHAL, payload)
    if len(line) > MAX_JOURNAL_LINE:
        return
    path = os.path.join(batch_dir, JOURNAL_NAME)
    # A batch dir that refuses the journal still gets its record: the cache is optional.
    try:
        size = _append(path, line)
    except OSError:
        return
    if size >= _fold_at.get(path, FOLD_MIN_BYTES):
        _fold_due(Path(batch_dir), path, digest, size)


#: The journal this process appends to, kept open from one record to the next: ``(path,
#: descriptor, device, inode)``. At most one, the batch dir being written; never inherited
#: by a job (Python's descriptors are close-on-exec).
_appending: tuple[str, int, int, int] | None = None
_appending_lock = threading.Lock()
#: Per journal path, the size at which this process next folds it; and the paths being
#: folded now by one of its threads (the others go on appending meanwhile).
_fold_at: dict[str, int] = {}
_folding: set[str] = set()


def _append(path: str, line: bytes) -> int:
    """Append ``line`` to the journal at ``path`` in one ``write()``, through the descriptor
    kept open since the previous line while ``path`` still names that same file; return
    the journal's size just after it (other writers' lines included).

    A reader that folds the journal removes it, and the next line must then start a new
    one: a line written to the removed file would be lost to every reader. So each line
    first ``lstat``s the path (one system call, where a safe open and a close are five) and
    reopens when the path is gone or names another file. The descriptor keeps its inode
    alive, so no new file at the path can have the same device and inode. A reader that
    removes the journal between the ``lstat`` and the ``write`` costs that line, as it would
    between an open and a write: its record is parsed on the next read, never misread.
    """
    global _appending
    with _appending_lock:
        kept = _appending
        if kept is not None and kept[0] == path:
            try:
                now = os.lstat(path)
            except OSError:
                now = None
            if now is not None and (now.st_dev, now.st_ino) == kept[2:]:
                os.write(kept[1], line)
                # O_APPEND moved the offset to the end, then past this line.
                return os.lseek(kept[1], 0, os.SEEK_CUR)
        if kept is not None:
            _appending = None
            os.close(kept[1])
        fd = safe_files.open_append_fd(path)
        try:
            opened = os.fstat(fd)
            os.write(fd, line)
            size = os.lseek(fd, 0, os.SEEK_CUR)
        except BaseException:
            os.close(fd)
            raise
        _appending = (path, fd, opened.st_dev, opened.st_ino)
        return size


def _load_journal(path: Path, digest: Digest) -> tuple[_Journal, os.stat_result | None]:
    """The journal's usable entries (a later line wins) and the journal's stat, if read."""
    try:
        fd = safe_files.open_fd(path, os.O_RDONLY)
    except OSError:
        return {}, None
    with open(fd, "rb") as handle:
        return _read_journal(handle, digest)


def _read_journal(handle: BinaryIO, digest: Digest) -> tuple[_Journal, os.stat_result | None]:
    """:func:`_load_journal` from the journal open as ``handle``, read from its start."""
    entries: _Journal = {}
    crc32, decode, loads, want = zlib.crc32, binascii.a2b_base64, marshal.loads, digest.id
    tag, start = _JOURNAL_MARSHAL, 9 + len(_JOURNAL_MARSHAL)
    st = os.fstat(handle.fileno())
    if st.st_size > MAX_JOURNAL_BYTES:
        return {}, None
    # Line by line, never the whole journal in memory (tens of MB for 100,000 records),
    # and never more than a line's worth at once, however long a garbled "line" is.
    for line in iter(functools.partial(handle.readline, MAX_JOURNAL_LINE + 1), b""):
        payload = line[start:-1]
        try:
            if (
                line[-1:] != b"\n"  # a torn last line
                or line[9:start] != tag
                or int(line[:8], 16) != crc32(payload)
            ):
                continue
            entry = loads(decode(payload, strict_mode=True))
        except (ValueError, EOFError, TypeError):  # binascii.Error is a ValueError
            continue
        if not (type(entry) is list and len(entry) == 8 and entry[0] == want):
            continue
        _, model_dir, run_dir, ino, size, mtime, ctime, value = entry
        if type(model_dir) is str and type(run_dir) is str:
            entries.setdefault(model_dir, {})[run_dir] = (ino, size, mtime, ctime, value)
    return entries, st


@contextlib.contextmanager
def _journal_locked(path: Path, expected: os.stat_result | None) -> Iterator[BinaryIO | None]:
    """The journal at ``path`` open and locked (``flock``) against other folds, or None
    when another process holds the lock, when there is none, or when the path names
    another journal than ``expected`` (another fold put a new one in its place)."""
    try:
        fd = safe_files.open_fd(path, os.O_RDONLY)
    except OSError:
        yield None
        return
    with open(fd, "rb") as handle:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            st = os.fstat(fd)
            # Locked after the open: a fold that ran in between has replaced the file.
            now = os.stat(path, follow_symlinks=False)
        except OSError:
            yield None
            return
        same = (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)
        if expected is not None:
            same = same and (st.st_dev, st.st_ino) == (expected.st_dev, expected.st_ino)
        yield handle if same else None


def _fold_due(batch_dir: Path, path: str, digest: Digest, size: int) -> None:
    """Fold the journal at ``path`` (``size`` bytes by this process's last line) into the
    index, unless another of this process's threads is at it, and set when to fold next."""
    with _appending_lock:
        if path in _folding:
            return
        _folding.add(path)
    try:
        folded = _fold_into_index(batch_dir, digest)
        try:
            index_size = os.stat(batch_dir / INDEX_NAME).st_size
        except OSError:
            index_size = 0
        step = max(FOLD_MIN_BYTES, index_size // FOLD_INDEX_SHARE)
        with _appending_lock:
            # Not folded (another process folds it, or the index could not be written):
            # try again once as much more has been appended.
            _fold_at[path] = (0 if folded else size) + step
    finally:
        with _appending_lock:
            _folding.discard(path)


def _fold_into_index(batch_dir: Path, digest: Digest) -> bool:
    """A writer's fold: the index with the journal's entries of ``digest`` added, written,
    and the journal folded (:func:`_fold_journal`); whether it was.

    No record is read or stat'ed: each entry stays tied to its record's signature, checked
    by every reader, as in the journal.
    """
    journal_path, index_path = batch_dir / JOURNAL_NAME, batch_dir / INDEX_NAME
    with _journal_locked(journal_path, None) as handle, gc_paused():
        if handle is None:
            return False
        journal, read = _read_journal(handle, digest)
        if not journal or read is None:
            return False
        blocks = _load_index(index_path, digest)
        for model_dir, journaled in journal.items():
            blocks[model_dir] = _with_journal(blocks.get(model_dir), journaled)
        del journal
        if not _save_index(index_path, digest, blocks):
            return False
        _fold_journal(journal_path, read)
        return True


def _with_journal(block: Any, journaled: dict[str, tuple[int, int, int, int, Any]]) -> _Block:
    """``block`` (an index block, or None) updated with a model dir's journal entries."""
    rows: dict[str, tuple[Any, ...]] = {}
    if _well_formed(block):
        for row in zip(*block, strict=True):
            if type(row[0]) is str:
                rows[row[0]] = row[1:]
    for run_dir, (ino, size, mtime, ctime, value) in journaled.items():
        rows[run_dir] = (ino, size, mtime, ctime, value, None)
    names = sorted(rows)
    columns = list(zip(*(rows[name] for name in names), strict=True)) or [()] * (_COLUMNS - 1)
    return [names, *(list(column) for column in columns)]


def _fold_journal(path: Path, folded: os.stat_result) -> None:
    """Once the journal as it was when read (``folded``, its stat then) is in the index,
    leave in it only the lines appended since: none, and it is removed.

    A fold while records are being written (a resume writes the index after its first jobs
    started; a writer folds as it writes) finds lines its read did not see; they are kept,
    in a new journal put in place of the old one, so the next read parses neither them nor
    the folded ones again. A writer that looked at the path just before the replace appends
    to the old file: what it appended meanwhile is moved over too. Only a line written
    after that last look is lost: its record is parsed on the next read, never misread.
    """
    with contextlib.suppress(OSError):
        fd = safe_files.open_fd(path, os.O_RDONLY)
        with open(fd, "rb") as handle:
            now = os.fstat(fd)
            if (now.st_dev, now.st_ino) != (folded.st_dev, folded.st_ino):
                return  # another writer's new journal: none of it was folded
            handle.seek(folded.st_size)
            tail = handle.read(MAX_JOURNAL_BYTES)
            if tail:
                atomic_write_bytes(path, tail, fsync=False)
            else:
                os.unlink(path)
            late = handle.read(MAX_JOURNAL_BYTES)
        # Whole lines only: one being written now is still the old file's.
        late = late[: late.rfind(b"\n") + 1]
        if late:
            fd = safe_files.open_append_fd(path)
            try:
                for line in late.splitlines(keepends=True):
                    os.write(fd, line)  # one line per write(), as writers append them
            finally:
                os.close(fd)


# --- the scan -----------------------------------------------------------------------------


def read_ledger_files(
    batch_dir: Path,
    *,
    digest: Digest = RAW_JSON,
    use_index: bool = True,
    update_index: bool = True,
    defer_index: bool = False,
    children: StatsInChildren | None = None,
) -> LedgerFiles:
    """Read every ``*/*/run-meta.json`` under ``batch_dir`` (hidden names skipped, like glob).

    Each record comes back as ``digest.make`` of its parsed JSON, from the index when the
    file is provably unchanged. ``update_index=False`` still reads the index but never
    writes it, for commands that promise to change nothing on disk (``batch plan``,
    ``batch status``). ``use_index=False`` neither reads nor writes it. ``defer_index=True``
    writes nothing either, but leaves what it would write in ``save_index`` (a resume
    writes it once its first jobs started). ``children`` (:func:`stats_ahead`, of this batch
    dir) are used for the stats, and ended.
    """
    with gc_paused():
        return _scan(
            Path(batch_dir),
            digest,
            use_index=use_index,
            update_index=update_index,
            defer_index=defer_index,
            children=children,
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
        cached = _load_index(index_path, digest) if use_index else {}
        journal, journal_stat = _load_journal(journal_path, digest) if use_index else ({}, None)
        for model_dir, journaled in journal.items():
            cached[model_dir] = _with_journal(cached.get(model_dir), journaled)
        # Taken before any record is read, as the racy rule needs; a stat may be older (the
        # children's): a record changed between its stat and its read is cached with the
        # older signature, which its next stat no longer matches.
        cacheable_before = time.time_ns() - RACY_WINDOW_NS
        kept: dict[str, _Block] = {}
        changed = not cached.keys() <= set(top)
        from_children = children.collect() if children is not None else None
        for model_dir in top:
            dir_stats = from_children.get(model_dir) if from_children is not None else None
            if dir_stats is None:  # or one the children could not open: try again here
                dir_stats = stat_dir(batch_dir, model_dir, stats)
            if dir_stats is None:
                continue
            records, block, block_changed, parsed = _scan_model_dir(
                batch_dir,
                model_dir,
                dir_stats,
                cached.get(model_dir),
                digest,
                cacheable_before if use_index else -1,
                found.incomplete,
            )
            found.model_dirs.append(records)
            found.parsed += parsed
            if block[0]:
                kept[model_dir] = block
            changed = changed or block_changed
    finally:
        stats.close()
        if children is not None:
            children.close()

    # A journal is folded only by a reader of its digest: another's would lose its entries.
    folding = journal_stat if journal else None
    if use_index and update_index and (changed or folding is not None):
        save = functools.partial(_save_and_fold, batch_dir, digest, kept, folding)
        if defer_index:
            found.save_index = save
        else:
            save()
    return found


def _save_and_fold(
    batch_dir: Path, digest: Digest, kept: dict[str, _Block], folding: os.stat_result | None
) -> None:
    """Write the index; then fold the journal read into it, if any.

    With a journal to fold, only while holding its lock, and only if it is still the one
    read: a writer's fold in between has put the same entries in the index already.
    """
    if folding is None:
        _save_index(batch_dir / INDEX_NAME, digest, kept)
        return
    with _journal_locked(batch_dir / JOURNAL_NAME, folding) as handle:
        if handle is not None and _save_index(batch_dir / INDEX_NAME, digest, kept):
            _fold_journal(batch_dir / JOURNAL_NAME, folding)


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


def _all_unchanged(found: DirStats, block: _Block, digest: Digest) -> bool:
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


def _scan_model_dir(
    batch_dir: Path,
    model_dir: str,
    found: DirStats | PackedStats,
    cached_block: Any,
    digest: Digest,
    cacheable_before: int,
    incomplete: list[str],
) -> tuple[ModelDirRecords, _Block, bool, int]:
    """The records of one model dir, the index block to keep for it, whether it changed, and
    how many records were parsed."""
    if isinstance(found, PackedStats):  # a child's
        if _well_formed(cached_block) and found.same_as(cached_block):
            # As below, compared packed: no 10,000 names and 50,000 numbers made first.
            _, _, _, _, _, values, errors = cached_block
            if _entries_ok(values, errors, digest):
                records = ModelDirRecords(model_dir, cached_block[0], values, errors)
                return records, cached_block, False, 0
        found = found.unpack()
    names = found.names
    cached_dirs, columns = _aligned(cached_block, names)
    if names and cached_dirs == names and _all_unchanged(found, cached_block, digest):
        # The usual case on a resume: the block serves every record as it is.
        _, _, _, _, _, values, errors = cached_block
        return ModelDirRecords(model_dir, cached_dirs, values, errors), cached_block, False, 0
    if not found.failed and type(columns[0]) is list:
        # Every stat taken, the block lined up: compared a column at a time, so that a few
        # records added or changed (a journal line lost, say) cost their own reads, not a
        # loop over the model dir's 10,000.
        return _scan_by_column(batch_dir, model_dir, found, cached_dirs, columns, digest,
                               cacheable_before)  # fmt: skip
    return _scan_one_by_one(
        batch_dir, model_dir, found, cached_dirs, columns, digest, cacheable_before, incomplete
    )


def _scan_by_column(
    batch_dir: Path,
    model_dir: str,
    found: DirStats,
    cached_dirs: list[str],
    columns: tuple[list[Any], ...],
    digest: Digest,
    cacheable_before: int,
) -> tuple[ModelDirRecords, _Block, bool, int]:
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
    block = [
        list(itertools.compress(column, keep))
        for column in (names, inodes, sizes, mtimes, ctimes, values, errors)
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
) -> tuple[ModelDirRecords, _Block, bool, int]:
    """The records of one model dir, compared with the cached ``columns`` (lined up with
    its run dirs, or endless ``repeat(None)`` when nothing is cached) record by record."""
    names = found.names
    records = ModelDirRecords(model_dir)
    run_dirs, values, errors = records.run_dirs, records.values, records.errors
    block: _Block = [[], [], [], [], [], [], []]
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
            kept_inodes.append(ino)
            kept_sizes.append(size)
            kept_mtimes.append(mtime)
            kept_ctimes.append(ctime)
            kept_values.append(value)
            kept_errors.append(error)

    # A record can only be a hit if it was cacheable then, so it still is: ``hits ==
    # len(kept_dirs)`` means every record kept came from the index unchanged.
    return records, block, not (hits == len(kept_dirs) and kept_dirs == cached_dirs), parsed
