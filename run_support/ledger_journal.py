"""The ledger journal (``.ledger-journal`` beside the index): it keeps the index current
between reads.

Whoever writes a record (the driver, a Dask worker) appends one line with the record's
signature, taken from the written file itself, and its digest (:func:`journal_record`). A
reader takes journal lines as index entries (``run_support.ledger_scan``: each still used
only while the record's stat matches), and a reader that may write the index folds them
into it and removes the journal; a writer folds it too as it grows. So the first read after
a crash is as fast as a second one.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import threading
import weakref
import zlib
from array import array
from collections.abc import Iterator, KeysView
from pathlib import Path
from typing import Any, BinaryIO

from run_support import jsonio, safe_files
from run_support.atomic import atomic_write_bytes
from run_support.ledger_index import (
    MAX_CACHED_BYTES,
    Digest,
    encode,
    gc_paused,
    load_index,
    save_index,
    with_journal,
)
from run_support.names import INDEX_NAME, JOURNAL_NAME

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
#: A writer folds only while the index is at most this large. A fold holds the whole index
#: decoded (about 1.9 KB a record at its peak, 25 MB at this size) and a driver's heap keeps
#: what a fold took, so folding a large index made the driver of a 200,000-job sweep grow by
#: about 2 KB a job (issue 33). Past it, the journal grows and the next reader that may
#: write the index (a resume) folds it.
FOLD_MAX_INDEX_BYTES = 2 << 20


# --- the journal ---------------------------------------------------------------------------
#
# One line per record written, appended by the writer, never rewritten:
#
#   <crc32 of the rest, 8 hex digits> <JSON of
#       ["<Digest.id>", model_dir, run_dir, inode, size, mtime_ns, ctime_ns, digest]>\n
#
# JSON, as the index: ASCII, and never a raw line break inside. A line is one O_APPEND
# write() under PIPE_BUF, so lines from several processes never interleave. A line without
# its newline (the writer killed mid-append), with a checksum that does not match (a power
# cut before the unsynced journal reached the disk), that does not parse, of another shape
# or of another digest is skipped: the record it names is then read from the file, as
# without a journal. Nothing is fsynced: the record itself is, and the journal is only a
# cache.

#: ``{model_dir: {run_dir: (inode, size, mtime_ns, ctime_ns, digest)}}``
_Entries = dict[str, tuple[int, int, int, int, Any]]


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
    JSON as itself (a NaN) is not journaled.
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
    payload = encode(entry)
    if payload is None or len(payload) > MAX_JOURNAL_LINE - 10:
        return
    if jsonio.loads(payload)[-1] != value:
        return
    line = b"%08x %s\n" % (zlib.crc32(payload), payload)
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


def close_journal() -> None:
    """Close the journal descriptor this process keeps open between records, if any (the
    next record's line opens it again): nothing of the process is then left open on the
    batch dir's filesystem, which can be unmounted."""
    global _appending
    with _appending_lock:
        kept, _appending = _appending, None
    if kept is not None:
        os.close(kept[1])


_DECODER = json.JSONDecoder()


class JournalLines:
    """Where a journal's lines of one digest are, by model dir: a dir's lines are read again
    and decoded only when a scan reaches it (:meth:`take`), so a reader holds neither every
    line decoded (≈ 1.1 KB a record) nor their text (≈ 300 bytes), only 8 bytes a line.
    The journal stays open until the last dir is taken: lines are only ever appended, so
    the bytes at a line's place are the ones checked, even once a fold has replaced the
    file. A later line for a run dir wins."""

    def __init__(self, fd: int | None = None) -> None:
        self._fd = fd
        if fd is not None:
            weakref.finalize(self, os.close, fd)
        #: Each line's offset, shifted, and its length (at most MAX_JOURNAL_LINE + 1).
        self._lines: dict[str, array[int]] = {}

    def __bool__(self) -> bool:
        return bool(self._lines)

    def keys(self) -> KeysView[str]:
        return self._lines.keys()

    def add(self, model_dir: str, offset: int, length: int) -> None:
        places = self._lines.get(model_dir)
        if places is None:
            places = self._lines[model_dir] = array("q")
        places.append(offset << _LENGTH_BITS | length)

    def take(self, model_dir: str) -> _Entries | None:
        """``model_dir``'s entries, decoded now and forgotten here; None when it has none."""
        places = self._lines.pop(model_dir, None)
        if not places or self._fd is None:
            return None
        entries: _Entries = {}
        mask = (1 << _LENGTH_BITS) - 1
        for place in places:
            try:
                line = os.pread(self._fd, place & mask, place >> _LENGTH_BITS)
            except OSError:
                return None
            entry = _entry(line)
            if entry is not None and len(entry) == 8:
                _, _, run_dir, ino, size, mtime, ctime, value = entry
                if type(run_dir) is str:
                    entries[run_dir] = (ino, size, mtime, ctime, value)
        return entries or None

    def items(self) -> Iterator[tuple[str, _Entries]]:
        """Every model dir's entries, each decoded as it is given."""
        for model_dir in list(self._lines):
            entries = self.take(model_dir)
            if entries is not None:
                yield model_dir, entries


_LENGTH_BITS = 13
assert MAX_JOURNAL_LINE + 1 < 1 << _LENGTH_BITS


def _payload(line: bytes) -> bytes | None:
    """A whole line's payload, if its checksum matches (not torn, not damaged)."""
    payload = line[9:-1]
    try:
        if line[-1:] != b"\n" or int(line[:8], 16) != zlib.crc32(payload):
            return None
    except ValueError:
        return None
    return payload


def _entry(line: bytes) -> list[Any] | None:
    payload = _payload(line)
    try:
        entry = jsonio.loads(payload) if payload is not None else None
    except ValueError:
        return None
    return entry if type(entry) is list else None


def load_journal(path: Path, digest: Digest) -> tuple[JournalLines, os.stat_result | None]:
    """The journal's usable lines and the journal's stat, if read."""
    try:
        fd = safe_files.open_fd(path, os.O_RDONLY)
    except OSError:
        return JournalLines(), None
    with open(fd, "rb") as handle:
        return _read_journal(handle, digest)


def _read_journal(handle: BinaryIO, digest: Digest) -> tuple[JournalLines, os.stat_result | None]:
    """:func:`load_journal` from the journal open as ``handle``, read from where it is."""
    st = os.fstat(handle.fileno())
    if st.st_size > MAX_JOURNAL_BYTES:
        return JournalLines(), None
    lines = JournalLines(os.dup(handle.fileno()))
    # Every line of ours starts so: the digest's id, then the model dir's name, which is all
    # that is decoded of a line until a scan reaches its dir.
    prefix = f'[{encode(digest.id).decode()},"'  # type: ignore[union-attr]
    offset = handle.tell()
    # Line by line, never the whole journal in memory (tens of MB for 100,000 records),
    # and never more than a line's worth at once, however long a garbled "line" is.
    for line in iter(functools.partial(handle.readline, MAX_JOURNAL_LINE + 1), b""):
        at, offset = offset, offset + len(line)
        payload = _payload(line)
        try:
            text = payload.decode("ascii") if payload is not None else ""
            if not text.startswith(prefix):  # another digest's, or not one of ours
                continue
            model_dir, _ = _DECODER.raw_decode(text, len(prefix) - 1)
        except ValueError:
            continue
        if type(model_dir) is str:
            lines.add(model_dir, at, len(line))
    return lines, st


@contextlib.contextmanager
def journal_locked(path: Path, expected: os.stat_result | None) -> Iterator[BinaryIO | None]:
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
        if _index_size(batch_dir) > FOLD_MAX_INDEX_BYTES:
            folded, step = False, _NEVER
        else:
            folded = _fold_into_index(batch_dir, digest)
            step = max(FOLD_MIN_BYTES, _index_size(batch_dir) // FOLD_INDEX_SHARE)
        with _appending_lock:
            # Not folded (another process folds it, or the index could not be written):
            # try again once as much more has been appended.
            _fold_at[path] = min(_NEVER, (0 if folded else size) + step)
    finally:
        with _appending_lock:
            _folding.discard(path)


#: A fold mark no journal reaches: this process folds that journal no more.
_NEVER = MAX_JOURNAL_BYTES + 1


def _index_size(batch_dir: Path) -> int:
    try:
        return os.stat(batch_dir / INDEX_NAME).st_size
    except OSError:
        return 0


def _fold_into_index(batch_dir: Path, digest: Digest) -> bool:
    """A writer's fold: the index with the journal's entries of ``digest`` added, written,
    and the journal folded (:func:`fold_journal`); whether it was.

    No record is read or stat'ed: each entry stays tied to its record's signature, checked
    by every reader, as in the journal.
    """
    journal_path, index_path = batch_dir / JOURNAL_NAME, batch_dir / INDEX_NAME
    with journal_locked(journal_path, None) as handle, gc_paused():
        if handle is None:
            return False
        journal, read = _read_journal(handle, digest)
        if not journal or read is None:
            return False
        blocks = load_index(index_path, digest)
        for model_dir, journaled in journal.items():
            blocks[model_dir] = with_journal(blocks.get(model_dir), journaled)
        del journal
        if not save_index(index_path, digest, blocks):
            return False
        fold_journal(journal_path, read)
        return True


def fold_journal(path: Path, folded: os.stat_result) -> None:
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
