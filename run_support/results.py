"""The result ledger: what one run records in ``run-meta.json``, what a record makes of its
job, and how records are written and read back.

Writers: the batch runner (``write_run_meta``) and Python jobs reporting their own outcome
(``write_result`` → ``result.json``). Readers: ``load_recorded_runs`` (resume, plan,
status, stats), through one :class:`~run_support.ledger.Ledger` handle. The on-disk format
is ``run-meta.json`` schema 1 (``docs/ledger.md``), its fields declared once in
``run_support.run_meta``; the cache is ``run_support.ledger_cache``, the scan
``run_support.ledger_scan``. This module is the public API (``docs/ledger.md``): everything
named in ``__all__`` stays importable from here whatever moves behind it.

This module needs nothing beyond the runtime dependencies: no container engine, no network.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, NamedTuple

from run_support import jsonio
from run_support.atomic import atomic_write_bytes
from run_support.ledger import (
    BlockRecords,
    Ledger,
    RecordedRuns,
    record_order,
    timestamp_order,
)
from run_support.ledger_cache import note_written
from run_support.ledger_scan import fields_from
from run_support.names import RESULT_JSON, RUN_META
from run_support.run_meta import (
    INFRA_FAILURE,
    MODEL_FAILURE,
    OUTCOMES,
    SCHEMA_VERSION,
    InvalidRecord,
    Outcome,
    RunMeta,
    run_meta_from_dict,
    run_meta_to_dict,
)
from run_support.usage import previous_total, usage_of

Status = Literal["passed", "failed", "error"]

#: Failure categories that say nothing about the model: the run carries no signal, so
#: ``--retry-failed`` reruns them and adjusted pass rates leave them out.
NON_MODEL_FAILURE_CATEGORIES: frozenset[str] = frozenset(
    {"infra_failure", "api_or_credit", "task_data", "build_instruction"}
)


# --- status -------------------------------------------------------------------------------


def is_infra_class_failure(
    meta: RunMeta, categories: Collection[str] = NON_MODEL_FAILURE_CATEGORIES
) -> bool:
    """True when the run failed for a reason that says nothing about the model.

    Such a run is excluded from adjusted scoring and rerun by ``--retry-failed``: asking the
    model again is the only way to learn anything about it.
    """
    return meta.outcome != "passed" and meta.failure_category in categories


def job_status(meta: RunMeta, categories: Collection[str] = NON_MODEL_FAILURE_CATEGORIES) -> Status:
    """``passed`` | ``error`` (a non-model failure) | ``failed`` (the model's own failure)."""
    if meta.outcome == "passed":
        return "passed"
    if is_infra_class_failure(meta, categories):
        return "error"
    return "failed"


def record_status(
    meta: RunMeta, categories: Collection[str] = NON_MODEL_FAILURE_CATEGORIES
) -> tuple[Status, str | None]:
    """What a record makes of its job: :func:`job_status` and the failure category, which is
    None for a passed job (a category on a pass says nothing about a failure)."""
    status = job_status(meta, categories)
    return status, None if status == "passed" else meta.failure_category


#: A score past this is no grade, partial credit or BLEU: read as none (docs/stats.md).
MAX_SCORE = 1e15


def record_score(meta: RunMeta) -> float | None:
    """The numeric ``score`` the job reported in ``result.json`` (partial credit, a judge's
    grade): a finite number within ``±MAX_SCORE``; None when absent or not such a number."""
    value = meta.result.get("score")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) and abs(number) <= MAX_SCORE else None


def record_reason(meta: RunMeta) -> str | None:
    """One line: why a run that did not pass ended as it did; None for a pass.

    The record's ``reason``; for a record written before reasons were kept (or by another
    harness), what its other keys tell: the driver's note in ``result``, the timeout, the
    signal or the exit code. None when it tells nothing.
    """
    if meta.outcome == "passed":
        return None
    if meta.reason:
        return meta.reason
    for key in ("record_error", "classification_error", "start_error"):
        note = meta.result.get(key)
        if isinstance(note, str) and note:
            return note
    code = meta.exit_code
    if meta.stop_reason == "timeout":
        return "timeout"
    if code is not None and code < 0:
        return f"killed by signal {-code}"
    return None if code is None else f"exit code {code}"


