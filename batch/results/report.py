"""``batch report``: one self-contained HTML file that shows a batch at a glance. Two
batches side by side (``batch report A B``) are ``batch.results.report_compare``, built from
this page's parts; the charts are ``batch.results.report_charts``.

- the header: state, when the batch first started and how long all its invocations ran
  (``batch.results.invocations``), the headline adjusted pass rate, and — when jobs have no
  outcome yet — how much of the batch that rate covers;
- pass rate per model: adjusted pass rate bars with 95% whiskers, and a methods note naming
  every interval's method (``batch.results.report_methods``);
- failures per model, stacked by failure category;
- spend per model, when some job reported usage (``batch.results.usage_stats``);
- the case-by-model grid (``batch.results.report_grid``): each cell coloured by status, a
  failed or error cell by its failure category with the category's own mark; hovering
  shows category, reason, duration and spend, clicking opens the run's ``output.log``;
  past 3,000 cells it folds to the failing cases, counts per case group and every failure
  (``batch.results.report_fold``), so the page stays a few MB at any size.

Nothing comes from the network (no fonts, styles, images or script files), so the file
opens anywhere, offline, and can be mailed as is. Every name from a summary is untrusted
text (a case may be called ``<script>``) and goes through ``html.escape``; links are built
from percent-encoded path segments, so a run dir cannot become a ``javascript:`` URL; the
script reads only the page's own ``data-`` attributes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from batch.results.invocations import BatchSpan, Invocation, batch_span, parse_stamp
from batch.results.report_charts import (
    esc,
    failure_bars_svg,
    rate_bars_svg,
    rate_text,
)
from batch.results.report_fold import folded_grid, folds
from batch.results.report_grid import (
    SCRIPT,
    STATUS_LOOK,
    breakable,
    category_looks,
    category_style,
    grid_controls,
    grid_legend,
    grid_table,
    legend,
)
from batch.results.report_methods import methods_lines, methods_section
from batch.results.report_repeats import REPEATS_STYLE, repeats_sections
from batch.results.report_samples import repeats_grid
from batch.results.sample_stats import has_repeats
from batch.results.stats import (
    GROUPINGS,
    batch_stats,
    grouped,
)
from batch.results.stats_cells import duration, percent, retried_pass_notes
from batch.results.summary_read import summary_rows
from batch.results.usage_stats import cost_text, tokens_text

#: Statuses without an outcome: a batch holding any is incomplete.
UNFINISHED = ("running", "pending", "skipped")


# -- spend -----------------------------------------------------------------------------------


def spend_table(groups: Sequence[Mapping[str, Any]], overall: Mapping[str, Any]) -> str:
    """Tokens, requests and cost per model and for the batch, as the jobs reported them."""
    head = "".join(
        f"<th>{name}</th>"
        for name in (
            "model",
            "input tokens",
            "output tokens",
            "requests",
            "cost",
            "cost per passed case",
            "jobs reporting",
        )
    )

    def cells(label: str, row: Mapping[str, Any], tag: str = "td") -> str:
        values = (
            tokens_text(row["input_tokens"]),
            tokens_text(row["output_tokens"]),
            tokens_text(row["requests"]),
            cost_text(row["cost_usd"]),
            cost_text(row["cost_per_passed_case"]),
            f"{row['jobs_with_usage']} of {row['jobs']}",
        )
        return f'<tr><{tag} class="name">{label}</{tag}>' + "".join(
            f'<{tag} class="num">{esc(v)}</{tag}>' for v in values
        )

    body = "".join(cells(breakable(row["model"]), row) + "</tr>" for row in groups)
    total = cells("whole batch", overall, "th") + "</tr>"
    return (
        f'<table class="spend"><thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
        f"<tfoot>{total}</tfoot></table>"
    )


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


def headline(stats: Mapping[str, Any], state: Any) -> str:
    """The adjusted pass rate, large, with the incomplete note right beside it."""
    rate = stats["adjusted_pass_rate"]
    interval = f" <small>(95% CI {rate_text(stats)}%)</small>" if rate is not None else ""
    note = coverage(stats, state)
    badge = f' <span class="incomplete">{esc(note)}</span>' if note else ""
    return (
        f'<p class="headline"><span class="label">adjusted pass rate</span> '
        f"<b>{percent(rate)}</b>{interval}{badge}</p>"
    )


def totals_list(stats: Mapping[str, Any]) -> str:
    items = "".join(
        f'<li><span class="{status}">{STATUS_LOOK[status][0]}</span>'
        f"<b>{stats[status]}</b> {status}</li>"
        for status in STATUS_LOOK
        if stats[status] or status in ("passed", "failed", "error")
    )
    if "cost_usd" in stats:
        items += (
            f"<li><b>{esc(cost_text(stats['cost_usd']))}</b> spent "
            f"({stats['jobs_with_usage']} of {stats['jobs']} jobs reported usage)</li>"
        )
    return f'<ul class="totals">{items}</ul>'


def batch_header(
    summary: Mapping[str, Any], stats: Mapping[str, Any], span: BatchSpan, label: str = ""
) -> str:
    title = summary.get("batch_id") or "(no batch id)"
    meta = " · ".join(
        [
            esc(f"state: {summary.get('state') or 'unknown'}"),
            esc(span_text(span)),
            esc(f"{stats['jobs']} jobs"),
        ]
    )
    return (
        f'<div class="batch"><h1>{esc(label)}{esc(title)}</h1><p class="meta">{meta}</p>'
        f"{headline(stats, summary.get('state'))}{totals_list(stats)}</div>"
    )


# -- pages -----------------------------------------------------------------------------------


def page(title: str, header: str, sections: str, footer: str, extra_style: str = "") -> str:
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)} — batch report</title>
<style>{STYLE}{extra_style}</style></head>
<body>
<header>{header}</header>
{sections}
<footer>{footer}</footer>
<script>{SCRIPT}</script>
</body></html>
"""


