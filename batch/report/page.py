"""``batch report``: one self-contained HTML file that shows a batch at a glance. Two
batches side by side (``batch report A B``) are ``batch.report.compare``, built from
this page's parts; the charts are ``batch.report.charts``.

- the header: state, when the batch first started and how long all its invocations ran
  (``batch.stats.invocations``), the headline adjusted pass rate, and — when jobs have no
  outcome yet — how much of the batch that rate covers;
- pass rate per model: adjusted pass rate bars with 95% whiskers, and a methods note naming
  every interval's method (``batch.report.methods``);
- failures per model, stacked by failure category;
- spend per model, when some job reported usage (``batch.stats.usage``);
- the case-by-model grid (``batch.report.grid``): each cell coloured by status, a
  failed or error cell by its failure category with the category's own mark; hovering
  shows category, reason, duration and spend, clicking opens the run's ``output.log``;
  past 3,000 cells it folds to the failing cases, counts per case group and every failure
  (``batch.report.fold``), so the page stays a few MB at any size.

Nothing comes from the network (no fonts, styles, images or script files), so the file
opens anywhere, offline, and can be mailed as is. The page is Jinja2 templates
(``batch/report/templates``, ``batch.report.environment``) with autoescape: every name
from a summary is untrusted text (a case may be called ``<script>``) and the templates escape
it, the Python code only computes plain values; links are built from percent-encoded path
segments, so a run dir cannot become a ``javascript:`` URL; the script reads only the page's
own ``data-`` attributes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from markupsafe import Markup

from batch.report.charts import failure_bars_svg, rate_bars_svg, rate_text
from batch.report.environment import macro, render
from batch.report.fold import folded_grid, folds
from batch.report.grid import (
    STATUS_LOOK,
    category_looks,
    category_style,
    grid_controls,
    grid_legend,
    grid_table,
    legend,
)
from batch.report.methods import methods_lines, methods_section
from batch.report.repeats import repeats_sections, repeats_style
from batch.report.repeats_cells import repeats_grid
from batch.stats.cells import duration, percent, retried_pass_notes
from batch.stats.invocations import BatchSpan, Invocation, batch_span, parse_stamp
from batch.stats.rates import (
    GROUPINGS,
    batch_stats,
    grouped,
)
from batch.stats.repeats_rows import has_repeats
from batch.stats.stopped import stop_notes
from batch.stats.usage import cost_text, tokens_text
from batch.summary.read import summary_rows

#: Statuses without an outcome: a batch holding any is incomplete.
UNFINISHED = ("running", "pending", "skipped")


# -- spend -----------------------------------------------------------------------------------


def spend_table(groups: Sequence[Mapping[str, Any]], overall: Mapping[str, Any]) -> Markup:
    """Tokens, requests and cost per model and for the batch, as the jobs reported them."""
    headers = ["model", "input tokens", "output tokens", "requests", "cost",
               "cost per passed case", "jobs reporting"]  # fmt: skip

    def cells(row: Mapping[str, Any]) -> list[tuple[str, str]]:
        values = (
            tokens_text(row["input_tokens"]),
            tokens_text(row["output_tokens"]),
            tokens_text(row["requests"]),
            cost_text(row["cost_usd"]),
            cost_text(row["cost_per_passed_case"]),
            f"{row['jobs_with_usage']} of {row['jobs']}",
        )
        return [(value, "") for value in values]

    rows = [(row["model"], cells(row)) for row in groups]
    return macro("parts.html.j2", "figures_table", headers, rows, ("whole batch", cells(overall)))


# -- the header ------------------------------------------------------------------------------


def coverage(stats: Mapping[str, Any], state: Any) -> str | None:
    """``incomplete: 2,208 of 2,400 jobs have an outcome (92.0%); not run: 96 pending, 96
    skipped; state interrupted`` for a batch that did not run every job to an outcome;
    ``None`` for a complete one."""
    jobs = stats["jobs"]
    finished = stats["passed"] + stats["failed"] + stats["error"]
    if finished == jobs and state in ("complete", None):
        return None
    parts = [f"incomplete: {finished:,} of {jobs:,} jobs have an outcome"]
    if jobs:
        parts[0] += f" ({finished / jobs:.1%})"
    not_run = ", ".join(f"{stats[s]:,} {s}" for s in UNFINISHED if stats[s])
    parts += [f"not run: {not_run}"] if not_run else []
    parts += [] if state in ("complete", None) else [f"state {state}"]
    return "; ".join(parts)


def moment_text(stamp: str | None) -> str:
    """``2026-11-30 03:15 UTC`` for a ledger timestamp; the text as is when it is not one."""
    moment = parse_stamp(stamp)
    return moment.strftime("%Y-%m-%d %H:%M UTC") if moment else (stamp or "—")


def span_text(span: BatchSpan) -> str:
    runs = f" over {span.invocations} invocations" if span.invocations > 1 else ""
    return f"started {moment_text(span.started_at)} · ran {duration(span.elapsed_seconds)}{runs}"


def batch_header(
    summary: Mapping[str, Any], stats: Mapping[str, Any], span: BatchSpan, label: str = ""
) -> Markup:
    """The batch's name, state and run time, the adjusted pass rate large with the incomplete
    note right beside it, and the totals per status (and spend)."""
    rate = stats["adjusted_pass_rate"]
    spent = "cost_usd" in stats
    header = {
        "label": label,
        "title": summary.get("batch_id") or "(no batch id)",
        "meta": [
            f"state: {summary.get('state') or 'unknown'}",
            span_text(span),
            f"{stats['jobs']} jobs",
        ],
        "rate": percent(rate),
        "interval": rate_text(stats) if rate is not None else None,
        "note": coverage(stats, summary.get("state")),
        "totals": [
            (status, STATUS_LOOK[status][0], stats[status])
            for status in STATUS_LOOK
            if stats[status] or status in ("passed", "failed", "error")
        ],
        "spent": cost_text(stats["cost_usd"]) if spent else None,
        "reporting": f"{stats['jobs_with_usage']} of {stats['jobs']}" if spent else None,
    }
    return macro("parts.html.j2", "batch_header", header)


# -- the page -----------------------------------------------------------------------------------


def render_report(
    summary: Mapping[str, Any],
    *,
    batch_dir: Path,
    report_path: Path,
    runs: Sequence[Invocation] = (),
) -> str:
    """The whole report as an HTML string; pure apart from resolving paths for links.

    ``runs``: the batch's invocations (``batch.stats.source.read_invocations``), for
    the whole batch's start and run time; the summary's own last invocation without them.
    """
    stats = batch_stats(summary, by="model", batch_dir=str(batch_dir))
    models, overall = stats[GROUPINGS["model"]], stats["overall"]
    jobs = summary_rows(summary)
    looks = category_looks(list(overall["failure_categories"]))
    colours = {name: colour for name, (colour, _) in looks.items()}
    title = f"{summary.get('batch_id') or Path(batch_dir).name}"
    repeated = has_repeats(jobs)
    report_dir = report_path.parent
    # With repeats or scores, batch_stats adds the samples' figures (docs/stats.md).
    upper, flaky = (
        repeats_sections(stats, jobs, Path(batch_dir), report_dir, repeated=repeated)
        if "pass_at_k" in overall
        else (Markup(), Markup())
    )
    note, cell = (
        repeats_grid(Path(batch_dir), report_dir)
        if repeated
        else (macro("parts.html.j2", "note", GRID_NOTE), None)
    )
    categories = overall["failure_categories"]
    return render(
        "report.html.j2",
        title=title,
        header=batch_header(summary, overall, batch_span(runs, summary)),
        extra_style=category_style(looks) + (repeats_style() if upper else Markup()),
        repeated=repeated,
        rate_chart=rate_bars_svg(models),
        # Under the rates: a pass that took retries; a model stop_when stopped early.
        retried=retried_pass_notes(models, "model") + stop_notes(stats, models),
        upper=upper,
        failures_legend=legend(
            [
                (colour, mark, f"{name} ({categories[name]})")
                for name, (colour, mark) in looks.items()
            ]
        ),
        failures_chart=failure_bars_svg(models, colours) if categories else None,
        spend=spend_table(models, overall) if "cost_usd" in overall else None,
        flaky=flaky,
        grid_note=note,
        grid_legend=grid_legend(looks, categories, {row["status"] for row in jobs}),
        grid_controls=grid_controls(list(grouped(jobs, "model")), looks),
        grid=folded_grid(jobs, Path(batch_dir), report_path, looks, cell)
        if folds(jobs)
        else grid_table(jobs, Path(batch_dir), report_dir, looks, cell),
        methods=methods_section(methods_lines(stats, repeated=repeated), tests=_has_tests(stats)),
        batch_name=Path(batch_dir).name,
    )


def _has_tests(stats: Mapping[str, Any]) -> bool:
    return any(pair.get("mcnemar") for pair in stats.get("paired") or [])


#: The grid's note in a batch without repeats.
GRID_NOTE = """A failed or error cell shows its failure category's mark and colour. Hover a
cell for category, reason, duration and spend; click it to open the run's output.log.
“passed” counts passed / (passed + failed)."""
