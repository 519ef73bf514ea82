"""``batch-summary.json``: every job's true status and duration, valid at every moment.

Written by the driver only (never by workers); read by ``batch status``, ``batch stats``,
``batch report`` and downstream tools. Format: schema 1, documented in ``docs/summary.md``
with a JSON Schema in ``docs/schemas/batch-summary.schema.json``. Adding keys is fine;
renaming or removing one needs ``SUMMARY_SCHEMA`` to go up and a CHANGELOG entry.
"""

from __future__ import annotations

import itertools
import operator
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from batch.layout import SUMMARY_NAME
from batch.plan.jobs import STATUSES, Job
from batch.summary.row import SummaryRow
from run_support import jsonio
from run_support.atomic import atomic_write_bytes
from run_support.results import NON_MODEL_FAILURE_CATEGORIES

SUMMARY_SCHEMA = 1


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
    read (in C; bench/million.py), not by a map from every job to its position (memory
    per job; bench/million.py).
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

    def last(self) -> Iterator[bytes]:
        """Each job's row encoded afresh, one at a time, none kept: the summary an
        invocation ends with, after which no rewrite is expected (one that comes encodes
        every row again). The kept lines go first: a complete batch of a million jobs
        resumed then holds no line of any (bench/README.md, "ledger_side.py")."""
        self._texts = []
        self._all = True
        self._changed.clear()
        return map(row_text, map(job_row, self._jobs))


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
    stop_when: Mapping[str, Any] | None = None,
    with_rows: bool = True,
) -> dict[str, Any]:
    """The summary document for ``jobs`` as they stand now (a pure view of the job list).

    ``halt`` (``{rule, mode, message}``): what stopped a ``halted`` batch; additive, only
    when given. ``stop_when``: the sweep's rule and where each model stands against it
    (docs/summary.md); additive, only for a sweep that has one. ``with_rows=False``:
    ``jobs`` is left empty, for a writer that keeps the rows' text itself
    (:class:`SummaryLines`).
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
    if stop_when is not None:
        summary["stop_when"] = dict(stop_when)
    return summary


def write_summary(
    batch_dir: Path, summary: dict[str, Any], lines: SummaryLines | None = None, *,
    last: bool = False,
) -> Path:  # fmt: skip
    """Atomically replace ``batch_dir/batch-summary.json`` (:func:`summary_pieces`). ``lines``:
    the rows kept for this summary's job list, written in place of ``summary["jobs"]``;
    ``last``: the invocation's last summary, its rows encoded as they are written
    (:meth:`SummaryLines.last`)."""
    path = Path(batch_dir) / SUMMARY_NAME
    texts = None if lines is None else lines.last() if last else lines.texts()
    atomic_write_bytes(path, summary_pieces(summary, texts))
    return path


def row_text(row: Mapping[str, Any]) -> bytes:
    """One row as the summary writes it: compact JSON on a line of its own, indented as an
    element of the top-level ``jobs`` list, so a reader can take the rows a line at a time
    (docs/summary.md, "Reading a large summary"). The C encoder, even without orjson."""
    return b"    " + jsonio.dumps(row)[:-1]


_JOBS = b'\n  "jobs": []'


def summary_pieces(
    summary: Mapping[str, Any], texts: Iterable[bytes] | None = None
) -> Iterator[bytes]:
    """The bytes of ``summary`` in pieces of at most :data:`PIECE_ROWS` rows, so a writer
    never holds the whole file (a million rows are about 200 MB): its top-level keys
    indented by two, each job row on one line (:func:`row_text`). ``texts``: the rows
    already encoded (:class:`SummaryLines`), in place of ``summary["jobs"]``."""
    if texts is None:
        rows = summary.get("jobs")
        texts = [row_text(row) for row in rows] if isinstance(rows, list) else []
    head = jsonio.dumps({**summary, "jobs": []}, indent=True)
    pieces = _in_pieces(texts)
    first = next(pieces, None)
    if first is None:
        yield head
        return
    # A top-level key is the only thing indented by two spaces after a newline, and
    # "jobs" is one key: this finds exactly where the rows go.
    at = head.index(_JOBS)
    opening, closing = head[:at] + b'\n  "jobs": [\n', b"\n  ]" + head[at + len(_JOBS) :]
    second = next(pieces, None)
    if second is None:  # one piece, one write: most summaries
        yield b"".join((opening, b",\n".join(first), closing))
        return
    yield opening
    yield b",\n".join(first)
    for piece in itertools.chain((second,), pieces):
        yield b",\n"
        yield b",\n".join(piece)
    yield closing


def _in_pieces(texts: Iterable[bytes]) -> Iterator[list[bytes]]:
    """``texts`` in lists of :data:`PIECE_ROWS` (the last shorter), none empty."""
    each = iter(texts)
    while piece := list(itertools.islice(each, PIECE_ROWS)):
        yield piece


#: Rows joined into one piece of a write: few system calls, and a piece of a megabyte or so.
PIECE_ROWS = 4096


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
