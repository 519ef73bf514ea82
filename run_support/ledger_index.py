"""The ledger index (``.ledger-index`` in a batch dir): what each record was read as, beside
its stat signature, so that a reader parses only the records that changed.

A reader's :class:`Digest` is what is cached of a parsed record; the index names the digest
it holds and carries a checksum of its body, so a reader that digests differently never
takes another's entries and a damaged index is never trusted. The index is an optimisation
only: an unreadable, foreign, damaged or unwritable index is ignored. The journal that keeps
it current between reads is ``run_support.ledger_journal``; the reader that decides what is
still valid is ``run_support.ledger_scan``. The format: ``docs/ledger.md``.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import gc
import itertools
import json
import operator
import os
import re
import weakref
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import repeat
from pathlib import Path
from typing import Any, BinaryIO

import attrs

from run_support import jsonio, safe_files
from run_support.atomic import atomic_write_bytes

INDEX_SCHEMA = 4
#: Larger records are re-read every time rather than copied into the index.
MAX_CACHED_BYTES = 1 << 20


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


# --- the index file -----------------------------------------------------------------------
#
# A JSON header line, then a JSON body, a block to a line, model dirs in name order:
#
#   {"schema": 4, "digest": "<Digest.id>", "bytes": <the body's length>, "crc32": <of it>}\n
#   {\n
#   "model_dir":[run_dirs, inodes, sizes, mtimes, ctimes, values, errors],\n
#   ...
#   "model_dir":[...]\n
#   }
#
# Each model dir is a block of seven parallel lists, run dirs sorted by name. The body is
# parsed only after its length and checksum matched, by a parser that allocates no more
# than a small multiple of what it reads (JSON declares no length to trust, unlike marshal,
# which once took a forged "2**31 items" for 16 GiB). A body in any other JSON layout (one
# line, as first written) is read as text. Bytes that stop parsing as this format end the
# blocks there: the dirs past that point are read from their records.

Block = list[list[Any]]
COLUMNS = 7
#: A larger index is not read (as the journal: the records are parsed instead).
MAX_INDEX_BYTES = 1 << 30
#: The header is one short line; a longer "header" is not one.
_MAX_HEADER = 4096


@attrs.frozen
class Encoded:
    """A block as JSON text, ``text[start:end]``: as read from an index held as text, or as
    encoded by the scan that changed it; a save writes it as it is."""

    text: str
    start: int
    end: int

    def data(self) -> bytes:
        return self.text[self.start : self.end].encode("ascii")


class _Source:
    """An index file held open while its blocks may still be written back from it: a
    replaced index keeps its old inode's bytes, which are the bytes that were checked."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        weakref.finalize(self, os.close, fd)


@attrs.frozen
class InFile:
    """A block as an index file held it, ``length`` bytes at ``offset``: written back by a
    save that finds its model dir unchanged, never decoded or encoded again, and never
    held in memory until then."""

    source: _Source
    offset: int
    length: int

    def data(self) -> bytes:
        data = os.pread(self.source.fd, self.length, self.offset)
        if len(data) != self.length:
            raise OSError(errno.EIO, "index shorter than when read")
        return data


AsRead = Encoded | InFile


@attrs.frozen
class _Entry:
    """One block of an index, its name read, its body not decoded until asked for."""

    name: str
    decode: Callable[[], Any]
    as_read: AsRead


