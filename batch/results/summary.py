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
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
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


class SummaryRows:
    """The rows of a job list whose jobs change one at a time (a running sweep): a job's row
    is made again only when the job is marked :meth:`changed`, so a rewrite of the summary
    costs in proportion to the jobs that changed since the last one, not to the sweep.

    ``changed()`` without a job marks every job. A row, once made, is never changed in
    place (a changed job gets a new one) and shares no dict or list with its job, so a
    renderer may tell an unchanged row by identity (``SummaryRenderer(kept_rows=True)``).
    """

    def __init__(self, jobs: Sequence[Job]) -> None:
        self._jobs = jobs
        self._position = {id(job): n for n, job in enumerate(jobs)}
        self._rows: list[SummaryRow] = []
        self._changed: set[int] = set()
        self._all = True

    def changed(self, job: Job | None = None) -> None:
        """``job`` (every job when None, or when ``job`` is none of the list's) may have
        changed since the rows were last read."""
        position = None if job is None else self._position.get(id(job))
        if position is None:
            self._all = True
        else:
            self._changed.add(position)

    def rows(self) -> list[SummaryRow]:
        """One row per job, in the list's order, as :func:`job_row` makes it now."""
        if self._all or len(self._rows) != len(self._jobs):
            self._rows = [_own_row(job) for job in self._jobs]
        else:
            for position in self._changed:
                self._rows[position] = _own_row(self._jobs[position])
        self._all = False
        self._changed.clear()
        return list(self._rows)


def _own_row(job: Job) -> SummaryRow:
    """:func:`job_row`, holding copies of the job's usage and steps rather than them."""
    row = job_row(job)
    for key in ("usage", "steps"):
        if key in row:
            row[key] = _json_copy(row[key])
    return row


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
    rows: SummaryRows | None = None,
) -> dict[str, Any]:
    """The summary document for ``jobs`` as they stand now (a pure view of the job list).

    ``halt`` (``{rule, mode, message}``): what stopped a ``halted`` batch; additive, only
    when given. ``rows``: the jobs' rows kept between calls (:class:`SummaryRows`, made for
    this very job list), where every job changed since the last call is marked.
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
        "jobs": [job_row(job) for job in jobs] if rows is None else rows.rows(),
        "totals": count_statuses(jobs),
    }
    if halt is not None:
        summary["halt"] = dict(halt)
    return summary


def write_summary(
    batch_dir: Path, summary: dict[str, Any], renderer: SummaryRenderer | None = None
) -> Path:
    """Atomically replace ``batch_dir/batch-summary.json`` (rendered by ``renderer``, which
    reuses the text of rows unchanged since its last call, when given)."""
    path = Path(batch_dir) / SUMMARY_NAME
    data = jsonio.dumps(summary, indent=True) if renderer is None else renderer.dumps(summary)
    atomic_write_bytes(path, data)
    return path


class SummaryRenderer:
    """Renders a summary exactly as ``jsonio.dumps(summary, indent=True)`` does, reusing the
    text of every row that is unchanged since the previous call.

    Without orjson the indented encoder is pure Python: re-encoding 20,000 rows costs about
    half a second per rewrite, so a sweep's per-job cost would grow with its size. A rewrite
    now encodes only the rows that changed (a job started or finished) and compares the rest.
    (One difference: a row holding text that is not valid Unicode is written ASCII-escaped
    on its own, where the encoder would escape the whole file; both read back the same.)
    """

    _JOBS = b'\n  "jobs": []'

    def __init__(self, *, kept_rows: bool = False) -> None:
        """``kept_rows``: the rows given are never changed in place once rendered (those of
        :class:`SummaryRows`), so the very row rendered last time needs no comparing."""
        self._kept_rows = kept_rows
        #: Per (case, model): the row last rendered (as given, then as a deep copy), its text.
        self._rows: dict[tuple[Any, Any], tuple[Mapping[str, Any], Mapping[str, Any], bytes]] = {}
        #: Kept rows: the rows of the last call by position, and their texts. A rewrite
        #: then looks at each row once, by identity: 20,000 rows cost a millisecond, where
        #: finding each row's text by its key cost 40 (and the per-job cost grew with that).
        self._last: list[Mapping[str, Any]] = []
        self._texts: list[bytes] = []

    def dumps(self, summary: Mapping[str, Any]) -> bytes:
        rows = summary.get("jobs")
        if not isinstance(rows, list) or not rows:
            return jsonio.dumps(summary, indent=True)
        head = jsonio.dumps({**summary, "jobs": []}, indent=True)
        # A top-level key is the only thing indented by two spaces after a newline, and
        # "jobs" is one key: this finds exactly where the rows go.
        at = head.index(self._JOBS)
        texts = self._kept_texts(rows) if self._kept_rows else map(self._row_text, rows)
        body = b",\n".join(texts)
        return b'%s\n  "jobs": [\n%s\n  ]%s' % (head[:at], body, head[at + len(self._JOBS) :])

    def _kept_texts(self, rows: list[Mapping[str, Any]]) -> list[bytes]:
        last, texts = self._last, self._texts
        if len(last) != len(rows):
            self._last, self._texts = list(rows), [self._row_text(row) for row in rows]
            return self._texts
        # The positions whose row is not the one rendered last time, found in C.
        for position in itertools.compress(itertools.count(), map(operator.is_not, rows, last)):
            row = rows[position]
            texts[position] = self._row_text(row)
            last[position] = row  # only once its text is made
        return texts

    def _row_text(self, row: Mapping[str, Any]) -> bytes:
        key = (row.get("case"), row.get("model"))
        cached = self._rows.get(key)
        if cached is not None and ((self._kept_rows and cached[0] is row) or cached[1] == row):
            return cached[2]
        # Indented as an element of the top-level "jobs" list: four more spaces per line
        # (no newline can occur inside a JSON string, only between its tokens).
        text = b"    " + jsonio.dumps(row, indent=True)[:-1].replace(b"\n", b"\n    ")
        # A deep copy: a row may share a dict or list with its job (its usage), which can
        # change in place before the next rewrite. Kept rows never change in place.
        self._rows[key] = (row, row if self._kept_rows else _json_copy(row), text)
        return text


def _json_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _json_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_copy(item) for item in value]
    return value


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
    values = list(itertools.chain.from_iterable(map(dict.values, rows)))
    types = list(map(type, values))
    strings = list(itertools.compress(values, map(operator.is_, types, itertools.repeat(str))))
    numbers = itertools.compress(values, map(_NUMBERS.__contains__, types))
    return _all_text(strings) and _all_finite(numbers)


_TYPE = itertools.repeat(type)
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
