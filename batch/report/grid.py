"""The case-by-model grid of ``batch report``: each cell coloured by status, a failed or
error cell by its failure category with the category's own mark (so it reads without colour
too); hovering shows category, reason, duration and spend, clicking opens the run's
``output.log`` by a link relative to the report. A few lines of inline script
(``templates/grid.js``) sort and filter the grid; without script it is the whole grid in
sweep order. Here the grid is plain values (rows of :class:`GridCell`);
``templates/grid.html.j2`` lays it out and escapes every name; the script reads only the
page's ``data-`` attributes. ``batch.report.compare`` builds its grid from these
parts too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import attrs
from markupsafe import Markup

from batch.layout import OUTPUT_LOG
from batch.report.charts import text_colour
from batch.report.environment import macro
from batch.stats.cells import duration, judged_cell
from batch.stats.rates import (
    UNCATEGORIZED,
    group_stats,
    grouped,
    row_reason,
)
from batch.stats.usage import cost_text, row_usage, tokens_text
from batch.summary.row import SummaryRow

STATUS_LOOK = {  # status → (symbol, what the legend says)
    "passed": ("✓", "passed"),
    "failed": ("✗", "failed (model failure)"),
    "error": ("!", "error (non-model failure)"),
    "running": ("▸", "running"),
    "pending": ("·", "pending"),
    "skipped": ("\u2013", "skipped"),  # en dash
}


#: Each failure category's colour and mark, so a failed or error cell says which it is
#: without colour too. Known categories keep theirs in every report.
CATEGORY_LOOK = {
    "model_failure": ("#e03131", "✗"),
    "infra_failure": ("#f59f00", "!"),
    "api_or_credit": ("#7048e8", "$"),
    "task_data": ("#a0785a", "?"),
    "build_instruction": ("#1098ad", "#"),
    "uncategorized": ("#868e96", "~"),
}

EXTRA_LOOK = (
    ("#e64980", "◆"),
    ("#4263eb", "▲"),
    ("#82c91e", "●"),
    ("#0ca678", "■"),
    ("#f76707", "★"),
    ("#ae3ec9", "♦"),
)


def output_log_href(batch_dir: Path, run_dir: str, report_dir: Path) -> str:
    """A relative URL from the report's directory to ``BATCH_DIR/<run_dir>/output.log``."""
    target = os.path.abspath(Path(batch_dir) / run_dir / OUTPUT_LOG)
    relative = os.path.relpath(target, os.path.abspath(report_dir))
    return "/".join(quote(part, safe="") for part in relative.split(os.sep))


# -- failure categories --------------------------------------------------------------------


def category_looks(names: Sequence[str]) -> dict[str, tuple[str, str]]:
    """A (colour, mark) per category, in the order given, with ``uncategorized`` last.

    Known categories keep their look in every report; others get the spare looks in name
    order, so the same batch always looks the same.
    """
    extra = sorted(name for name in names if name not in CATEGORY_LOOK)
    spare = {name: EXTRA_LOOK[i % len(EXTRA_LOOK)] for i, name in enumerate(extra)}
    ordered = [name for name in names if name != UNCATEGORIZED]
    ordered += [UNCATEGORIZED] if UNCATEGORIZED in names else []
    return {name: CATEGORY_LOOK.get(name) or spare[name] for name in ordered}


def category_style(looks: Mapping[str, tuple[str, str]]) -> Markup:
    """One CSS class per category (``k0``, ``k1``, ...): a name may be any text, an index
    is always a valid class."""
    rules = [
        (f".k{i}", colour, text_colour(colour)) for i, (colour, _) in enumerate(looks.values())
    ]
    return macro("grid.html.j2", "style", rules)


def job_category(job: Mapping[str, Any]) -> str | None:
    """The category a failed or error job is shown with; ``None`` for any other status."""
    if job["status"] not in ("failed", "error"):
        return None
    category = job.get("failure_category")
    return category if isinstance(category, str) and category else UNCATEGORIZED


# -- the grid --------------------------------------------------------------------------------


def spend_line(job: Mapping[str, Any]) -> str | None:
    usage = row_usage(job)
    if not usage.reported:
        return None
    parts = []
    if usage.tokens is not None:
        parts.append(f"{tokens_text(usage.tokens)} tokens")
    if usage.requests is not None:
        parts.append(f"{usage.requests} requests")
    if usage.cost_usd is not None:
        parts.append(cost_text(usage.cost_usd))
    return "spend: " + ", ".join(parts)


def cell_tooltip(job: Mapping[str, Any]) -> str:
    lines = [f"case: {job['case']}", f"model: {job['model']}", f"status: {job['status']}"]
    if job.get("failure_category"):
        lines.append(f"category: {job['failure_category']}")
    reason = row_reason(job)  # type: ignore[arg-type]
    if reason:
        lines.append(f"reason: {reason}")
    seconds = job.get("duration_seconds")
    if isinstance(seconds, int | float) and not isinstance(seconds, bool):
        lines.append(f"duration: {duration(float(seconds))}")
    attempts = job.get("attempts")
    if attempts:
        lines.append(f"attempts: {attempts}" + (" (carried over)" if job.get("resumed") else ""))
    spend = spend_line(job)
    if spend:
        lines.append(spend)
    if job.get("run_dir"):
        lines.append("click: open output.log")
    return "\n".join(lines)