class IndexBlocks:
    """An index's blocks, each decoded when a scan asks for it and held no longer.

    A scan walks the model dirs in name order, the order the index holds them in, so each
    block is decoded when its dir is reached and can be dropped with that dir: the index is
    never held decoded whole (about 1 KB a record), nor, when written a block to a line as
    :func:`save_index` writes it, as text (270 B a record). A block asked for out of order
    is decoded on the way to it if it lies ahead. Bytes that stop parsing as this format
    end the blocks there: the dirs past that point are read from their records.
    """

    def __init__(self, entries: Iterable[_Entry | None] = ()) -> None:
        self._entries = iter(entries)
        self._pending: _Entry | None = None
        self._done = False
        self._broken = False
        self._ahead: dict[str, tuple[Any, AsRead]] = {}

    def take(self, model_dir: str) -> tuple[Any, AsRead | None]:
        """``model_dir``'s block (None when the index has none) and where it was read."""
        found = self._ahead.pop(model_dir, None)
        while found is None:
            entry = self._peek()
            # The index holds its dirs in name order, as a scan asks for them: a later name
            # means this dir has no block (and the later one is not decoded yet).
            if entry is None or entry.name > model_dir:
                break
            self._pending = None
            block = self._decoded(entry)
            if block is None:
                break
            if entry.name == model_dir:
                return block
            self._ahead.setdefault(entry.name, block)
        return found if found is not None else (None, None)

    def untouched(self) -> bool:
        """Whether every block was taken from a well-formed index: nothing in it is for a
        dir the scan did not reach, and nothing of it failed to parse."""
        if self._ahead or self._peek() is not None:
            return False
        return not self._broken

    def blocks(self) -> dict[str, Any]:
        """Every block not taken yet, decoded; ``{}`` if any of the index does not parse."""
        found: dict[str, Any] = {}
        while (entry := self._peek()) is not None:
            self._pending = None
            block = self._decoded(entry)
            if block is not None:
                found.setdefault(entry.name, block[0])
        return {} if self._broken else found

    def _peek(self) -> _Entry | None:
        if self._pending is None and not self._done:
            entry = next(self._entries, _END)
            if entry is _END or entry is None:  # the end, or where the index stops parsing
                self._stop(broken=entry is None)
            else:
                self._pending = entry
        return self._pending

    def _decoded(self, entry: _Entry) -> tuple[Any, AsRead] | None:
        try:
            return entry.decode(), entry.as_read
        except (ValueError, RecursionError):
            self._stop(broken=True)
            return None

    def _stop(self, *, broken: bool) -> None:
        self._done, self._broken = True, self._broken or broken
        self._pending = None
        if broken:
            self._ahead.clear()  # an index that does not parse is not used past that point


_END: Any = object()
_DECODER = json.JSONDecoder()
_WHITESPACE = re.compile(r"[ \t\n\r]*")
#: How :func:`save_index` lays out a body: a block to a line.
_LINES_START, _LINE_END, _LINES_END = b"{\n", b",\n", b"\n}"


def _decoder_of(text: str, start: int, end: int) -> Callable[[], Any]:
    def decode() -> Any:
        block, at = _DECODER.raw_decode(text, start)
        if at != end:
            raise ValueError("not a block")
        return block

    return decode


def _text_entries(text: str) -> Iterator[_Entry | None]:
    """The entries of a body held as text, in any JSON layout of an object of blocks; a
    None entry ends them where the text stops parsing as one."""

    def skip(at: int) -> int:
        return _WHITESPACE.match(text, at).end()  # type: ignore[union-attr]

    at = skip(0)
    if text[at : at + 1] != "{":
        yield None
        return
    at = skip(at + 1)
    if text[at : at + 1] == "}":
        if skip(at + 1) != len(text):
            yield None
        return
    while True:
        try:
            name, at = _DECODER.raw_decode(text, at)
            at = skip(at)
            if type(name) is not str or text[at : at + 1] != ":":
                raise ValueError("not a block")
            start = skip(at + 1)
            # The block's end is only known once it is decoded: a body held as text (one
            # not laid out a block to a line) decodes each block it passes.
            _, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            yield None
            return
        yield _Entry(name, _decoder_of(text, start, end), Encoded(text, start, end))
        at = skip(end)
        if text[at : at + 1] == "}" and skip(at + 1) == len(text):
            return
        if text[at : at + 1] != ",":
            yield None
            return
        at = skip(at + 1)


