"""A JSONL dataset as the sweep's cases: ``cases: {jsonl: data.jsonl, id: task_id}``.

``load_dataset(path, id_field, file)`` reads a JSON Lines file (gzip-compressed too, known by
its magic bytes or a ``.gz`` suffix) and returns a :class:`Dataset`: one
:class:`DatasetCase` per non-blank line, its id the row's ``id_field`` (a string, or an
integer taken as its JSON text), its scalar fields as params (``{params.NAME}``), and the
line itself kept so the run dir can get it as ``case.json``. ``Dataset.fingerprint`` names
the content, so a later command can tell that the file changed under a batch.

Every problem is one :class:`SweepError` line, ``FILE:LINE:1: FIELD: message``, as the sweep
file's own are; a value is never quoted whole (a row may hold anything). Case ids obey the
rule of the sweep file's ids (``batch.sweep.nodes.as_name``), which is reused here.
"""

from __future__ import annotations

import fcntl
import functools
import gzip
import hashlib
import json
import os
import re
import stat
import zlib
from collections.abc import Iterable, Iterator, Mapping
from json.scanner import make_scanner
from pathlib import Path
from typing import Any

import attrs

from batch.errors import SweepError
from batch.sweep.nodes import Document, Node, as_name
from run_support.jsonio import is_text
from run_support.safe_files import describe

_GZIP_MAGIC = b"\x1f\x8b"
#: The only way a row's text can hold a lone surrogate: an escape of one (a pair's half too).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
#: Bumped if what the fingerprint covers changes, so old and new never compare equal.
_FINGERPRINT_VERSION = b"batch-ledger jsonl dataset 1\0"


class RowParams(Mapping[str, Any]):
    """A row's string, number and boolean fields, by name (lists, objects, null and an empty
    name left out), read from the row's bytes when asked for.

    Only the names are kept (one tuple shared by the rows that have the same): a dict per
    row held every value a second time beside the row's bytes (bench/README.md,
    "``plan_dataset.py``"). The row was decoded and checked once when the dataset was read,
    so decoding it again gives the same values and cannot fail.
    """

    __slots__ = ("_names", "_row")

    def __init__(self, row: bytes, names: tuple[str, ...]) -> None:
        self._row = row
        self._names = names

    def __getitem__(self, name: str) -> Any:
        if name not in self._names:
            raise KeyError(name)
        return _scalars(self._row)[name]

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return repr(dict(self.items()))

    def __reduce__(self) -> tuple[Any, ...]:
        return (RowParams, (self._row, self._names))


@functools.lru_cache(maxsize=8)
def _scalars(row: bytes) -> dict[str, Any]:
    """The row's params, decoded as the loader decoded it. Those of the few rows whose jobs
    are starting are kept, so a command's several ``{params.NAME}`` decode their row once;
    only the params, not the row's lists and objects (a row may be 16 MiB)."""
    value: dict[str, Any] = _DECODER.decode(row.decode("utf-8"))
    return {key: value[key] for key in _param_names(value)}


def _param_names(value: dict[str, Any]) -> list[str]:
    """The names of a decoded row's params: its string, number and boolean fields (exact
    types: JSON makes no subclasses), but one named by the empty string."""
    return [key for key, field in value.items() if type(field) in _PARAM_TYPES and key]


@attrs.frozen
class DatasetCase:
    id: str
    #: The row's string, number and boolean fields, by name (lists, objects, null left out).
    params: Mapping[str, Any]
    #: The row exactly as written (UTF-8 JSON, no line break): the run dir's ``case.json``.
    row: bytes
    #: 1-based line in the (decompressed) file.
    line: int


@attrs.frozen
class Dataset:
    """The cases as columns, one item per row (no object per row: a caller that makes its own
    from them, as the sweep's ``CaseSpec``, would otherwise pay for two)."""

    path: Path
    id_field: str
    #: ``DatasetCase.id``, ``.params``, ``.row`` and ``.line`` of each case, in file order.
    ids: tuple[str, ...]
    params: tuple[Mapping[str, Any], ...]
    rows: tuple[bytes, ...]
    lines: tuple[int, ...]
    #: ``sha256:<hex>`` of the decompressed bytes and the id field: equal when a resume
    #: would read the same cases.
    fingerprint: str

    @property
    def cases(self) -> tuple[DatasetCase, ...]:
        return tuple(map(DatasetCase, self.ids, self.params, self.rows, self.lines))

    def snapshot(self, written: str) -> dict[str, Any]:
        """What the batch dir's ``sweep.yaml`` records; ``written`` is the path as written."""
        return {
            "jsonl": written,
            "id": self.id_field,
            "rows": len(self.ids),
            "fingerprint": self.fingerprint,
        }


