"""Reading a large ``batch-summary.json`` a line at a time (docs/summary.md, "Reading a
large summary").

The driver writes each job row on a line of its own (``batch.summary.write.row_text``),
so a reader never needs the file's text whole: a million-row summary is about 200 MB of
JSON, and parsing it at once holds that text, its decoded copy and every row together.
:func:`stream_summary` parses the rows one line at a time and the few keys around them as
one small document; a file of any other shape (an older summary with indented rows, a
hand-edited one) is parsed whole, as :func:`batch.summary.read.read_summary` does. Both
give the same checked summary.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, cast

from batch.layout import SUMMARY_NAME
from batch.summary.read import MAX_SUMMARY_BYTES, check_summary
from run_support import jsonio
from run_support.safe_files import UnsafeFileError, open_reader

_JOBS_LINE = b'  "jobs": [\n'
_ROW_START = b"    {"
_JOBS_END = b"  ]"


class _NotLines(Exception):
    """The file is not in the one-row-a-line shape: it is parsed whole instead."""


def stream_summary(batch_dir: Path) -> dict[str, Any]:
    """The summary in ``batch_dir``, parsed and checked (``check_summary``) as
    ``read_summary`` gives it, its rows read a line at a time when the file has that shape.
    Raises ``OSError``, or ``ValueError`` naming the first field that is unusable."""
    path = Path(batch_dir) / SUMMARY_NAME
    with open_reader(path) as handle:
        if os.fstat(handle.fileno()).st_size > MAX_SUMMARY_BYTES:
            # Its lines could be read in bounded memory, but not its fallback whole parse.
            why = f"larger than {MAX_SUMMARY_BYTES:,} bytes, not read"
            raise UnsafeFileError(errno.EFBIG, why, str(path))
        try:
            data = _by_lines(handle)
        except _NotLines:
            handle.seek(0)
            data = jsonio.loads(handle.read())
    check_summary(data)
    return cast(dict[str, Any], data)


def _by_lines(handle: IO[bytes]) -> Any:
    lines = iter(handle)
    head = b"".join(_until(lines, _JOBS_LINE))
    rows: list[Any] = []
    chunk: list[bytes] = []
    # Each row but the last ends with a comma, the last without: checked here because a
    # chunk is parsed on its own, where a missing or doubled comma between two chunks
    # would pass unseen (the whole parse refuses the file, and so must this one).
    last = b",\n"
    for line in lines:
        if line.startswith(_JOBS_END):
            if not chunk and not rows:
                raise _NotLines  # "jobs": [\n  ] is not the driver's empty list
            if last.endswith(b",\n"):
                raise _NotLines
            end = line[len(_JOBS_END) :]
            break
        if not line.startswith(_ROW_START) or not last.endswith(b",\n") or line.endswith(b",,\n"):
            raise _NotLines
        last = line
        chunk.append(line)
        if len(chunk) == _CHUNK:
            rows += _rows(chunk)
            chunk = []
    else:
        raise _NotLines  # no end of the rows: not the driver's shape (or cut short)
    rows += _rows(chunk)
    # The keys around the rows, with an empty jobs list in their place: a small document.
    data = _parsed(head + b'  "jobs": []' + end + handle.read())
    if not isinstance(data, dict) or data.get("jobs") != []:
        raise _NotLines
    data["jobs"] = rows
    return data


#: Rows parsed together: one parse shares its key strings among its rows (a parse per row
#: would give every row its own eight), and a chunk's text is small beside the file's.
_CHUNK = 256


def _rows(chunk: list[bytes]) -> list[Any]:
    if not chunk:
        return []
    text = b"".join(chunk)[:-1]  # its last newline, then the comma after its last row
    rows = _parsed(b"[" + (text[:-1] if text.endswith(b",") else text) + b"]")
    if not isinstance(rows, list):
        raise _NotLines
    return rows


def _parsed(text: bytes) -> Any:
    """Whatever does not parse here is parsed whole, so its error is the whole parse's."""
    try:
        return jsonio.loads(text)
    except ValueError:
        raise _NotLines from None


def _until(lines: Iterator[bytes], marker: bytes) -> Iterator[bytes]:
    """The lines before ``marker`` (consumed, not yielded); ``_NotLines`` when none is."""
    for line in lines:
        if line == marker:
            return
        yield line
    raise _NotLines