def render_report(
    summary: Mapping[str, Any],
    *,
    batch_dir: Path,
    report_path: Path,
    runs: Sequence[Invocation] = (),
) -> str:
    """The whole report as an HTML string; pure apart from resolving paths for links.

    ``runs``: the batch's invocations (``batch.results.stats_input.read_invocations``), for
    the whole batch's start and run time; the summary's own last invocation without them.
    """
    stats = batch_stats(summary, by="model", batch_dir=str(batch_dir))
    models, overall = stats[GROUPINGS["model"]], stats["overall"]
    jobs = summary_rows(summary)
    looks = category_looks(list(overall["failure_categories"]))
    colours = {name: colour for name, (colour, _) in looks.items()}
    title = f"{summary.get('batch_id') or Path(batch_dir).name}"
    header = batch_header(summary, overall, batch_span(runs, summary))
    failures = (
        legend(
            [
                (colour, mark, f"{name} ({overall['failure_categories'][name]})")
                for name, (colour, mark) in looks.items()
            ]
        )
        + failure_bars_svg(models, colours)
        if overall["failure_categories"]
        else '<p class="muted">No failed or error jobs.</p>'
    )
    spend = (
        "<section><h2>Spend by model</h2>"
        '<p class="note">As the jobs reported it (every attempt of a job, failures included); '
        "— where no job of the model reported that field. Cost per passed case = the model's "
        f"whole cost / its passed jobs.</p>{spend_table(models, overall)}</section>"
        if "cost_usd" in overall
        else ""
    )
    retried = "".join(
        f'<p class="note retried">{esc(line)}</p>' for line in retried_pass_notes(models, "model")
    )
    repeated = has_repeats(jobs)
    report_dir = report_path.parent
    # With repeats or scores, batch_stats adds the samples' figures (docs/stats.md).
    upper, flaky = (
        repeats_sections(stats, jobs, Path(batch_dir), report_dir, repeated=repeated)
        if "pass_at_k" in overall
        else ("", "")
    )
    note, cell = repeats_grid(Path(batch_dir), report_dir) if repeated else (GRID_NOTE, None)
    grid = (
        folded_grid(jobs, Path(batch_dir), report_path, looks, cell)
        if folds(jobs)
        else grid_table(jobs, Path(batch_dir), report_dir, looks, cell)
    )
    sections = f"""<section><h2>Pass rate by model</h2>
<p class="note">Bar: adjusted pass rate = passed / (passed + failed); errors are non-model
failures (infrastructure, API credit, task data, build) and are left out. Whisker: 95%
interval{" (a case's repeats are one cluster)" if repeated else ""}, named under Methods below.
Pending, running and skipped jobs are in no rate.</p>
{rate_bars_svg(models)}{retried}</section>
{upper}<section><h2>Failures by category</h2>{failures}</section>
{spend}
{flaky}<section><h2>Case &times; model</h2>
{note}
{grid_legend(looks, overall["failure_categories"], {row["status"] for row in jobs})}
{grid_controls(list(grouped(jobs, "model")), looks)}
{grid}</section>
{methods_section(methods_lines(stats, repeated=repeated), tests=_has_tests(stats))}"""
    footer = f"batch-ledger report of {esc(Path(batch_dir).name)}/batch-summary.json"
    style = category_style(looks) + (REPEATS_STYLE if upper else "")
    return page(title, header, sections, footer, style)


