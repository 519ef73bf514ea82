"""Builders for ledger fixtures (``run-meta.json`` records and run dirs, as the runner lays
them, and summaries, as the driver writes them) and a fake clock.

Every test that needs a batch dir with recorded runs builds it here, on real files::

    from helpers.builders import make_meta, start_run, write_record

    write_record(batch_dir, "c01", "openai/gpt-4o", outcome="failed", at=30)
    start_run(batch_dir, "c02", "openai/gpt-4o")          # started, killed: no record
    write_record(batch_dir, "c03", "m", raw='{"test_case": "c03", "mod')   # truncated

- :func:`make_meta` returns a schema-1 record as a dict, the way the runner writes it.
- :func:`write_record` writes one into a run dir named the runner's way (or ``dir_name``),
  from keyword fields, from a ``raw`` dict (any shape, e.g. another harness's) or from
  ``raw`` text/bytes written verbatim (truncated, empty, not JSON).
- :func:`write_like_the_runner` writes one through ``write_run_meta``, journal line included.
- :func:`start_run` makes a run dir that has output but no record, as a killed run leaves.
- :func:`stamp` gives ledger timestamps a fixed number of seconds after a fixed moment, so
  "newer" in a test is a plain number.
- :func:`make_job` / :func:`make_jobs` build the driver's job list.
- :func:`make_summary` builds a summary from a job list with the driver's own builder;
  :func:`write_summary_dir` writes it as ``batch-summary.json`` with the driver's own
  writer (what ``batch stats``, ``batch status`` and ``batch report`` read).
- :class:`FakeTime` is a clock and an async sleep for code that takes them injected.

Records are written without fsync: tests need the bytes on disk, not power-cut safety.
"""

from __future__ import annotations

import asyncio
import enum
import json
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from batch.layout import model_dir_name, run_dir_name
from batch.plan.jobs import Job
from batch.summary.write import build_summary, write_summary
from run_support.results import RUN_META, run_meta_from_dict, utc_stamp, write_run_meta

#: The moment ``stamp(0)`` stands for.
EPOCH = datetime(2026, 11, 30, 3, 15, tzinfo=UTC)


class _Unset(enum.Enum):
    UNSET = "unset"


#: "What the runner would write": ``failure_category`` follows the outcome.
UNSET = _Unset.UNSET
_DEFAULT_CATEGORY = {"passed": None, "failed": "model_failure", "error": "infra_failure"}
_EXIT_CODE = {"passed": 0, "failed": 1, "error": 2}


def stamp(seconds: float = 0.0) -> str:
    """The ledger timestamp ``seconds`` after :data:`EPOCH` (``2026-11-30T03:15:00.000000Z``)."""
    return utc_stamp(EPOCH + timedelta(seconds=seconds))


