"""Text both progress displays show: job labels, outcomes, begin/end lines, the final table,
and how any text is shown (redacted, then escaped to one line).

Pure functions over ``Job``; rich is imported only inside :func:`final_table`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from batch.durations import format_duration_hms
from batch.plan.jobs import FINAL_STATUSES, Job
from batch.printable import one_line

if TYPE_CHECKING:
    from rich.table import Table

#: Columns of the final table, in order; "not run" appears only when some job has none.
TABLE_STATUSES = ("passed", "failed", "error", "skipped")


def shown(redact: Callable[[str], str]) -> Callable[[str], str]:
    """What a display prints of a text: secrets redacted, then escaped to one line.

    Names, categories and reasons come from the sweep file and from jobs; a newline or ESC
    in one must not start a line the driver never wrote (a fake ``DONE ... PASSED``) or
    move the cursor.
    """
    return lambda text: one_line(redact(text))


def job_label(job: Job) -> str:
    return f"{job.case} \N{MULTIPLICATION SIGN} {job.model}"


def outcome_text(job: Job) -> str:
    """``PASSED``, ``FAILED (category; reason)``, ``ERROR (category; reason)``: why a job
    that did not pass ended so, on its own line (``exit code 1: AssertionError ...``)."""
    text = job.status.upper()
    if job.status == "passed":
        return text
    said = "; ".join(part for part in (job.failure_category, job.reason) if part)
    return f"{text} ({said})" if said else text


def skip_text(job: Job, reason: str) -> str:
    """A job a policy did not start, and why (``reason``): ``skipped`` and left for
    ``--resume``; or, for one with an outcome (its in-run retry not started), the outcome
    that stands."""
    if job.status in FINAL_STATUSES:
        duration = format_duration_hms(job.duration_seconds)
        return f"{job_label(job)}: {outcome_text(job)} in {duration}; not retried: {reason}"
    return f"{job_label(job)}: {reason}; left for --resume"


def begin_text(batch_dir: Path, n_jobs: int, carried: int, to_run: int) -> str:
    return f"Batch {batch_dir}: {n_jobs} jobs, {carried} carried over, {to_run} to run"


def end_lines(
    state: str,
    elapsed: float,
    summary_path: Path,
    jobs: Sequence[Job] = (),
    next_steps: Sequence[str] = (),
) -> list[str]:
    """The closing line, one more when ``--cases``/``--models`` left jobs unrun (a
    ``complete`` batch with exit status 0 then still lacks their results), then
    ``next_steps`` (``batch.display.next_steps``). Each line is shown (escaped) on its own,
    so a name cannot add one."""
    lines = [f"Sweep {state} after {format_duration_hms(elapsed)}. Summary: {summary_path}"]
    left_out = sum(job.not_selected for job in jobs)
    if left_out:
        lines.append(
            f"{left_out} of {len(jobs)} jobs not selected by --cases/--models: skipped, "
            "no result (a --resume without the selection runs them)."
        )
    lines.extend(next_steps)
    return lines


def counts_by_model(jobs: Iterable[Job]) -> dict[str, dict[str, int]]:
    """Jobs per status for each model, models in sweep order; "not run" = pending/running."""
    counts: dict[str, dict[str, int]] = {}
    for job in jobs:
        row = counts.setdefault(job.model, dict.fromkeys((*TABLE_STATUSES, "not run"), 0))
        row[job.status if job.status in TABLE_STATUSES else "not run"] += 1
    return counts


def final_table(jobs: Sequence[Job], *, redact: Callable[[str], str]) -> Table:
    """Per-model counts and a total row, as a rich Table."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    by_model = counts_by_model(jobs)
    statuses = list(TABLE_STATUSES)
    if any(row["not run"] for row in by_model.values()):
        statuses.append("not run")
    table = Table(box=box.SIMPLE_HEAD, show_footer=True)
    totals = {status: sum(row[status] for row in by_model.values()) for status in statuses}
    table.add_column("model", footer="total")
    for status in statuses:
        table.add_column(status, footer=str(totals[status]), justify="right")
    table.add_column("jobs", footer=str(len(jobs)), justify="right")
    for model, row in by_model.items():
        cells = [str(row[status]) for status in statuses]
        table.add_row(Text(redact(model)), *cells, str(sum(row.values())))
    return table
