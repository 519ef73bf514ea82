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
import gc
import json
import re
import zlib
from collections.abc import Callable, Iterator, Mapping
from itertools import repeat
from pathlib import Path
from typing import Any

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
# A JSON header line, then a JSON body:
#
#   {"schema": 4, "digest": "<Digest.id>", "bytes": <the body's length>, "crc32": <of it>}\n
#   {model_dir: [run_dirs, inodes, sizes, mtimes, ctimes, values, errors]}
#
# Each model dir is a block of seven parallel lists, run dirs sorted by name. The body is
# parsed only after its length and checksum matched, by a parser that allocates no more
# than a small multiple of what it reads (JSON declares no length to trust, unlike marshal,
# which once took a forged "2**31 items" for 16 GiB). Any bytes that do not parse as this
# format drop the index: the records are read instead.

Block = list[list[Any]]
COLUMNS = 7
#: A larger index is not read (as the journal: the records are parsed instead).
MAX_INDEX_BYTES = 1 << 30
#: The header is one short line; a longer "header" is not one.
_MAX_HEADER = 4096


@attrs.frozen
class Encoded:
    """A block as the index held it: ``text[start:end]``, written back as it was read by
    a save that finds its model dir unchanged (no decode, no encode, no copy until then)."""

    text: str
    start: int
    end: int


class IndexBlocks:
    """An index's blocks, each decoded when a scan asks for it and held no longer.

    A scan walks the model dirs in name order, the order the index holds them in, so each
    block is decoded when its dir is reached and can be dropped with that dir: the index is
    never held decoded whole (about 1 KB a record, where its text is 270 B). A block asked
    for out of order is decoded on the way to it. Bytes that stop parsing as this format
    end the blocks there: the dirs past that point are read from their records.
    """

    def __init__(self, text: str = "", start: int = 0) -> None:
        self._text = text
        self._at = start
        self._done = not text
        self._broken = False
        self._ahead: dict[str, tuple[Any, Encoded]] = {}
        if text:
            self._at = self._skip(start)
            if text[self._at : self._at + 1] != "{":
                self._stop(broken=True)
            else:
                self._at = self._skip(self._at + 1)
                if text[self._at : self._at + 1] == "}":
                    self._finish(self._at + 1)

    def take(self, model_dir: str) -> tuple[Any, Encoded | None]:
        """``model_dir``'s block (None when the index has none) and its text as read."""
        found = self._ahead.pop(model_dir, None)
        while found is None and not self._done:
            name = self._name()
            # The index holds its dirs in name order, as a scan asks for them: a later name
            # means this dir has no block (and the later one is not decoded yet).
            if name is None or name > model_dir:
                break
            entry = self._next()
            if entry is None:
                break
            if name == model_dir:
                return entry
            self._ahead.setdefault(name, entry)
        return found if found is not None else (None, None)

    def untouched(self) -> bool:
        """Whether every block was taken from a well-formed index: nothing in it is for a
        dir the scan did not reach, and nothing of it failed to parse."""
        if self._ahead:
            return False
        if not self._done and self._next() is not None:
            return False
        return not self._broken

    def _name(self) -> str | None:
        """The next block's name, read but not taken; None at the end or where the index
        stops parsing."""
        try:
            name, _ = _DECODER.raw_decode(self._text, self._at)
        except (ValueError, RecursionError):
            self._stop(broken=True)
            return None
        if type(name) is not str:
            self._stop(broken=True)
            return None
        return name

    def _next(self) -> tuple[Any, Encoded] | None:
        """The next block and its text, and the position moved past it; a block that
        parsed is given even if what follows it does not (which ends the blocks)."""
        text = self._text
        try:
            _, at = _DECODER.raw_decode(text, self._at)
            at = self._skip(at)
            if text[at : at + 1] != ":":
                raise ValueError("not a block")
            start = self._skip(at + 1)
            block, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            self._stop(broken=True)
            return None
        at = self._skip(end)
        if text[at : at + 1] == ",":
            self._at = self._skip(at + 1)
        elif text[at : at + 1] == "}":
            self._finish(at + 1)
        else:
            self._stop(broken=True)
        return block, Encoded(text, start, end)

    def _skip(self, at: int) -> int:
        return _WHITESPACE.match(self._text, at).end()  # type: ignore[union-attr]

    def _finish(self, at: int) -> None:
        self._stop(broken=self._skip(at) != len(self._text))

    def _stop(self, *, broken: bool) -> None:
        self._done, self._broken = True, self._broken or broken
        if broken:
            self._ahead.clear()  # an index that does not parse is not used past that point


