"""Reading ``batch-summary.json`` back: parsed and checked, so that no reader misreads a row.

The writing side is ``batch.summary.write``; a large file read a line at a time is
``batch.summary.stream``, which checks it here too. What is checked is the
documented format (``docs/summary.md``): each key absent, null or of its type, text valid
Unicode, numbers finite and within ±1e15 (a hand-edited file's NaN or 1e300 is read as
missing: ``run_support.numbers``).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, cast

from batch.layout import SUMMARY_NAME
from batch.summary.row import REQUIRED_ROW_KEYS, ROW_TYPES, SummaryRow
from run_support import jsonio
from run_support.numbers import all_in_range, finite_number
from run_support.results import NON_MODEL_FAILURE_CATEGORIES
from run_support.safe_files import read_bytes

#: The largest summary read: a million jobs' is about 200 MB. A larger file is refused
#: before it is read (a sparse file of 4 GB would take as much memory, and minutes).
MAX_SUMMARY_BYTES = 512 << 20


def read_summary(batch_dir: Path) -> dict[str, Any]:
    """Parse and check ``batch-summary.json`` (:func:`check_summary`); raises ``OSError``
    (a FIFO, a symlink, past :data:`MAX_SUMMARY_BYTES`), or ``ValueError`` naming the first
    field that is unusable."""
    data = jsonio.loads(read_bytes(Path(batch_dir) / SUMMARY_NAME, MAX_SUMMARY_BYTES))
    check_summary(data)
    return cast(dict[str, Any], data)


def summary_rows(summary: Mapping[str, Any]) -> list[SummaryRow]:
    """The job rows of ``summary``, checked enough that no reader can misread one.

    Raises ``ValueError`` unless ``jobs`` is a list of objects with string ``case``,
    ``model`` and ``status``: the part of :func:`check_summary` every reader needs, cheap
    enough to repeat on a summary :func:`read_summary` already checked.
    """
    jobs = summary.get("jobs")
    if not isinstance(jobs, list):
        raise ValueError("not a batch summary (no 'jobs' list)")
    if not _rows_shaped(jobs):
        for index, row in enumerate(jobs):
            _check_row_shape(index, row)
    return jobs


def column(rows: Iterable[Any], key: str) -> list[Any]:
    """Each row's ``key``, None where it has none, in row order: a column of a summary's
    rows, read in C (a reader of 500,000 rows reads a column at a time)."""
    return list(map(dict.get, rows, itertools.repeat(key)))


def _rows_shaped(rows: list[Any]) -> bool:
    """Whether every row passes :func:`_check_row_shape`, checked in C."""
    if not set(map(type, rows)) <= {dict}:
        return False
    try:
        required = list(map(_REQUIRED_VALUES, rows))
    except KeyError:
        return False
    return set(map(type, itertools.chain.from_iterable(required))) <= {str}


def _rows_clean(rows: list[Any]) -> bool:
    """Whether :func:`check_summary` finds nothing to say or mend in any row: the common
    case, checked in C over every row at once (500,000 rows: about 1 s, where the
    row-by-row check takes 2 to 5). False sends it to the row-by-row check, which names the
    first problem; every string and number of a row is checked here, not only those the
    row-by-row check looks at, so a row it would pass may come to it, never the reverse."""
    if not set(map(type, rows)) <= {dict}:
        return False
    # Each distinct shape once: the keys of a row with the types of their values.
    shapes = set(
        zip(map(tuple, rows), map(tuple, map(map, _TYPE, map(dict.values, rows))), strict=True)
    )
    if not all(map(_clean_shape, shapes)):
        return False
    # A few hundred rows at a time: the lists of their values stay small beside the rows,
    # so a reader that streams the rows (batch.summary.stream) is not undone here.
    for start in range(0, len(rows), _CLEAN_CHUNK):
        chunk = rows[start : start + _CLEAN_CHUNK]
        values = list(itertools.chain.from_iterable(map(dict.values, chunk)))
        types = list(map(type, values))
        strings = list(itertools.compress(values, map(operator.is_, types, _STR)))
        numbers = itertools.compress(values, map(_NUMBERS.__contains__, types))
        if not (_all_text(strings) and _all_finite(numbers)):
            return False
    return True


_TYPE = itertools.repeat(type)
_STR = itertools.repeat(str)
_CLEAN_CHUNK = 256
_NUMBERS = frozenset({int, float})


def _clean_shape(shape: tuple[tuple[str, ...], tuple[type, ...]]) -> bool:
    keys, types = shape
    found = dict(zip(keys, types, strict=True))
    if any(found.get(key) is not str for key in _REQUIRED_ROW_KEYS):
        return False
    return all(
        kind is type(None) or kind in _ROW_TYPES.get(key, (kind,)) for key, kind in found.items()
    )


def _all_text(strings: list[str]) -> bool:
    # Joined, the strings hold a lone surrogate only where one of them does (a join never
    # pairs two halves: they stay two code points, which UTF-8 refuses as well).
    joined = "".join(strings)
    return joined.isascii() or jsonio.is_text(joined)


def _all_finite(numbers: Iterable[float]) -> bool:
    return all_in_range(numbers)


def _check_row_shape(index: int, row: Any) -> None:
    if type(row) is not dict:
        raise ValueError(f"job {index}: is {_kind(row)}, not an object")
    if not all(type(row.get(key)) is str for key in _REQUIRED_ROW_KEYS):
        raise ValueError(f"job {index} needs string 'case', 'model' and 'status'")


# A summary is the driver's, but readers meet hand-edited and foreign ones: every field a
# reader uses is checked here, once, so that no reader can crash on a wrong type. Types are
# compared exactly (a boolean is not a number here). The check costs about as much as
# parsing the file (300,000 rows, stdlib json, loaded 2-core VM: 0.4 to 2.4 times as long).
_TOP_TYPES: dict[str, tuple[type, ...]] = {
    "batch_id": (str,),
    "state": (str,),
    "started_at": (str,),
    "finished_at": (str,),
    "elapsed_seconds": (int, float),
    "max_concurrent": (int,),
    "non_model_categories": (list,),
    "totals": (dict,),
    "halt": (dict,),
    "stop_when": (dict,),
}
#: A row's keys and types: declared once, in ``batch.summary.row``.
_ROW_TYPES = ROW_TYPES
_REQUIRED_ROW_KEYS = REQUIRED_ROW_KEYS
_REQUIRED_VALUES = operator.itemgetter(*_REQUIRED_ROW_KEYS)
_KIND_NAMES = {
    str: "a string", int: "an integer", float: "a number", bool: "a boolean",
    list: "a list", dict: "an object", type(None): "null",
}  # fmt: skip


def check_summary(data: Any) -> None:
    """Raise ``ValueError`` naming the first field of ``data`` a reader cannot use.

    Each key of the documented format (``docs/summary.md``) must be absent, null or of its
    type; ``case``, ``model`` and ``status`` must be strings; text must be valid Unicode (no
    lone surrogate). A number that is NaN, infinite or past ±1e15 (a hand-edited file:
    ``run_support.numbers.finite_number``) is read as missing: it is set to ``None`` in
    ``data``.
    """
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise ValueError("not a batch summary (no 'jobs' list)")
    _check_fields(data, _TOP_TYPES, "")
    for key, value in (data.get("totals") or {}).items():
        if type(value) is not int:
            raise ValueError(f"totals.{key} is {_kind(value)}, not an integer")
    for item in data.get("non_model_categories") or []:
        if type(item) is not str or not jsonio.is_text(item):
            raise ValueError("non_model_categories holds something other than text")
    if _rows_clean(data["jobs"]):
        return
    for index, row in enumerate(data["jobs"]):
        _check_row_shape(index, row)
        _check_fields(row, _ROW_TYPES, f"job {index}: ")


def _check_fields(data: dict[str, Any], types: Mapping[str, tuple[type, ...]], where: str) -> None:
    for key, kinds in types.items():
        value = data.get(key)
        if value is None:
            continue
        kind = type(value)
        if kind not in kinds:
            expected = " or ".join(_KIND_NAMES[k] for k in kinds)
            raise ValueError(f"{where}'{key}' is {_kind(value)}, not {expected} or null")
        if kind is str:
            if not jsonio.is_text(value):
                raise ValueError(f"{where}'{key}' is not valid Unicode text (a lone surrogate)")
        elif float in kinds and not _is_finite(value):
            data[key] = None  # NaN, infinite or past a float: missing, not a crash


def _is_finite(number: float) -> bool:
    return finite_number(number) is not None


def _kind(value: Any) -> str:
    return _KIND_NAMES.get(type(value), type(value).__name__)


def summary_categories(summary: Mapping[str, Any]) -> frozenset[str]:
    """The non-model failure categories ``summary`` names, or the default set if it names none.

    They say what "error" meant for that batch, so readers without its sweep file agree.
    """
    named = summary.get("non_model_categories")
    return frozenset(map(str, named)) if isinstance(named, list) else NON_MODEL_FAILURE_CATEGORIES