class RecordOutcome(NamedTuple):
    """What a job's newest record says of the job: the one mapping from a record to a job's
    outcome, for resume, the driver, ``batch stats`` and ``batch status``."""

    status: Status
    #: None for a passed job.
    category: str | None
    #: None for a passed job (see :func:`record_outcome`'s ``reason``).
    reason: str | None
    score: float | None
    #: What the job has spent (see :func:`record_outcome`'s ``usage``); None: nothing.
    usage: Any
    duration_seconds: float
    attempts: int
    run_dir: str | None
    steps: list[Any] | None


def record_outcome(
    meta: RunMeta,
    categories: Collection[str] = NON_MODEL_FAILURE_CATEGORIES,
    *,
    usage: Literal["carried", "total", "as_written"] = "carried",
    reason: Literal["told", "as_written"] = "told",
) -> RecordOutcome:
    """What ``meta``, a job's newest record, makes of the job.

    The callers differ in what they mean by the job's spend and its reason, so each says:

    - ``usage="carried"`` (a resume, and a job this invocation did not get to): what the job
      had spent before its next attempt, read back (``usage_total``, or ``usage`` in a
      record written before totals were kept: ``run_support.usage.previous_total``);
    - ``usage="total"`` (the driver, on the record it has just written, which always holds
      its total when any attempt reported usage): ``usage_total`` read back, nothing else;
    - ``usage="as_written"`` (``batch stats --source records``, which shows the records
      themselves): ``usage_total``, else ``usage``, as the record holds it, unchecked;
    - ``reason="told"``: :func:`record_reason`, which tells one from the record's other keys
      when it holds none; ``reason="as_written"``: only the record's own ``reason``.
    """
    # record_status, inline: a resume asks this of 100,000 records.
    status: Status
    if meta.outcome == "passed":
        status, category, why = "passed", None, None
    else:
        category = meta.failure_category
        status = "error" if category in categories else "failed"
        if reason == "told":
            why = record_reason(meta)
        else:
            written = meta.reason
            why = written if isinstance(written, str) and written else None
    spent: Any
    if meta.usage_total is None and meta.usage is None:  # most records: nothing to read
        spent = None
    elif usage == "carried":
        spent = previous_total(meta.usage_total, meta.usage).to_json() or None
    elif usage == "total":
        spent = usage_of(meta.usage_total).to_json() or None
    else:
        spent = meta.usage_total if meta.usage_total is not None else meta.usage
    return RecordOutcome(
        status,
        category,
        why,
        None if "score" not in meta.result else record_score(meta),
        spent,
        meta.duration_seconds,
        meta.attempt or 1,  # RunMeta.attempt_number, without the property call
        meta.run_dir,
        meta.steps,
    )


# --- writing ------------------------------------------------------------------------------


