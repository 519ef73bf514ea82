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
        text = json.dumps(obj, ensure_ascii=ascii_only, indent=2)
    else:  # compact, as orjson writes it
        text = json.dumps(obj, ensure_ascii=ascii_only, separators=(",", ":"))
    try:
        return (text + "\n").encode()
    except UnicodeEncodeError:
        return dumps(obj, indent=indent, ascii_only=True)