def make_meta(
    case: str = "c01",
    model: str = "mock/oracle",
    outcome: str = "passed",
    category: str | _Unset | None = UNSET,
    *,
    at: float = 0.0,
    timestamp: str | None = None,
    duration: Any = 1.5,
    attempt: int = 1,
    run_dir: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A schema-1 ``run-meta.json`` as a dict, with every key the runner writes.

    ``category`` left unset follows the outcome (none when passed, ``model_failure`` when
    failed, ``infra_failure`` on error); ``timestamp`` defaults to ``stamp(at)``. Other
    keyword arguments are added as keys (or replace them).
    """
    if category is UNSET:
        category = _DEFAULT_CATEGORY.get(outcome)
    when = timestamp if timestamp is not None else stamp(at)
    meta: dict[str, Any] = {
        "schema": 1,
        "test_case": case,
        "model": model,
        "timestamp": when,
        "finished_at": when,
        "duration_seconds": duration,
        "outcome": outcome,
        "failure_category": category,
        "stop_reason": "exit",
        "exit_code": _EXIT_CODE.get(outcome, 2),
        "attempt": attempt,
        "batch_id": "batch-20261130T031500Z",
        "run_dir": run_dir,
        "result": {},
    }
    meta.update(fields)
    return meta


def run_path(batch_dir: Path, case: str, model: str, *, at: float = 0.0, attempt: int = 1) -> Path:
    """Where the runner puts the run dir of ``case`` x ``model`` started ``at`` seconds in."""
    compact = (EPOCH + timedelta(seconds=at)).strftime("%Y%m%dT%H%M%S%fZ")
    return batch_dir / model_dir_name(model) / run_dir_name(case, model, compact, attempt)


def _place(
    batch_dir: Path, case: str, model: str, at: float, attempt: int, dir_name: str | None
) -> Path:
    if dir_name is None:
        return run_path(batch_dir, case, model, at=at, attempt=attempt)
    # A bare name goes under the model's dir; "model_dir/run_dir" is taken as given.
    return batch_dir / dir_name if "/" in dir_name else batch_dir / model_dir_name(model) / dir_name


def write_record(
    batch_dir: Path,
    case: str = "c01",
    model: str = "mock/oracle",
    outcome: str = "passed",
    category: str | _Unset | None = UNSET,
    *,
    at: float = 0.0,
    timestamp: str | None = None,
    dir_name: str | None = None,
    raw: dict[str, Any] | list[Any] | str | bytes | None = None,
    attempt: int = 1,
    **fields: Any,
) -> Path:
    """Write one ``run-meta.json`` and return its run dir.

    Without ``raw`` the record is ``make_meta(case, model, outcome, category, ...)``. With
    ``raw`` a dict or list, that JSON is written instead (any shape); with ``raw`` text or
    bytes, those exact bytes. The run dir is named the runner's way from ``case``, ``model``,
    ``at`` and ``attempt``, unless ``dir_name`` names it (a bare name under the model's dir,
    or ``model_dir/run_dir``). The run dir also gets an ``output.log``, as a real run has.
    """
    run_dir = _place(batch_dir, case, model, at, attempt, dir_name)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "output.log").write_text(f"{case} on {model}\n")
    if raw is None:
        rel = run_dir.relative_to(batch_dir).as_posix()
        record: Any = make_meta(
            case,
            model,
            outcome,
            category,
            at=at,
            timestamp=timestamp,
            attempt=attempt,
            **{"run_dir": rel, **fields},
        )
    else:
        record = raw
    if isinstance(record, str):
        data = record.encode()
    elif isinstance(record, bytes):
        data = record
    else:
        data = json.dumps(record, indent=2).encode()
    (run_dir / RUN_META).write_bytes(data)
    return run_dir


def write_like_the_runner(batch_dir: Path, case: str, model: str, **fields: Any) -> Path:
    """Write one record through ``write_run_meta``, as the runner does (its layout, and a
    line in the batch dir's ledger journal); returns its ``run-meta.json``."""
    run_dir = run_path(batch_dir, case, model)
    run_dir.mkdir(parents=True, exist_ok=True)
    rel = run_dir.relative_to(batch_dir).as_posix()
    meta = run_meta_from_dict(make_meta(case, model, run_dir=rel, **fields))
    meta.run_dir = rel
    return write_run_meta(run_dir, meta, fsync=False)


def start_run(
    batch_dir: Path,
    case: str = "c01",
    model: str = "mock/oracle",
    *,
    at: float = 0.0,
    attempt: int = 1,
    dir_name: str | None = None,
) -> Path:
    """A run dir with a started ``output.log`` and no record: a run killed mid-way."""
    run_dir = _place(batch_dir, case, model, at, attempt, dir_name)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "output.log").write_text(f"{case} on {model}: started\n")
    return run_dir


def make_job(case: str = "c01", model: str = "mock/oracle", **fields: Any) -> Job:
    """A fresh job, as the matrix builds it (pending, decision run)."""
    return Job(case=case, model=model, **fields)


def make_jobs(cases: Iterable[str], models: Iterable[str]) -> list[Job]:
    """Every case x model, cases outer (the ``interleave`` order)."""
    model_list = list(models)
    return [make_job(case, model) for case in cases for model in model_list]


def make_summary(jobs: Iterable[Job], **fields: Any) -> dict[str, Any]:
    """The summary the driver's own builder makes of ``jobs`` for a complete batch (one
    hour, two at a time); ``fields`` replace any of ``build_summary``'s keywords."""
    options: dict[str, Any] = {
        "batch_id": "batch-20261130T031500Z",
        "state": "complete",
        "started_at": "2026-11-30T03:15:00Z",
        "finished_at": "2026-11-30T04:15:00Z",
        "elapsed_seconds": 3600.0,
        "max_concurrent": 2,
    }
    return build_summary(list(jobs), **(options | fields))


def write_summary_dir(batch_dir: Path, jobs: Iterable[Job], **fields: Any) -> Path:
    """A batch dir whose ``batch-summary.json`` is :func:`make_summary` of ``jobs`` (with
    ``fields``), written by the driver's own writer; returns ``batch_dir``, its name being
    the batch id."""
    batch_dir.mkdir(parents=True, exist_ok=True)
    write_summary(batch_dir, make_summary(jobs, batch_id=batch_dir.name, **fields))
    return batch_dir


class FakeTime:
    """A clock that moves only when the code under test sleeps (pass ``clock``, ``sleep``)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        await asyncio.sleep(0)  # let tasks started before this sleep run at the old time
        self.now += seconds
