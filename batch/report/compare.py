"""``batch report A B``: two batches side by side in one self-contained HTML file — both
headers, paired rate bars with the difference, a table of rates, spend and differences per
model, and a grid of the cells whose status changed. Built from the single-batch page's
parts (``batch.report.page``) and the charts (``batch.report.charts``), laid out
by ``templates/compare.html.j2``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from markupsafe import Markup

from batch.report.charts import paired_rate_bars_svg, rate_text
from batch.report.environment import macro, render
from batch.report.grid import (
    STATUS_LOOK,
    GridCell,
    category_looks,
    category_style,
    grid_legend,
    job_category,
    legend,
)
from batch.report.methods import compare_methods_lines, methods_section
from batch.report.page import batch_header
from batch.report.repeats import compare_pairs_table
from batch.report.repeats_cells import changed_cell, samples_by_pair
from batch.stats.cells import diff_cell, judged_cell, percent
from batch.stats.invocations import Invocation, batch_span
from batch.stats.rates import compare_stats, row_reason
from batch.stats.repeats_rows import has_repeats
from batch.stats.usage import cost_text
from batch.summary.read import summary_rows
from batch.summary.row import SummaryRow

CHANGE_LOOK = (
    ("better", "", "better: B passes"),
    ("worse", "", "worse: B no longer passes"),
    ("changed", "", "changed otherwise"),
)


def change_kind(a: str | None, b: str | None) -> str:
    """``better`` when B passes what A did not, ``worse`` when B no longer passes, else
    ``changed``."""
    if b == "passed":
        return "better"
    if a == "passed":
        return "worse"
    return "changed"


def side_text(job: Mapping[str, Any] | None) -> str:
    if job is None:
        return "absent"
    category = job_category(job)
    reason = row_reason(job)  # type: ignore[arg-type]
    return (
        job["status"] + (f" ({category})" if category else "") + (f": {reason}" if reason else "")
    )


def changed_grid(
    rows_a: Sequence[SummaryRow],
    rows_b: Sequence[SummaryRow],
    changed: Sequence[Mapping[str, Any]],
    looks: Mapping[str, tuple[str, str]],
) -> Markup:
    """The cells whose status changed, cases down and models across: A's mark → B's (the
    marks say status and category), on green when B passes what A did not, red when B no
    longer passes, grey otherwise; with repeats A's c/n → B's
    (``batch.report.repeats.changed_cell``)."""
    if not changed:
        return macro("parts.html.j2", "muted", "No job changed its status.")
    kinds = {name: i for i, name in enumerate(looks)}
    marks = [mark for _, mark in looks.values()]
    a_jobs = {(j["case"], j["model"]): j for j in rows_a}
    b_jobs = {(j["case"], j["model"]): j for j in rows_b}
    cases = list(dict.fromkeys(change["case"] for change in changed))
    models = list(dict.fromkeys([*(j["model"] for j in rows_a), *(j["model"] for j in rows_b)]))
    models = [m for m in models if any(change["model"] == m for change in changed)]
    changes: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for change in changed:
        changes.setdefault((change["case"], change["model"]), []).append(change)
    pairs = set(changes)
    # With repeats a (case, model) is several samples: its cell compares them all.
    repeated = has_repeats(rows_a) or has_repeats(rows_b)
    a_samples, b_samples = samples_by_pair(rows_a), samples_by_pair(rows_b)

    def mark(job: Mapping[str, Any] | None) -> str:
        if job is None:
            return "∅"
        category = job_category(job)
        if category is not None:
            return marks[kinds[category]]
        return STATUS_LOOK.get(job["status"], ("?", ""))[0]

    rows = []
    for case in cases:
        cells = []
        for model in models:
            if (case, model) not in pairs:
                cells.append(GridCell("same"))
                continue
            if repeated:
                cells.append(
                    changed_cell(
                        a_samples.get((case, model), []),
                        b_samples.get((case, model), []),
                        changes[(case, model)],
                    )
                )
                continue
            a, b = a_jobs.get((case, model)), b_jobs.get((case, model))
            kind = change_kind(a and a["status"], b and b["status"])
            tip = f"case: {case}\nmodel: {model}\nA: {side_text(a)}\nB: {side_text(b)}"
            cells.append(GridCell(kind, f"{mark(a)}→{mark(b)}", tip))
        rows.append((case, cells))
    return macro("grid.html.j2", "changed_grid", models, rows)


def comparison_table(result: Mapping[str, Any]) -> Markup:
    usage = "cost_usd_diff" in result["overall"]
    names = ["model", "A passed", "A adjusted (95% CI)", "B passed", "B adjusted (95% CI)"]
    names += ["Δ adjusted", "changed jobs"]
    names += ["A cost", "B cost", "Δ cost"] if usage else []

    def side_rate(stats: Mapping[str, Any] | None) -> str:
        if stats is None:
            return "absent"
        if stats["adjusted_pass_rate"] is None:
            return "—"
        return f"{percent(stats['adjusted_pass_rate'])} ({rate_text(stats)})"

    def cells(row: Mapping[str, Any]) -> list[tuple[str, str]]:
        diff = row["adjusted_pass_rate_diff"]
        css = "better" if diff and diff > 0 else "worse" if diff and diff < 0 else ""
        values = [
            (judged_cell(row["a"]), ""),
            (side_rate(row["a"]), ""),
            (judged_cell(row["b"]), ""),
            (side_rate(row["b"]), ""),
            (diff_cell(diff), css),
            (str(row["changed"]), ""),
        ]
        if usage:
            values += [
                (cost_text(row["a"]["cost_usd"]) if row["a"] else "absent", ""),
                (cost_text(row["b"]["cost_usd"]) if row["b"] else "absent", ""),
                (cost_text(row["cost_usd_diff"], signed=True), ""),
            ]
        return values

    rows = [(row["model"], cells(row)) for row in result["models"]]
    total = ("all jobs", cells(result["overall"]))
    return macro("parts.html.j2", "figures_table", names, rows, total)


def render_comparison(
    summaries: tuple[Mapping[str, Any], Mapping[str, Any]],
    *,
    batch_dirs: tuple[Path, Path],
    runs: tuple[Sequence[Invocation], Sequence[Invocation]] = ((), ()),
) -> str:
    """``batch report A B``: two batches side by side — their headers, per-model rates and
    B - A differences, spend, and the cells whose status changed."""
    summary_a, summary_b = summaries
    result = compare_stats(
        summary_a, summary_b, by="model", batch_dirs=(str(batch_dirs[0]), str(batch_dirs[1]))
    )
    rows_a, rows_b = summary_rows(summary_a), summary_rows(summary_b)
    overall = result["overall"]
    names = list(
        dict.fromkeys([*overall["a"]["failure_categories"], *overall["b"]["failure_categories"]])
    )
    looks = category_looks(names)
    headers = Markup().join(
        batch_header(summary, overall[side], batch_span(side_runs, summary), f"{side.upper()}: ")
        for side, summary, side_runs in (("a", summary_a, runs[0]), ("b", summary_b, runs[1]))
    )
    kinds = [change_kind(c["a"], c["b"]) for c in result["changed"]]
    shown_statuses = {c[side] for c in result["changed"] for side in ("a", "b")}
    title = " vs ".join(
        str(summary.get("batch_id") or path.name)
        for summary, path in zip(summaries, batch_dirs, strict=True)
    )
    return render(
        "compare.html.j2",
        title=title,
        extra_style=category_style(looks),
        diff=diff_cell(overall["adjusted_pass_rate_diff"]),
        changed=overall["changed"],
        cost_diff=cost_text(overall["cost_usd_diff"], signed=True)
        if "cost_usd_diff" in overall
        else None,
        headers=headers,
        rate_chart=paired_rate_bars_svg(result["models"]),
        table=comparison_table(result),
        pairs=compare_pairs_table(result),
        counts=", ".join(f"{kinds.count(k)} {k}" for k in ("better", "worse", "changed")),
        repeated=has_repeats(rows_a) or has_repeats(rows_b),
        change_legend=legend(CHANGE_LOOK),
        grid_legend=grid_legend(looks, present=shown_statuses),
        grid=changed_grid(rows_a, rows_b, result["changed"], looks),
        methods=methods_section(compare_methods_lines(result), tests=_has_tests(result)),
        batch_a=str(batch_dirs[0]),
        batch_b=str(batch_dirs[1]),
    )


def _has_tests(result: Mapping[str, Any]) -> bool:
    return any((row.get("paired") or {}).get("mcnemar") for row in result["models"])