_DECODER = json.JSONDecoder()
_WHITESPACE = re.compile(r"[ \t\n\r]*")


def open_index(path: Path, digest: Digest) -> IndexBlocks:
    """The index's blocks, to be taken a model dir at a time; none when it is not usable
    (unreadable, another digest's, damaged: its length or checksum does not match)."""
    try:
        data = safe_files.read_bytes(path, limit=MAX_INDEX_BYTES)
        end = data.find(b"\n", 0, _MAX_HEADER)
        header = jsonio.loads(data[:end]) if end >= 0 else None
        if (
            not isinstance(header, dict)
            or header.get("schema") != INDEX_SCHEMA
            or header.get("digest") != digest.id
            or header.get("bytes") != len(data) - end - 1
        ):
            return IndexBlocks()
        with memoryview(data) as view:
            if header.get("crc32") != zlib.crc32(view[end + 1 :]):
                return IndexBlocks()
        # Text the size of the file and nothing more: no copy of the body made to parse it.
        text = data.decode("ascii")
    except (OSError, ValueError):
        return IndexBlocks()
    del data
    return IndexBlocks(text, end + 1)


def load_index(path: Path, digest: Digest) -> dict[str, Any]:
    """``{model_dir: block}`` from the index (decoded whole), or ``{}`` when it is not
    usable; a body that does not parse whole gives ``{}`` too."""
    index = open_index(path, digest)
    blocks: dict[str, Any] = {}
    while not index._done and (name := index._name()) is not None:
        entry = index._next()
        if entry is not None:
            blocks.setdefault(name, entry[0])
    return blocks if not index._broken else {}


#: One encoder for every entry: ``json.dumps`` with separators builds one per call (~8 µs).
_ENCODER = json.JSONEncoder(separators=(",", ":"))


def encode(value: Any) -> bytes | None:
    """``value`` as the cache writes it (JSON, ASCII); None when it cannot be (an integer
    too long for ``str``)."""
    try:
        return _ENCODER.encode(value).encode()
    except ValueError:
        return None


def encoded(block: Block) -> Encoded | Block:
    """``block`` as the index will write it, made now; the block itself when it cannot be
    (a digest holding what JSON cannot write, which no save will write either)."""
    try:
        text = _ENCODER.encode(block)
    except ValueError:
        return block
    return Encoded(text, 0, len(text))


def save_index(path: Path, digest: Digest, blocks: Mapping[str, Block | Encoded]) -> bool:
    """Write the index (a block given as :class:`Encoded` is written as it was read);
    False when it could not be written."""
    # A block at a time: the body is never held as text and again as bytes.
    pieces = [b"{"]
    for model_dir, block in blocks.items():
        if isinstance(block, Encoded):
            value: bytes | None = block.text[block.start : block.end].encode("ascii")
        else:
            value = encode(block)
        if value is None:  # a digest holding what JSON cannot write: no index this time
            return False
        pieces += [b"," if len(pieces) > 1 else b"", encode(model_dir) or b'""', b":", value]
    pieces.append(b"}")
    size = sum(map(len, pieces))
    crc = 0
    for piece in pieces:
        crc = zlib.crc32(piece, crc)
    header = {"schema": INDEX_SCHEMA, "digest": digest.id, "bytes": size, "crc32": crc}
    try:
        atomic_write_bytes(path, [jsonio.dumps(header), *pieces], fsync=False)
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