def _has_tests(stats: Mapping[str, Any]) -> bool:
    return any(pair.get("mcnemar") for pair in stats.get("paired") or [])


GRID_NOTE = """<p class="note">A failed or error cell shows its failure category's mark and \
colour. Hover a
cell for category, reason, duration and spend; click it to open the run's output.log.
“passed” counts passed / (passed + failed).</p>"""


STYLE = """
:root { color-scheme: light; --fg: #212529; --muted: #6c757d; --line: #dee2e6; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif;
  color: var(--fg); margin: 0 auto; padding: 24px 32px 48px; max-width: 1280px; }
h1 { font-size: 22px; margin: 0 0 4px; word-break: break-all; }
h2 { font-size: 16px; margin: 32px 0 6px; padding-top: 12px; border-top: 1px solid var(--line); }
.meta, .note, .muted, footer { color: var(--muted); }
.note { margin: 0 0 10px; max-width: 80ch; font-size: 13px; }
footer { margin-top: 32px; font-size: 12px; }
.headline { margin: 8px 0; font-size: 15px; display: flex; flex-wrap: wrap; align-items: baseline;
  gap: 4px 10px; }
.headline b { font-size: 28px; }
.headline .label { color: var(--muted); }
.incomplete { background: #fff3bf; border: 1px solid #f59f00; border-radius: 4px;
  padding: 2px 8px; font-size: 13px; }
.sides { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 24px; }
.sides h1 { font-size: 17px; }
svg { max-width: 100%; height: auto; display: block; font-size: 13px; }
svg text { fill: var(--fg); }
svg .label { text-anchor: end; }
svg .tick { text-anchor: middle; fill: var(--muted); font-size: 11px; }
svg .muted, svg tspan.muted { fill: var(--muted); }
svg .small { font-size: 11px; }
svg .strong { font-weight: 600; }
svg .in-bar { text-anchor: middle; font-size: 11px; font-weight: 600; }
svg .better { fill: #2b8a3e; } svg .worse { fill: #c92a2a; }
.better { color: #2b8a3e; } .worse { color: #c92a2a; }
.grid-line { stroke: #e9ecef; }
.bar { fill: #4c6ef5; } .bar-a { fill: #a5b4fc; } .bar-b { fill: #4c6ef5; }
.whisker { stroke: #1b2559; stroke-width: 1.5; fill: none; }
ul.totals, ul.legend { list-style: none; padding: 0; margin: 10px 0; display: flex;
  flex-wrap: wrap; gap: 6px 18px; }
ul.totals li, ul.legend li { display: flex; align-items: center; gap: 6px; }
ul.totals span, ul.legend span { display: inline-block; width: 18px; height: 18px;
  border-radius: 3px; text-align: center; line-height: 18px; font-size: 12px; font-weight: 600; }
table.spend { border-collapse: collapse; font-size: 13px; }
table.spend th, table.spend td { padding: 4px 10px; border-bottom: 1px solid var(--line); }
table.spend thead th { text-align: right; font-weight: 600; background: #f8f9fa; }
table.spend thead th:first-child { text-align: left; }
table.spend .num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
table.spend .name { text-align: left; max-width: 24em; overflow-wrap: anywhere; }
table.spend tfoot th { font-weight: 600; }
form.controls { display: flex; flex-wrap: wrap; gap: 6px 18px; align-items: center;
  margin: 8px 0; font-size: 13px; }
form.controls[hidden] { display: none; }
form.controls output { color: var(--muted); }
.grid-wrap { overflow: auto; max-height: 80vh; border: 1px solid var(--line); width: max-content;
  max-width: 100%; }
table.groups, table.failures { border-collapse: collapse; font-size: 13px; margin: 6px 0; }
table.groups td, table.groups th, table.failures td, table.failures th { padding: 2px 8px;
  border-bottom: 1px solid #f1f3f5; text-align: left; }
table.groups .bad { color: #c92a2a; }
table.grid { border-collapse: separate; border-spacing: 0; font-size: 13px; }
.grid th, .grid td { border-bottom: 1px solid #f1f3f5; padding: 0; }
.grid thead th { position: sticky; top: 0; background: #f8f9fa; z-index: 2; font-weight: 600;
  vertical-align: bottom; border-bottom: 1px solid var(--line); }
.grid th.model { padding: 6px 2px; font-size: 12px; cursor: pointer; min-width: 2.4em; }
.grid th.model .v { writing-mode: vertical-rl; transform: rotate(180deg); max-height: 16em;
  margin: 0 auto; text-align: left; line-height: 1.2; }
.grid th.model small { display: block; font-weight: normal; color: var(--muted);
  text-align: center; font-size: 11px; }
.grid th.case, .grid th.corner { position: sticky; left: 0; background: #fff; z-index: 1;
  text-align: left; padding: 2px 12px 2px 8px; font-weight: normal; white-space: nowrap;
  max-width: 22em; overflow: hidden; text-overflow: ellipsis;
  border-right: 1px solid var(--line); }
.grid thead th.corner { z-index: 3; background: #f8f9fa; color: var(--muted); font-size: 12px; }
.grid td { text-align: center; height: 24px; min-width: 2.4em; border-left: 2px solid #fff; }
.grid td a, .grid td span { display: block; line-height: 24px; color: inherit;
  text-decoration: none; font-weight: 600; }
.grid td a:hover, .grid td span:hover { outline: 2px solid #212529; outline-offset: -2px; }
.grid td.sum, .grid th.sum { color: var(--muted); padding: 0 10px; font-weight: normal;
  white-space: nowrap; text-align: right; }
.grid tbody tr:hover th.case { background: #f1f3f5; }
.grid.changes td { min-width: 3.4em; padding: 0 4px; }
.grid.changes td.better, ul.legend span.better { background: #b2f2bb; color: #1b4332; }
.grid.changes td.worse, ul.legend span.worse { background: #ffc9c9; color: #7d1a1a; }
.grid.changes td.changed, ul.legend span.changed { background: #e9ecef; color: #343a40; }
.passed { background: #2f9e44; color: #fff; }
.failed { background: #e03131; color: #fff; }
.error { background: #f59f00; color: #212529; }
.running { background: #74c0fc; color: #212529; }
.pending { background: #e9ecef; color: #495057; }
.skipped { background: repeating-linear-gradient(45deg, #f1f3f5 0 4px, #dee2e6 4px 8px);
  color: #495057; }
.unknown { background: #ced4da; }
td.none, td.same { background: #fff; }
"""
