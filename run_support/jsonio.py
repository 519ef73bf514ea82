"""JSON encoding for the ledger: orjson when it is installed, the standard library otherwise.

orjson makes a cold read of a large ledger about 10 % cheaper (``bench/README.md``). Where
orjson refuses input that the standard library reads (``NaN``, ``Infinity``, a UTF-16 file,
a byte-order mark), the standard library is asked too, so installing orjson never makes a
record unreadable. One difference remains: orjson reads an integer outside the 64-bit
range as a float, the standard library as an int.
"""

from __future__ import annotations

import json
from typing import Any

try:  # pragma: no cover - which branch runs depends on the environment
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None

#: Which parser runs, for benchmarks and bug reports.
BACKEND = "json" if _orjson is None else "orjson"


def is_text(value: str) -> bool:
    """Whether ``value`` can be written as UTF-8: it holds no lone surrogate.

    JSON's ``\\ud800`` escapes, YAML's ``"\\ud800"`` and a file name that is not UTF-8
    (read with ``surrogateescape``) all give such strings; they cannot be printed, passed
    in an environment variable or written to a UTF-8 file as they are.
    """
    if value.isascii():
        return True
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def loads(data: bytes | str) -> Any:
    """Parse JSON; raises ``ValueError`` on malformed input whichever backend runs."""
    if _orjson is not None:
        try:
            return _orjson.loads(data)
        except _orjson.JSONDecodeError:
            pass  # the standard library is more lenient; it decides
    try:
        return json.loads(data)
    except RecursionError as exc:
        # Nesting deeper than the interpreter allows is malformed input too, not a crash.
        raise ValueError("JSON nested too deeply") from exc


#: ``json.dumps(obj, separators=(",", ":"))`` makes an encoder per call; a summary writes
#: one compact line per job, so one encoder each is kept (``json.dumps``'s own defaults).
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_COMPACT_ASCII = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"))


def dumps(obj: Any, *, indent: bool = False, ascii_only: bool = False) -> bytes:
    """Serialise to UTF-8 JSON bytes with a trailing newline: indented by 2, or compact.

    Non-ASCII text is kept as is unless ``ascii_only``, which escapes it. Whatever
    :func:`loads` read can be written back: where orjson refuses a value (an integer past
    64 bits) the standard library writes it, and text that is not valid Unicode (a lone
    surrogate from a ``\\ud800`` escape in a job's ``result.json``) is written escaped, as
    it was read, instead of failing the write of a record or summary.
    """
    if _orjson is not None and not ascii_only:
        option = _orjson.OPT_APPEND_NEWLINE | (_orjson.OPT_INDENT_2 if indent else 0)
        try:
            data: bytes = _orjson.dumps(obj, option=option)
            return data
        except _orjson.JSONEncodeError:
            pass  # the standard library writes what orjson refuses; it decides
    if indent:
        text = indented(obj, ensure_ascii=ascii_only)
    else:  # compact, as orjson writes it
        text = (_COMPACT_ASCII if ascii_only else _COMPACT).encode(obj)
    try:
        return (text + "\n").encode()
    except UnicodeEncodeError:
        return dumps(obj, indent=indent, ascii_only=True)


def indented(obj: Any, *, ensure_ascii: bool = True) -> str:
    """``json.dumps(obj, indent=2, ensure_ascii=...)``, the same text, at C speed.

    The standard library indents in pure Python (100,000 summary rows: seconds). Here every
    list or object of plain scalars, and every list of such objects (a summary's or a
    plan's rows), is written by the C encoder in one call, with the line break and indent
    as its item separator: a raw line break never occurs inside JSON text, so the
    separators are the only ones. Anything else is written by ``json.dumps`` itself.
    """
    parts: list[str] = []
    _indented(obj, 0, ensure_ascii, parts)
    return "".join(parts)


_SCALARS = frozenset({str, int, float, bool, type(None)})
_ENCODERS: dict[tuple[int, bool], json.JSONEncoder] = {}


def _encoder(level: int, ensure_ascii: bool) -> json.JSONEncoder:
    """A compact C encoder whose item separator breaks the line and indents to ``level``."""
    key = (level, ensure_ascii)
    if key not in _ENCODERS:
        separator = ",\n" + "  " * level
        _ENCODERS[key] = json.JSONEncoder(ensure_ascii=ensure_ascii, separators=(separator, ": "))
    return _ENCODERS[key]


def _flat(value: Any) -> bool:
    """A non-empty object with string keys and values that are plain scalars or empty
    containers (written ``{}`` and ``[]`` indented or not: a record's empty ``result``),
    or such a list."""
    if type(value) is dict:
        return (
            bool(value)
            and all(type(key) is str for key in value)
            and all(_leaf(item) for item in value.values())
        )
    return type(value) is list and bool(value) and all(_leaf(item) for item in value)


def _leaf(value: Any) -> bool:
    kind = type(value)
    return kind in _SCALARS or (kind in _EMPTIABLE and not value)


_EMPTIABLE = frozenset({dict, list})


def _rows(value: Any) -> bool:
    """A non-empty list of non-empty objects with string keys and plain scalar values: the
    rows of a summary or a plan, checked in a few flat passes (not a call per row)."""
    return (
        type(value) is list
        and bool(value)
        and {type(row) for row in value} == {dict}
        and all(value)
        and {type(key) for row in value for key in row} == {str}
        and {type(item) for row in value for item in row.values()} <= _SCALARS
    )


def _indented(obj: Any, level: int, ensure_ascii: bool, out: list[str]) -> None:
    here, inner = "\n" + "  " * level, "\n" + "  " * (level + 1)
    if _flat(obj):
        text = _encoder(level + 1, ensure_ascii).encode(obj)
        out.append(text[0] + inner + text[1:-1] + here + text[-1])
    elif _rows(obj):
        # Rows: "}" then the separator then "{" only ever joins two rows.
        rows = "\n" + "  " * (level + 2)
        text = _encoder(level + 2, ensure_ascii).encode(obj)[2:-2]
        text = text.replace("}," + rows + "{", inner + "}," + inner + "{" + rows)
        out += ("[", inner, "{", rows, text, inner, "}", here, "]")  # no copy of the rows
    elif type(obj) is dict and obj and all(type(key) is str for key in obj):
        encode = _encoder(0, ensure_ascii).encode
        out.append("{")
        for number, (key, value) in enumerate(obj.items()):
            out.append(("," if number else "") + inner + encode(key) + ": ")
            _indented(value, level + 1, ensure_ascii, out)
        out.append(here + "}")
    elif type(obj) is list and obj:
        out.append("[")
        for number, value in enumerate(obj):
            out.append(("," if number else "") + inner)
            _indented(value, level + 1, ensure_ascii, out)
        out.append(here + "]")
    elif _leaf(obj):
        # Written alike indented or not: the cached C encoder, not a new encoder per value
        # (json.dumps with an indent builds one each call: ~8 us, 14 per run-meta.json).
        out.append(_encoder(0, ensure_ascii).encode(obj))
    else:  # an odd container: the standard library, re-indented
        text = json.dumps(obj, indent=2, ensure_ascii=ensure_ascii)
        out.append(text.replace("\n", here) if level else text)
