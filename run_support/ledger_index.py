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
import zlib
from collections.abc import Callable, Iterator
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


def load_index(path: Path, digest: Digest) -> dict[str, Any]:
    """``{model_dir: block}`` from the index, or ``{}`` when it is not usable."""
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
            return {}
        with memoryview(data) as view:
            if header.get("crc32") != zlib.crc32(view[end + 1 :]):
                return {}
        blocks = jsonio.loads(data[end + 1 :])
    except (OSError, ValueError):
        return {}
    return blocks if type(blocks) is dict else {}


#: One encoder for every entry: ``json.dumps`` with separators builds one per call (~8 µs).
_ENCODER = json.JSONEncoder(separators=(",", ":"))


def encode(value: Any) -> bytes | None:
    """``value`` as the cache writes it (JSON, ASCII); None when it cannot be (an integer
    too long for ``str``)."""
    try:
        return _ENCODER.encode(value).encode()
    except ValueError:
        return None


def save_index(path: Path, digest: Digest, blocks: dict[str, Block]) -> bool:
    """Write the index; False when it could not be written."""
    body = encode(blocks)
    if body is None:  # a digest holding what JSON cannot write: no index this time
        return False
    header = {"schema": INDEX_SCHEMA, "digest": digest.id, "bytes": len(body)}
    header["crc32"] = zlib.crc32(body)
    try:
        atomic_write_bytes(path, jsonio.dumps(header) + body, fsync=False)
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