def _line_entries(handle: BinaryIO, source: _Source, start: int) -> Iterator[_Entry | None]:
    """The entries of a body laid out a block to a line (:func:`save_index`), read a line
    at a time from ``handle`` positioned just past its first line."""
    offset = start
    while True:
        line = handle.readline(MAX_INDEX_BYTES)
        if line == b"}":
            if handle.read(1):
                yield None
            return
        last = not line.endswith(_LINE_END)
        if last and not line.endswith(b"\n"):
            yield None
            return
        try:
            text = line[: -len(_LINE_END) if not last else -1].decode("ascii")
            name, at = _DECODER.raw_decode(text, 0)
            if type(name) is not str or text[at : at + 1] != ":":
                raise ValueError("not a block")
        except (ValueError, RecursionError):
            yield None
            return
        yield _Entry(
            name,
            _decoder_of(text, at + 1, len(text)),
            InFile(source, offset + at + 1, len(text) - at - 1),
        )
        offset += len(line)
        if last:
            if handle.read() != b"}":
                yield None
            return


def open_index(path: Path, digest: Digest) -> IndexBlocks:
    """The index's blocks, to be taken a model dir at a time; none when it is not usable
    (unreadable, another digest's, damaged: its length or checksum does not match)."""
    try:
        fd = safe_files.open_fd(path, os.O_RDONLY)
    except OSError:
        return IndexBlocks()
    source = _Source(fd)
    handle = open(fd, "rb", closefd=False)  # noqa: SIM115 - read from by the entries
    try:
        size = os.fstat(fd).st_size
        head = handle.readline(_MAX_HEADER)
        header = jsonio.loads(head) if head.endswith(b"\n") else None
        body = size - len(head)
        if (
            not isinstance(header, dict)
            or size > MAX_INDEX_BYTES
            or header.get("schema") != INDEX_SCHEMA
            or header.get("digest") != digest.id
            or header.get("bytes") != body
        ):
            return IndexBlocks()
        # The checksum over the body before any of it is used, read in pieces.
        crc = 0
        for piece in iter(functools.partial(handle.read, 1 << 20), b""):
            crc = zlib.crc32(piece, crc)
        if header.get("crc32") != crc or handle.tell() != size:
            return IndexBlocks()
        handle.seek(len(head))
        if handle.read(len(_LINES_START)) == _LINES_START:
            return IndexBlocks(_line_entries(handle, source, len(head) + len(_LINES_START)))
        # Laid out otherwise (one line, as schema 4 was first written): held as text, the
        # size of the body and nothing more.
        handle.seek(len(head))
        text = handle.read().decode("ascii")
    except (OSError, ValueError):
        return IndexBlocks()
    return IndexBlocks(_text_entries(text))


def load_index(path: Path, digest: Digest) -> dict[str, Any]:
    """``{model_dir: block}`` from the index (decoded whole), or ``{}`` when it is not
    usable; a body that does not parse whole gives ``{}`` too."""
    return open_index(path, digest).blocks()


#: One encoder for every entry: ``json.dumps`` with separators builds one per call (~8 µs).
_ENCODER = json.JSONEncoder(separators=(",", ":"))


def encode(value: Any) -> bytes | None:
    """``value`` as the cache writes it (JSON, ASCII); None when it cannot be (an integer
    too long for ``str``)."""
    try:
        return _ENCODER.encode(value).encode()
    except ValueError:
        return None