#: Sort rank of a cell when sorting by one model: failures first, then no outcome, passes.
RANK = {"failed": 0, "error": 0, "running": 1, "pending": 1, "skipped": 1, "passed": 2}


@attrs.frozen
class GridCell:
    """One cell of a grid: ``text`` (``None``: an empty cell, ``tip`` on the cell itself)
    on a ``css`` class, a link to ``href`` when set, ``tip`` on hover; ``rank`` and
    ``kind`` (the category's index) for the script's sort and filter."""

    css: str
    text: str | None = None
    tip: str = ""
    href: str | None = None
    rank: str | None = None
    kind: int | None = None


def grid_cell(
    job: Mapping[str, Any] | None,
    batch_dir: Path,
    report_dir: Path,
    kinds: Mapping[str, int],
    marks: Sequence[str],
) -> GridCell:
    if job is None:
        return GridCell("none", tip="no such job", rank="3")
    category = job_category(job)
    status = job["status"]
    css = status if status in STATUS_LOOK else "unknown"
    symbol = STATUS_LOOK.get(status, ("?", status))[0]
    kind = None
    if category is not None:
        kind = kinds[category]
        css += f" k{kind}"
        symbol = marks[kind]
    href = None
    if isinstance(job.get("run_dir"), str) and job["run_dir"]:
        href = output_log_href(batch_dir, job["run_dir"], report_dir)
    rank = str(RANK.get(status, 1))
    return GridCell(css, symbol, cell_tooltip(job), href, rank, kind)


def grid_table(
    jobs: Sequence[SummaryRow],
    batch_dir: Path,
    report_dir: Path,
    looks: Mapping[str, tuple[str, str]],
    samples_cell: Callable[[Sequence[SummaryRow]], GridCell] | None = None,
) -> Markup:
    """Cases down, models across; the last column and each model's header count passes.

    Each row carries what the inline script sorts and filters by: its sweep position
    (``data-i``), name (``data-c``), failed + error count (``data-f``), passes (``data-p``)
    and the categories in it (``data-k``); each cell its sort rank (``data-r``).
    ``samples_cell``: the cell of a (case, model)'s rows in a batch with repeats
    (``batch.report.repeats``); without it a cell shows the pair's (last) row.
    """
    kinds = {name: i for i, name in enumerate(looks)}
    marks = [mark for _, mark in looks.values()]
    by_pair: dict[tuple[str, str], list[SummaryRow]] = {}
    for job in jobs:
        by_pair.setdefault((job["case"], job["model"]), []).append(job)

    def cell(samples: Sequence[SummaryRow] | None) -> GridCell:
        if samples and samples_cell is not None:
            return samples_cell(samples)
        return grid_cell(samples[-1] if samples else None, batch_dir, report_dir, kinds, marks)

    cases, models = grouped(jobs, "case"), grouped(jobs, "model")
    heads = [(model, judged_cell(group_stats(rows))) for model, rows in models.items()]
    rows = []
    for index, (case, case_rows) in enumerate(cases.items()):
        stats = group_stats(case_rows)
        row_kinds = sorted({kinds[c] for c in map(job_category, case_rows) if c is not None})
        rows.append({
            "index": index, "case": case, "failed": stats["failed"] + stats["error"],
            "passed": stats["passed"], "kinds": row_kinds, "sum": judged_cell(stats),
            "cells": [cell(by_pair.get((case, model))) for model in models],
        })  # fmt: skip
    return macro("grid.html.j2", "grid_table", heads, rows)


def grid_controls(models: Sequence[str], looks: Mapping[str, tuple[str, str]]) -> Markup:
    """Sort and filter controls, hidden until the script shows them: without script they
    would do nothing, and the grid is whole anyway."""
    categories = [(mark, name) for name, (_, mark) in looks.items()]
    return macro("grid.html.j2", "grid_controls", categories, models)


def legend(items: Sequence[tuple[str, str, str]]) -> Markup:
    """``items``: (css class or colour, symbol, text)."""
    entries = [
        {"background": look, "colour": text_colour(look), "css": "", "symbol": symbol, "text": text}
        if look[:1] == "#"
        else {"background": "", "colour": "", "css": look, "symbol": symbol, "text": text}
        for look, symbol, text in items
    ]
    return macro("grid.html.j2", "legend", entries)


def grid_legend(
    looks: Mapping[str, tuple[str, str]],
    counts: Mapping[str, int] | None = None,
    present: Collection[str] | None = None,
) -> Markup:
    """The grid's key: the status marks (of the statuses in ``present``, when given: a
    legend entry no cell has only makes the reader look for it), then the categories'."""
    statuses = [
        (status, symbol, text)
        for status, (symbol, text) in STATUS_LOOK.items()
        if status not in ("failed", "error") and (present is None or status in present)
    ]
    categories = [
        (colour, mark, name if counts is None else f"{name} ({counts.get(name, 0)})")
        for name, (colour, mark) in looks.items()
    ]
    return legend(statuses + categories)