def utc_stamp(moment: datetime | None = None) -> str:
    """ISO 8601 UTC with microseconds and ``Z``, the ledger's timestamp format."""
    moment = moment or datetime.now(UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def write_run_meta(run_dir: Path | str, meta: RunMeta, *, fsync: bool = True) -> Path:
    """Write ``run_dir/run-meta.json`` atomically; the previous file survives any failure.

    A run dir laid out as the driver lays it out (``meta.run_dir`` is its model dir and
    name) is also put in its batch dir's ledger cache, with the signature of the file just
    written, so that the next read need not parse it even if the driver dies next.
    """
    path = Path(run_dir) / RUN_META
    data = jsonio.dumps(run_meta_to_dict(meta), indent=True)
    written = atomic_write_bytes(path, data, fsync=fsync)
    model_dir, name = path.parent.parent.name, path.parent.name
    if meta.run_dir == f"{model_dir}/{name}" and len(data) <= _MAX_CACHED:
        try:
            # What a reader makes of the bytes written, exactly as it would read the file.
            fields = fields_from(jsonio.loads(data))
        except ValueError:
            return path
        signature = (written.st_ino, written.st_size, written.st_mtime_ns, written.st_ctime_ns)
        note_written(path.parent.parent.parent, model_dir, name, signature, fields)
    return path


_MAX_CACHED = 1 << 20


def write_result(
    run_dir: Path | str | None,
    outcome: Outcome,
    failure_category: str | None = None,
    **fields: Any,
) -> Path:
    """Report a job's outcome from inside the job, as ``run_dir/result.json``.

    ``run_dir`` ``None`` means the run dir the driver gave the job (``$BATCH_RUN_DIR``).
    Other keyword arguments (``score=0.8``, ...) end up in ``run-meta.json``'s ``result``.
    """
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {sorted(OUTCOMES)}, not {outcome!r}")
    if failure_category is not None and not isinstance(failure_category, str):
        raise TypeError("failure_category must be a string or None")
    if run_dir is None:
        run_dir = os.environ.get("BATCH_RUN_DIR")
        if not run_dir:
            raise ValueError("no run_dir given and $BATCH_RUN_DIR is not set")
    path = Path(run_dir) / RESULT_JSON
    payload = {"outcome": outcome, "failure_category": failure_category, **fields}
    atomic_write_bytes(path, jsonio.dumps(payload, indent=True))
    return path


# --- reading ------------------------------------------------------------------------------


def load_recorded_runs(batch_dir: Path | str, *, use_index: bool = True) -> RecordedRuns:
    """The newest recorded outcome per (test_case, model, repeat) under ``batch_dir``.

    Newest is the greatest :func:`record_order`: highest attempt number, then latest
    ``timestamp``, then greatest run dir path. Pairs are keyed by the record's own
    ``test_case``, ``model`` and ``repeat`` (1 when it names none), never by the directory
    name. Records that are truncated, unparsable, not an object or lack an identity or
    outcome are skipped and listed in ``unreadable``; run dirs without a record are listed
    in ``incomplete``. An absent or empty ``batch_dir`` gives an empty mapping. ``run_dir``
    of each returned record is where it was found, relative to ``batch_dir``.

    ``use_index=False`` reads every record from its file, without the ledger cache; the
    result is the same. A caller that reads more than once keeps a
    :class:`~run_support.ledger.Ledger` open instead.
    """
    with Ledger(batch_dir, cached=use_index) as ledger:
        return ledger.load()


def read_recorded_blocks(
    batch_dir: Path | str,
    each: Callable[[str, BlockRecords], None],
    *,
    use_index: bool = True,
) -> RecordedRuns:
    """:func:`load_recorded_runs` a model dir at a time (``Ledger.read_blocks``)."""
    with Ledger(batch_dir, cached=use_index) as ledger:
        return ledger.read_blocks(each)


__all__ = [
    "INFRA_FAILURE",
    "MODEL_FAILURE",
    "NON_MODEL_FAILURE_CATEGORIES",
    "OUTCOMES",
    "RESULT_JSON",
    "RUN_META",
    "SCHEMA_VERSION",
    "BlockRecords",
    "InvalidRecord",
    "Ledger",
    "RecordOutcome",
    "RecordedRuns",
    "RunMeta",
    "is_infra_class_failure",
    "job_status",
    "load_recorded_runs",
    "read_recorded_blocks",
    "record_order",
    "record_outcome",
    "record_reason",
    "record_score",
    "record_status",
    "run_meta_from_dict",
    "run_meta_to_dict",
    "timestamp_order",
    "utc_stamp",
    "write_result",
    "write_run_meta",
]