class Spill:
    """Where a read keeps the blocks it changed until its save writes them: encoded at once
    into an unnamed file in the batch dir (``O_TMPFILE``: nothing is left if the reader
    dies), so that a resume, which saves only once its first jobs started, holds neither
    the digests (≈ 1 KB a record) nor their text (≈ 270 bytes) meanwhile. Where no such
    file can be made or written (a filesystem without ``O_TMPFILE``, a full disk), a block
    is kept as text in memory instead."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._source: _Source | None = None
        self._size = 0
        self._tried = False

    def keep(self, block: Block) -> AsRead | Block:
        """``block`` as the index will write it; the block itself when it cannot be encoded
        (a digest holding what JSON cannot write, which no save will write either)."""
        try:
            text = _ENCODER.encode(block)
        except ValueError:
            return block
        source = self._file()
        if source is not None:
            data = text.encode("ascii")
            try:
                written = os.pwrite(source.fd, data, self._size)
            except OSError:
                written = -1
            if written == len(data):
                self._size += written
                return InFile(source, self._size - written, written)
        return Encoded(text, 0, len(text))

    def _file(self) -> _Source | None:
        if not self._tried:
            self._tried = True
            try:
                fd = os.open(self._directory, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
            except OSError:
                return None
            self._source = _Source(fd)
        return self._source


_first = operator.itemgetter(0)


def save_index(path: Path, digest: Digest, blocks: Mapping[str, Block | AsRead]) -> bool:
    """Write the index, a block to a line (a block given as read is written as it was read);
    False when it could not be written."""

    def pieces() -> Iterator[bytes]:
        # A block at a time, twice (the header's length and checksum first): the body is
        # never held whole.
        yield _LINES_START
        # In name order, the order a scan asks for them (IndexBlocks.take).
        for n, (model_dir, block) in enumerate(sorted(blocks.items(), key=_first)):
            value = block.data() if isinstance(block, Encoded | InFile) else encode(block)
            if value is None:
                raise ValueError("a digest holding what JSON cannot write")
            yield b"%s%s:%s" % (_LINE_END if n else b"", encode(model_dir) or b'""', value)
        yield _LINES_END if blocks else b"}"

    try:
        size = crc = 0
        for piece in pieces():
            size, crc = size + len(piece), zlib.crc32(piece, crc)
        header = {"schema": INDEX_SCHEMA, "digest": digest.id, "bytes": size, "crc32": crc}
        atomic_write_bytes(path, itertools.chain([jsonio.dumps(header)], pieces()), fsync=False)
    except ValueError:  # no index this time
        return False
    except OSError:
        # A read-only batch dir (someone else's, an archive) still reads, just uncached.
        return False
    return True


def well_formed(block: Any) -> bool:
    """Whether a cached ``block`` is seven lists of one length."""
    return (
        type(block) is list
        and len(block) == COLUMNS
        and all(type(column) is list for column in block)
        and len({len(column) for column in block}) == 1
    )


def aligned(block: Any, run_dirs: list[str]) -> tuple[list[str], tuple[Any, ...]]:
    """The run dirs a cached block holds, and its columns lined up with ``run_dirs``.

    A block that is not seven lists of one length is treated as empty.
    """
    if not well_formed(block):
        return [], (repeat(None),) * (COLUMNS - 1)
    cached_dirs = block[0]
    if cached_dirs == run_dirs:  # the usual case: nothing added or removed since
        return cached_dirs, tuple(block[1:])
    position = {name: i for i, name in enumerate(cached_dirs) if type(name) is str}
    rows = [position.get(name) for name in run_dirs]
    columns = tuple([None if i is None else column[i] for i in rows] for column in block[1:])
    return cached_dirs, columns


def with_journal(block: Any, journaled: dict[str, tuple[int, int, int, int, Any]]) -> Block:
    """``block`` (an index block, or None) updated with a model dir's journal entries."""
    rows: dict[str, tuple[Any, ...]] = {}
    if well_formed(block):
        for row in zip(*block, strict=True):
            if type(row[0]) is str:
                rows[row[0]] = row[1:]
    for run_dir, (ino, size, mtime, ctime, value) in journaled.items():
        rows[run_dir] = (ino, size, mtime, ctime, value, None)
    names = sorted(rows)
    columns = list(zip(*(rows[name] for name in names), strict=True)) or [()] * (COLUMNS - 1)
    return [names, *(list(column) for column in columns)]
