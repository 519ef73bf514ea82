"""Where ``batch stats`` and ``batch report`` read jobs from: ``batch-summary.json``, or the
ledger's records themselves (``--source records``), each as a summary-shaped dict."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from batch.event_segments import all_lines
from batch.layout import LOGS_DIR, SUMMARY_NAME
from batch.plan.batch_dir import not_a_batch_dir
from batch.stats.invocations import Invocation, invocations
from batch.summary.read import read_summary, summary_categories
from batch.summary.row import SummaryRow
from batch.summary.stream import stream_summary
from run_support.results import NON_MODEL_FAILURE_CATEGORIES, Ledger, record_outcome


def load_summary(batch_dir: Path) -> dict[str, Any]:
    """The summary in ``batch_dir``, checked (``batch.summary.read.check_summary``), its
    rows read a line at a time (``batch.summary.stream``); any failure is
    ``ValueError("PATH: message")``."""
    _check_is_dir(batch_dir)
    path = Path(batch_dir) / SUMMARY_NAME
    try:
        summary = stream_summary(batch_dir)
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from exc
    return summary


def records_summary(batch_dir: Path) -> dict[str, Any]:
    """A summary-shaped view of the ledger itself: the newest record of every (case, model).

    For a batch whose summary is missing, or to check the summary against the records.
    Statuses use the batch's own ``non_model_categories`` when its summary names them.
    """
    _check_is_dir(batch_dir)
    if not Path(batch_dir).is_dir():
        raise ValueError(f"{batch_dir}: no such batch dir")
    categories: frozenset[str] = NON_MODEL_FAILURE_CATEGORIES
    with contextlib.suppress(OSError, ValueError):
        categories = summary_categories(read_summary(batch_dir))
    with Ledger(batch_dir) as ledger:
        recorded = ledger.load()
    jobs: list[SummaryRow] = []
    for (case, model, repeat), meta in sorted(recorded.items()):
        # The records themselves: usage and reason as written (docs/summary.md's rows
        # carry the job's total spend, and the reason of a finish that did not pass).
        outcome = record_outcome(meta, categories, usage="as_written", reason="as_written")
        row: SummaryRow = {
            "case": case,
            "model": model,
            "status": outcome.status,
            "duration_seconds": outcome.duration_seconds,
            "resumed": False,
            "failure_category": outcome.category,
            "attempts": outcome.attempts,
            "run_dir": outcome.run_dir,
        }
        if outcome.usage is not None:
            row["usage"] = outcome.usage
        if outcome.reason is not None:
            row["reason"] = outcome.reason
        if repeat != 1:
            row["repeat"] = repeat
        if outcome.score is not None:
            row["score"] = outcome.score
        jobs.append(row)
    return {"schema": 1, "batch_id": Path(batch_dir).name, "state": "records", "jobs": jobs}


def _check_is_dir(batch_dir: Path) -> None:
    # A file given as the batch dir is one line and exit 2 like any other unusable input,
    # not click's usage message (docs/stats.md).
    if Path(batch_dir).exists() and not Path(batch_dir).is_dir():
        raise ValueError(f"{batch_dir}: not a directory")
    problem = Path(batch_dir).is_dir() and not_a_batch_dir(Path(batch_dir))
    if problem:
        raise ValueError(problem)


def read_invocations(
    batch_dir: Path, on_skip: Callable[[str], None] | None = None
) -> list[Invocation]:
    """Every invocation ``batch-logs/events.jsonl`` records; none when it is missing or
    unreadable (the report then shows the summary's last invocation, as before).
    ``on_skip`` is told of each segment that cannot be read (a FIFO, a symlink)."""
    # Every line of every segment: a driver killed outright ends at its last event,
    # whatever it was; a missing log has no lines.
    return invocations(all_lines(Path(batch_dir) / LOGS_DIR, on_skip))