#: The longest line a dataset may hold (16 MiB): a SWE-bench row is a few hundred KB; a
#: longer "line" is a file that is not JSON Lines, and it would be held whole to be parsed.
MAX_LINE_BYTES = 16 << 20
#: How much is read (and decompressed) at once: memory follows the rows kept, not the file.
_CHUNK = 1 << 20
#: A line with something on it: blank lines (a gzip bomb of newlines) are skipped in C.
_LINE = re.compile(rb"[^\n][^\n]*")  # twice as fast as [^\n]+ over runs of newlines


def load_dataset(path: Path, id_field: str, file: str) -> Dataset:
    """The cases in the JSONL file at ``path``; ``file`` is how messages name it.

    Read as a stream (:data:`_CHUNK` at a time, decompressed as it is read): only the rows
    kept are held, whatever the file's size or its compression ratio. A file that is not
    regular (a FIFO, ``/dev/zero`` through a symlink) and a line longer than
    :data:`MAX_LINE_BYTES` are errors.
    """
    digest = hashlib.sha256(_FINGERPRINT_VERSION)
    digest.update(id_field.encode("utf-8", "surrogatepass") + b"\0")
    doc = Document(file, [], path.parent, {})
    first_line, all_params, rows = _read_rows(
        _lines(_content(path, file), digest, doc), id_field, doc
    )
    if not rows:
        raise SweepError(f"{file}: the dataset has no rows (a sweep needs at least one case)")
    return Dataset(
        path,
        id_field,
        tuple(first_line),
        tuple(all_params),
        tuple(rows),
        tuple(first_line.values()),
        f"sha256:{digest.hexdigest()}",
    )


