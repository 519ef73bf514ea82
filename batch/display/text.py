"""Text both progress displays show: job labels, outcomes, begin/end lines, the final table,
and how any text is shown (redacted, then escaped to one line).

Pure functions over ``Job``; rich is imported only inside :func:`final_table`. The plain
display writes the same table as text (:func:`table_text`) and imports no rich at all:
importing ``rich.console`` and ``rich.table`` is a share of every run's start-up
(docs/design.md; bench/overhead.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from batch.durations import format_duration_hms
from batch.plan.jobs import FINAL_STATUSES, Job
from batch.printable import one_line
from batch.stop_when.rules import STOPPED

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
    """``c01 x gpt-4o`` (with the multiplication sign); a repeat past the first says which,
    ``c01 x gpt-4o #2``."""
    label = f"{job.case} \N{MULTIPLICATION SIGN} {job.model}"
    return label if job.repeat == 1 else f"{label} #{job.repeat}"


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
    if reason.startswith(STOPPED):  # its model has its answer: a resume skips it again
        return f"{job_label(job)}: {reason}"
    return f"{job_label(job)}: {reason}; left for --resume"


def begin_text(batch_dir: Path, n_jobs: int, carried: int, to_run: int) -> str:
    jobs = "1 job" if n_jobs == 1 else f"{n_jobs} jobs"
    return f"Batch {batch_dir}: {jobs}, {carried} carried over, {to_run} to run"


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


def table_cells(
    jobs: Sequence[Job], *, redact: Callable[[str], str]
) -> tuple[list[str], list[list[str]], list[str]]:
    """The final table's header, one row per model (models in sweep order) and the footer:
    per-model counts of each status and a total row, as text."""
    by_model = counts_by_model(jobs)
    statuses = list(TABLE_STATUSES)
    if any(row["not run"] for row in by_model.values()):
        statuses.append("not run")
    totals = [str(sum(row[status] for row in by_model.values())) for status in statuses]
    rows = [
        [redact(model), *(str(row[status]) for status in statuses), str(sum(row.values()))]
        for model, row in by_model.items()
    ]
    return ["model", *statuses, "jobs"], rows, ["total", *totals, str(len(jobs))]


def final_table(jobs: Sequence[Job], *, redact: Callable[[str], str]) -> Table:
    """Per-model counts and a total row, as a rich Table."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    header, rows, footer = table_cells(jobs, redact=redact)
    table = Table(box=box.SIMPLE_HEAD, show_footer=True)
    table.add_column(header[0], footer=footer[0])
    for title, total in zip(header[1:], footer[1:], strict=True):
        table.add_column(title, footer=total, justify="right")
    for model, *counts in rows:
        table.add_row(Text(model), *counts)
    return table


def table_text(jobs: Sequence[Job], *, redact: Callable[[str], str]) -> str | None:
    """:func:`final_table` as rich prints it where it fits the width, as plain text, never
    wrapped; None when a model's name is not printable ASCII (then each character's width
    on screen is rich's to work out: see :func:`final_table`).

    The layout is rich's ``SIMPLE_HEAD`` box: a blank edge line above and below, a rule
    under the header, a blank line above the footer, one space of padding each side of
    every cell and one between cells; the model column is left-aligned, the counts right.
    """
    header, rows, footer = table_cells(jobs, redact=redact)
    if not all(model.isascii() and model.isprintable() for model, *_ in rows):
        return None
    widths = [max(map(len, column)) for column in zip(header, *rows, footer, strict=True)]
    inner = sum(widths) + 3 * len(widths) - 1  # each cell padded by two, one between two

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = (cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True))
        return "  " + "   ".join([first, *rest]) + "  "

    blank = " " * (inner + 2)
    lines = [blank, line(header), " " + "\N{BOX DRAWINGS LIGHT HORIZONTAL}" * inner + " "]
    lines += [line(row) for row in rows]
    lines += [blank, line(footer), blank]
    return "".join(text + "\n" for text in lines)
