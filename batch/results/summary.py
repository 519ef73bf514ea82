"""``batch-summary.json``: every job's true status and duration, valid at every moment.

Written by the driver only (never by workers); read by ``batch status``, ``batch stats``,
``batch report`` and downstream tools. Format: schema 1, documented in ``docs/summary.md``
with a JSON Schema in ``docs/schemas/batch-summary.schema.json``. Adding keys is fine;
renaming or removing one needs ``SUMMARY_SCHEMA`` to go up and a CHANGELOG entry.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

from batch.layout import SUMMARY_NAME
from batch.plan.jobs import STATUSES, Job
from run_support import jsonio
from run_support.atomic import atomic_write_bytes
from run_support.results import NON_MODEL_FAILURE_CATEGORIES
from run_support.safe_files import read_bytes

SUMMARY_SCHEMA = 1


class SummaryRow(TypedDict):
    """One job of a summary (docs/summary.md, "A job row"), keys in the file's order.

    :func:`job_row` writes every key (``steps`` for multi-step jobs only). A row read back
    (:func:`summary_rows`) is only sure to have string ``case``, ``model`` and ``status``;
    :func:`check_summary` makes every other key absent, null or of its type.
    """

    case: str
    model: str
    status: str
    duration_seconds: NotRequired[float | None]
    resumed: NotRequired[bool | None]
    failure_category: NotRequired[str | None]
    attempts: NotRequired[int | None]
    run_dir: NotRequired[str | None]
    steps: NotRequired[list[dict[str, Any]] | None]
    skip_reason: NotRequired[str | None]
    usage: NotRequired[dict[str, int | float] | None]
    reason: NotRequired[str | None]
    repeat: NotRequired[int | None]
    score: NotRequired[float | None]


def job_row(job: Job) -> SummaryRow:
    row: SummaryRow = {
        "case": job.case,
        "model": job.model,
        "status": job.status,
        "duration_seconds": None
        if job.duration_seconds is None
        else round(job.duration_seconds, 3),
        "resumed": job.resumed,
        "failure_category": job.failure_category,
        "attempts": job.attempts,
        "run_dir": job.run_dir,
    }
    if job.steps is not None:
        # Multi-step jobs only (additive key): each step's status and duration.
        row["steps"] = [
            {key: step.get(key) for key in _STEP_KEYS}
            for step in job.steps
            if isinstance(step, dict)
        ]
    if job.skip_reason is not None:
        # Additive: why a policy did not start the job (docs/policies.md).
        row["skip_reason"] = job.skip_reason
    # Additive keys (docs/summary.md): the job's spend when it reported any, and why a job
    # that did not pass ended as it did.
    if job.usage:
        row["usage"] = job.usage
    if job.reason is not None and job.status in _REASON_STATUSES:
        row["reason"] = job.reason
    # Additive, as in the records: a row without ``repeat`` is repeat 1, so a sweep without
    # repeats writes what it wrote before they existed.
    if job.repeat != 1:
        row["repeat"] = job.repeat
    if job.score is not None:
        row["score"] = job.score
    return row


_REASON_STATUSES = frozenset({"failed", "error"})


_STEP_KEYS = ("name", "status", "duration_seconds")


_STATUS = operator.attrgetter("status")


def count_statuses(jobs: Iterable[Job]) -> dict[str, int]:
    """Jobs per status, with every status present (zero where none)."""
    totals = dict.fromkeys(STATUSES, 0)
    # Counted in C: a running sweep's summary counts all its jobs at every rewrite.
    for status, jobs_in_it in Counter(map(_STATUS, jobs)).items():
        totals[status] += jobs_in_it
    return totals


class SummaryLines:
    """The encoded rows of a job list whose jobs change one at a time (a running sweep): a
    job's row is encoded again only once the job is marked :meth:`changed`, so a rewrite
    costs in proportion to the jobs that changed since the last one, and what the driver
    keeps per job is one line of bytes, not a row dict beside it (docs/design.md, "What the
    driver holds per job").

    ``changed()`` without a job (or with a job that is none of the list's) marks every job.
    A changed job is kept by its ``id`` and found by one pass over the list at the next
    read (in C, ~20 ms at 200,000 jobs, of a rewrite's ~130 ms), not by a map from
    every job to its position (89 bytes a job).
    """

    def __init__(self, jobs: Sequence[Job]) -> None:
        self._jobs = jobs
        self._texts: list[bytes] = []
        self._changed: set[int] = set()
        self._all = True

    def changed(self, job: Job | None = None) -> None:
        """``job`` (every job when None) may have changed since the lines were last read."""
        if job is None:
            self._all = True
        else:
            self._changed.add(id(job))

    def texts(self) -> list[bytes]:
        """Each job's row as :func:`row_text` encodes :func:`job_row` now, in the list's order."""
        jobs, changed = self._jobs, self._changed
        if not self._all and len(self._texts) == len(jobs) and changed:
            found = list(
                itertools.compress(itertools.count(), map(changed.__contains__, map(id, jobs)))
            )
            texts = self._texts
            for position in found:
                texts[position] = row_text(job_row(jobs[position]))
            self._all = len(found) < len(changed)  # a job that is none of the list's
        if self._all or len(self._texts) != len(jobs):
            # The old lines go first: the last summary of a sweep encodes every row afresh,
            # and must not hold two lines of every job while it does.
            self._texts = []
            self._texts = [row_text(job_row(job)) for job in jobs]
        self._all = False
        changed.clear()
        return self._texts


def build_summary(
    jobs: Sequence[Job],
    *,
    batch_id: str,
    state: str,
    started_at: str,
    finished_at: str | None,
    elapsed_seconds: float,
    max_concurrent: int,
    non_model_categories: Collection[str] = NON_MODEL_FAILURE_CATEGORIES,
    halt: Mapping[str, str] | None = None,
    with_rows: bool = True,
) -> dict[str, Any]:
    """The summary document for ``jobs`` as they stand now (a pure view of the job list).

    ``halt`` (``{rule, mode, message}``): what stopped a ``halted`` batch; additive, only
    when given. ``with_rows=False``: ``jobs`` is left empty, for a writer that keeps the
    rows' text itself (:class:`SummaryLines`).
    """
    summary: dict[str, Any] = {
        "schema": SUMMARY_SCHEMA,
        "batch_id": batch_id,
        "state": state,
        "started_at": started_at,
        "finished_at": finished_at,
        "elapsed_seconds": round(elapsed_seconds, 3),
        "max_concurrent": max_concurrent,
        # What "error" meant for this batch, so readers without the sweep file agree with it.
        "non_model_categories": sorted(non_model_categories),
        "jobs": [job_row(job) for job in jobs] if with_rows else [],
        "totals": count_statuses(jobs),
    }
    if halt is not None:
        summary["halt"] = dict(halt)
    return summary


def write_summary(
    batch_dir: Path, summary: dict[str, Any], lines: SummaryLines | None = None
) -> Path:
    """Atomically replace ``batch_dir/batch-summary.json`` (:func:`summary_pieces`). ``lines``:
    the rows kept for this summary's job list, written in place of ``summary["jobs"]``."""
    path = Path(batch_dir) / SUMMARY_NAME
    atomic_write_bytes(path, summary_pieces(summary, None if lines is None else lines.texts()))
    return path


def row_text(row: Mapping[str, Any]) -> bytes:
    """One row as the summary writes it: compact JSON on a line of its own, indented as an
    element of the top-level ``jobs`` list, so a reader can take the rows a line at a time
    (docs/summary.md, "Reading a large summary"). The C encoder, even without orjson."""
    return b"    " + jsonio.dumps(row)[:-1]


_JOBS = b'\n  "jobs": []'


def summary_pieces(
    summary: Mapping[str, Any], texts: Sequence[bytes] | None = None
) -> Iterator[bytes]:
    """The bytes of ``summary`` in pieces of at most :data:`PIECE_ROWS` rows, so a writer
    never holds the whole file (a million rows are about 200 MB): its top-level keys
    indented by two, each job row on one line (:func:`row_text`). ``texts``: the rows
    already encoded (:class:`SummaryLines`), in place of ``summary["jobs"]``."""
    if texts is None:
        rows = summary.get("jobs")
        texts = [row_text(row) for row in rows] if isinstance(rows, list) else []
    head = jsonio.dumps({**summary, "jobs": []}, indent=True)
    if not texts:
        yield head
        return
    # A top-level key is the only thing indented by two spaces after a newline, and
    # "jobs" is one key: this finds exactly where the rows go.
    at = head.index(_JOBS)
    opening, closing = head[:at] + b'\n  "jobs": [\n', b"\n  ]" + head[at + len(_JOBS) :]
    if len(texts) <= PIECE_ROWS:  # one piece, one write: most summaries
        yield b"".join((opening, b",\n".join(texts), closing))
        return
    yield opening
    for start in range(0, len(texts), PIECE_ROWS):
        if start:
            yield b",\n"
        yield b",\n".join(texts[start : start + PIECE_ROWS])
    yield closing


#: Rows joined into one piece of a write: few system calls, and a piece of a megabyte or so.
PIECE_ROWS = 4096


def read_summary(batch_dir: Path) -> dict[str, Any]:
    """Parse and check ``batch-summary.json`` (:func:`check_summary`); raises ``OSError``,
    or ``ValueError`` naming the first field that is unusable."""
    data = jsonio.loads(read_bytes(Path(batch_dir) / SUMMARY_NAME, limit=None))
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
    # so a reader that streams the rows (batch.results.summary_stream) is not undone here.
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
    try:
        return all(map(math.isfinite, numbers))
    except OverflowError:  # an integer too large for a float
        return False


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
}
_ROW_TYPES: dict[str, tuple[type, ...]] = {
    "case": (str,),
    "model": (str,),
    "status": (str,),
    "duration_seconds": (int, float),
    "resumed": (bool,),
    "failure_category": (str,),
    "attempts": (int,),
    "run_dir": (str,),
    "steps": (list,),
    "skip_reason": (str,),
    "usage": (dict,),
    "reason": (str,),
    "repeat": (int,),
    "score": (int, float),
}
_REQUIRED_ROW_KEYS = ("case", "model", "status")
_REQUIRED_VALUES = operator.itemgetter(*_REQUIRED_ROW_KEYS)
_KIND_NAMES = {
    str: "a string", int: "an integer", float: "a number", bool: "a boolean",
    list: "a list", dict: "an object", type(None): "null",
}  # fmt: skip


def check_summary(data: Any) -> None:
    """Raise ``ValueError`` naming the first field of ``data`` a reader cannot use.

    Each key of the documented format (``docs/summary.md``) must be absent, null or of its
    type; ``case``, ``model`` and ``status`` must be strings; text must be valid Unicode (no
    lone surrogate). A number that is NaN, infinite or too large for a float (a hand-edited
    file) is read as missing: it is set to ``None`` in ``data``.
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
    try:
        return math.isfinite(number)
    except OverflowError:  # an integer too large for a float
        return False


def _kind(value: Any) -> str:
    return _KIND_NAMES.get(type(value), type(value).__name__)


def summary_categories(summary: Mapping[str, Any]) -> frozenset[str]:
    """The non-model failure categories ``summary`` names, or the default set if it names none.

    They say what "error" meant for that batch, so readers without its sweep file agree.
    """
    named = summary.get("non_model_categories")
    return frozenset(map(str, named)) if isinstance(named, list) else NON_MODEL_FAILURE_CATEGORIES


#: A rewrite that took S seconds is followed by the next one no sooner than this many times S
#: later, when that is longer than the interval: the summary takes at most 1/20 of the time.
REWRITE_SHARE = 20


class ThrottledWriter:
    """Calls ``write`` at most once per ``interval`` seconds unless forced, and (unless
    ``interval`` is 0) no sooner than ``REWRITE_SHARE`` times the last write's duration
    after it.

    Rewriting a 10,000-row summary costs tens of milliseconds; doing it after every job of
    a large sweep would dominate the run, so finishes only mark it dirty. A rewrite's cost
    grows with the sweep, so a fixed interval alone would make the driver's cost per job
    grow with it too (a 20,000-row rewrite on a busy machine takes a large part of 2 s).
    """

    def __init__(
        self, write: Callable[[], None], interval: float, clock: Callable[[], float]
    ) -> None:
        self._write = write
        self._interval = interval
        self._gap = interval
        self._clock = clock
        self._last = float("-inf")
        self.dirty = False

    def due(self) -> bool:
        """Whether a write now would keep to the spacing."""
        return self._clock() - self._last >= self._gap

    def changed(self) -> None:
        self.dirty = True
        if self.due():
            self.flush()

    def hold(self) -> None:
        """Count as changed and just written: the next write comes no sooner than the
        spacing allows (or a ``flush``)."""
        self.dirty = True
        self._last = self._clock()

    def flush(self) -> None:
        began = self._clock()
        self._write()
        self._last = self._clock()
        if self._interval > 0:  # 0 asks for every change to be written, whatever it costs
            self._gap = max(self._interval, REWRITE_SHARE * (self._last - began))
        self.dirty = False