def _lines(chunks: Iterator[bytes], digest: Any, doc: Document) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` of every line of the content with something on it, the line
    without its line break; the content is added to ``digest`` as it is read."""
    number, carry, first = 1, b"", True
    for chunk in chunks:
        digest.update(chunk)
        if first and chunk:
            first = False
            if chunk.startswith(b"\xef\xbb\xbf"):  # a BOM: not JSON, but common enough
                chunk = chunk[3:]
        data = carry + chunk if carry else chunk
        last = data.rfind(b"\n")
        if last < 0:
            carry = data
            if len(carry) > MAX_LINE_BYTES:
                raise _too_long(doc, number)
            continue
        carry = data[last + 1 :]
        if len(carry) > MAX_LINE_BYTES:
            raise _too_long(doc, number + data.count(b"\n"))
        if data.find(b"\n", 0, MAX_LINE_BYTES + 1) < 0:  # only the first can be that long
            raise _too_long(doc, number)
        if data.isspace():  # blank lines only (a gzip bomb of newlines): counted in C
            number += data.count(b"\n", 0, last + 1)
            continue
        lines = data.split(b"\n")
        lines.pop()  # the carry
        blank = lines.count(b"")
        if blank * 2 <= len(lines):  # the usual file: one Python step per line is cheap
            for offset, line in enumerate(lines):
                if line:
                    yield number + offset, line
            number += len(lines)
            continue
        # Mostly blank: found in C, so a run of newlines costs no Python step per line.
        del lines
        at = 0
        for match in _LINE.finditer(data, 0, last):
            number += data.count(b"\n", at, match.start())
            at = match.start()
            yield number, match.group()
        number += data.count(b"\n", at, last + 1)
    if carry:
        yield number, carry


def _too_long(doc: Document, number: int) -> SweepError:
    return _at(doc, number).error(
        f"longer than {MAX_LINE_BYTES:,} bytes (a line is one case); not read"
    )


def _read_rows(
    lines: Iterable[tuple[int, bytes]], id_field: str, doc: Document
) -> tuple[dict[str, int], list[RowParams], list[bytes]]:
    """Each case's line by its id (in file order: the ids and lines in one), params and row."""
    first_line: dict[str, int] = {}
    all_params: list[RowParams] = []
    shared_names: dict[tuple[str, ...], tuple[str, ...]] = {}
    rows: list[bytes] = []
    decode = _DECODER.decode
    scan = _SCAN
    for number, row in lines:
        if row.endswith(b"\r"):
            row = row[:-1]
        if not row.strip():
            continue
        try:
            text = row.decode("utf-8")
            try:
                # The C scanner alone: decode() adds two whitespace matches per row.
                value, end = scan(text, 0)
            except (StopIteration, ValueError):
                end = -1
            if end != len(text):  # white space around it, or an error: decode() decides
                value = decode(text)
        except UnicodeDecodeError as exc:
            raise _at(doc, number).error(
                f"not UTF-8 text (byte 0x{row[exc.start]:02x} at column {exc.start + 1})"
            ) from None
        except ValueError as exc:  # json.JSONDecodeError, or a NaN refused
            raise _at(doc, number).error(f"not a JSON value: {_json_problem(exc)}") from None
        except RecursionError:
            raise _at(doc, number).error("not a JSON value: nested too deep") from None
        if type(value) is not dict:
            raise _at(doc, number).error(f"each line must be a JSON object, got {_kind(value)}")
        # The only way a row's text can hold a lone surrogate: an escape of one.
        if b"\\u" in row and _SURROGATE_ESCAPE.search(row):
            _check_row_text(value, _at(doc, number))
        ident = value.get(id_field, _MISSING)
        if type(ident) is not str or not ident or not ident.isprintable():
            # The rare id: checked (and refused) as the sweep file's ids are.
            ident = _case_id(ident, _at(doc, number, id_field))
        if ident in first_line:
            raise _at(doc, number).error(
                f"{id_field}: duplicate case id {ident!r} (first at line {first_line[ident]}); "
                "every (case, model) pair must be unique"
            )
        first_line[ident] = number
        # The rows of a dataset mostly have the same params: one tuple of names for all.
        names = tuple(_param_names(value))
        all_params.append(RowParams(row, shared_names.setdefault(names, names)))
        rows.append(row)
    return first_line, all_params, rows


def _content(path: Path, file: str) -> Iterator[bytes]:
    """The file's content (decompressed when it is gzip), :data:`_CHUNK` at a time.

    The path may be a symlink (a dataset kept elsewhere), but what it names must be a
    regular file: a FIFO would block the read forever, ``/dev/zero`` never end.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise SweepError(f"{file}: cannot read the dataset: {exc.strerror or exc}") from None
    with open(fd, "rb") as raw:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise SweepError(
                f"{file}: cannot read the dataset: it is {describe(mode)}, not a regular file"
            )
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        try:
            head = raw.read(2)
            raw.seek(0)
            if not (head == _GZIP_MAGIC or path.suffix == ".gz"):
                yield from iter(lambda: raw.read(_CHUNK), b"")
                return
            with gzip.GzipFile(fileobj=raw) as stream:
                yield from iter(lambda: stream.read(_CHUNK), b"")
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            # "CRC check failed 0x952f3682 != 0x952f367d": the figures say nothing more.
            why = str(exc).split(" 0x")[0]
            raise SweepError(f"{file}: not a readable gzip file: {why}") from None
        except OSError as exc:
            raise SweepError(f"{file}: cannot read the dataset: {exc.strerror or exc}") from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


#: Python's json takes NaN and Infinity; no other reader of case.json would.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
#: The decoder's C scanner: one JSON value at an index, no white space around it.
_SCAN = make_scanner(_DECODER)  # type: ignore[arg-type]  # typeshed: the class is its own arg


def _json_problem(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at column {exc.colno}"
    return str(exc)


def _at(doc: Document, number: int, field: str = "") -> Node:
    """Where a problem is: line ``number`` (1-based) of the dataset, labelled ``field``."""
    return Node(None, field, number - 1, 0, doc)


_MISSING = object()
_PARAM_TYPES = frozenset({str, int, float, bool})


def _case_id(value: Any, where: Node) -> str:
    if value is _MISSING:
        raise where.error(f"{where.label}: missing (every row needs its case id)")
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # JSON has one spelling of an integer (but -0)
    elif not isinstance(value, str):
        raise where.error(
            f"{where.label}: the case id must be a string or integer, got {_kind(value)}"
        )
    if not is_text(value):
        raise where.error(f"{where.label}: not valid Unicode text (a lone surrogate)")
    return as_name(attrs.evolve(where, value=value), "case id")


def _check_row_text(row: dict[str, Any], where: Node) -> None:
    try:
        _check_text(row, where)
    except RecursionError:
        raise where.error("not a JSON value: nested too deep") from None


def _check_text(value: Any, where: Node, field: str = "") -> None:
    """Refuse a lone surrogate (``\\ud800``) anywhere in the row: case.json would hold it."""
    if isinstance(value, str):
        if not is_text(value):
            raise where.error(f"{field or 'a key'}: not valid Unicode text (a lone surrogate)")
    elif isinstance(value, dict):
        for key, item in value.items():
            name = key if not field else f"{field}.{key}"
            if not is_text(key):
                raise where.error(f"{field or 'a key'}: not valid Unicode text (a lone surrogate)")
            _check_text(item, where, name)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_text(item, where, f"{field}[{index}]")


def _kind(value: object) -> str:
    for kinds, name in (
        (type(None), "null"),
        (bool, "a boolean"),
        (int | float, "a number"),
        (str, "a string"),
        (list, "a list"),
        (dict, "an object"),
    ):
        if isinstance(value, kinds):
            return name
    return type(value).__name__
