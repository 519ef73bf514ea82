"""The report's case-by-model section past :data:`MAX_GRID_CELLS` cells: a grid of every
cell would be ~300 bytes a job (64 MB at 200,000 jobs, more than a browser opens), so the
section folds to what stays bounded and keeps what a user needs:

- the grid of the cases with a failure only, most failures first, at most
  :data:`MAX_GRID_CELLS` cells of it;
- passed / judged per case group and model (a group: the case's directory, ``a/b`` of
  ``a/b/c``, or, for flat names, a block of cases in sweep order), at most
  :data:`MAX_GROUPS` rows;
- every failure (failed or error job) with its category, reason and log link, the first
  :data:`MAX_LISTED` in the page and all of them in ``<report>-failures.tsv`` beside it
  (:func:`failures_tsv`), which the page links to.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from markupsafe import Markup

from batch.report.environment import macro
from batch.report.grid import GridCell, grid_table, job_category, output_log_href
from batch.stats.cells import judged_cell
from batch.stats.rates import group_stats, grouped, row_reason
from batch.summary.row import SummaryRow

__all__ = [
    "MAX_GRID_CELLS",
    "failures",
    "failures_path",
    "failures_tsv",
    "folded_grid",
    "folds",
]

#: Cells of the grid shown whole; past it the section folds.
MAX_GRID_CELLS = 3000
#: Rows of the per-group table.
MAX_GROUPS = 200
#: Failures listed in the page itself (~200 bytes each); every one is in the TSV file.
MAX_LISTED = 5000
#: A reason in the page is cut here (the TSV and the job's record have all of it).
REASON_CHARS = 200


def folds(jobs: Sequence[SummaryRow]) -> bool:
    """Whether the grid of ``jobs`` has more cells than the page shows whole."""
    return len({(job["case"], job["model"]) for job in jobs}) > MAX_GRID_CELLS


def failures(jobs: Sequence[SummaryRow]) -> list[SummaryRow]:
    """Every failed or error job, by model then in sweep order; with repeats, each sample."""
    order = {model: i for i, model in enumerate(grouped(jobs, "model"))}
    failed = [job for job in jobs if job_category(job) is not None]
    return sorted(failed, key=lambda job: order[job["model"]])


def failures_path(report_path: Path) -> Path:
    """Where every failure is written beside the report: ``report-failures.tsv``."""
    return report_path.with_name(report_path.stem + "-failures.tsv")


def failures_tsv(jobs: Sequence[SummaryRow]) -> str:
    """Every failure, a line each: case, model, repeat, status, category, reason, run dir
    (a tab or newline in a field is a space)."""

    def field(value: Any) -> str:
        return "" if value is None else " ".join(str(value).split())

    head = "case\tmodel\trepeat\tstatus\tfailure_category\treason\trun_dir\n"
    lines = (
        "\t".join(
            field(v)
            for v in (
                job["case"],
                job["model"],
                job.get("repeat"),
                job["status"],
                job_category(job),
                row_reason(job),
                job.get("run_dir"),
            )
        )
        + "\n"
        for job in failures(jobs)
    )
    return head + "".join(lines)


def case_group(case: str) -> str | None:
    """A case's directory; ``None`` for a flat name."""
    return case.rpartition("/")[0] or None


def case_groups(cases: Sequence[str]) -> dict[str, list[str]]:
    """Cases per group, in sweep order: by directory when that makes at most
    :data:`MAX_GROUPS` groups and every case has one, else blocks in sweep order."""
    by_dir: dict[str, list[str]] = {}
    for case in cases:
        by_dir.setdefault(case_group(case) or "", []).append(case)
    if "" not in by_dir and len(by_dir) <= MAX_GROUPS:
        return by_dir
    size = max(1, math.ceil(len(cases) / MAX_GROUPS))
    return {
        f"cases {start + 1}-{min(start + size, len(cases))}": list(cases[start : start + size])
        for start in range(0, len(cases), size)
    }


def group_table(jobs: Sequence[SummaryRow]) -> Markup:
    cases = grouped(jobs, "case")
    models = grouped(jobs, "model")
    cells: dict[tuple[str, str], list[SummaryRow]] = {}
    for job in jobs:
        cells.setdefault((job["case"], job["model"]), []).append(job)
    groups = []
    for name, members in case_groups(list(cases)).items():
        row = []
        for model in models:
            rows = [job for case in members for job in cells.get((case, model), ())]
            stats = group_stats(rows) if rows else None
            bad = (stats["failed"] + stats["error"]) if stats else 0
            row.append((judged_cell(stats), bad))
        groups.append((name, len(members), row))
    return macro("fold.html.j2", "group_table", list(models), groups)


def failure_list(
    jobs: Sequence[SummaryRow], batch_dir: Path, report_path: Path, listed: Sequence[SummaryRow]
) -> Markup:
    rows = []
    for job in listed:
        reason = row_reason(job) or ""
        run_dir = job.get("run_dir")
        rows.append({
            "case": job["case"], "repeat": job.get("repeat"), "model": job["model"],
            "status": job["status"], "category": job_category(job),
            "reason": reason[:REASON_CHARS] + ("…" if len(reason) > REASON_CHARS else ""),
            "href": output_log_href(batch_dir, run_dir, report_path.parent)
            if isinstance(run_dir, str) and run_dir else None,
        })  # fmt: skip
    return macro("fold.html.j2", "failure_list", rows)


def folded_grid(
    jobs: Sequence[SummaryRow],
    batch_dir: Path,
    report_path: Path,
    looks: Mapping[str, tuple[str, str]],
    samples_cell: Callable[[Sequence[SummaryRow]], GridCell] | None = None,
) -> Markup:
    """The folded section's body (see the module docstring); ``samples_cell`` as
    :func:`~batch.report.grid.grid_table`'s."""
    models = grouped(jobs, "model")
    failed = failures(jobs)
    worst = sorted(
        (
            (sum(job_category(job) is not None for job in rows), index, case)
            for index, (case, rows) in enumerate(grouped(jobs, "case").items())
        ),
        key=lambda item: (-item[0], item[1]),
    )
    shown = {case for bad, _, case in worst[: MAX_GRID_CELLS // max(1, len(models))] if bad}
    listed = failed[:MAX_LISTED]
    section = {
        "cases": len(grouped(jobs, "case")), "models": len(models), "max_cells": MAX_GRID_CELLS,
        "shown": len(shown), "failing": sum(1 for bad, _, _ in worst if bad),
        "failed": len(failed), "listed": len(listed), "tsv": failures_path(report_path).name,
        "grid": grid_table(
            [job for job in jobs if job["case"] in shown], batch_dir, report_path.parent,
            looks, samples_cell,
        ) if shown else None,
        "groups": group_table(jobs),
        "failures": failure_list(jobs, batch_dir, report_path, listed) if failed else None,
    }  # fmt: skip
    return macro("fold.html.j2", "folded", section)
