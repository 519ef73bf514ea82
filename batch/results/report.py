"""``batch report``: one self-contained HTML file that shows a batch at a glance. Two
batches side by side (``batch report A B``) are ``batch.results.report_compare``, built from
this page's parts; the charts are ``batch.results.report_charts``.

- the header: state, when the batch first started and how long all its invocations ran
  (``batch.results.invocations``), the headline adjusted pass rate, and — when jobs have no
  outcome yet — how much of the batch that rate covers;
- pass rate per model: adjusted pass rate bars with Wilson 95% whiskers;
- failures per model, stacked by failure category;
- spend per model, when some job reported usage (``batch.results.usage_stats``);
- the case-by-model grid: each cell coloured by status, a failed or error cell by its
  failure category with the category's own mark; hovering shows category, reason,
  duration and spend, clicking opens the run's ``output.log`` by a link relative to the
  report. A few lines of inline script sort and filter the grid; without script it is the
  whole grid in sweep order.

Nothing comes from the network (no fonts, styles, images or script files), so the file
opens anywhere, offline, and can be mailed as is. Every name from a summary is untrusted
text (a case may be called ``<script>``) and goes through ``html.escape``; links are built
from percent-encoded path segments, so a run dir cannot become a ``javascript:`` URL; the
script reads only the page's own ``data-`` attributes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from batch.layout import OUTPUT_LOG
from batch.results.invocations import BatchSpan, Invocation, batch_span, parse_stamp
from batch.results.report_charts import (
    esc,
    failure_bars_svg,
    rate_bars_svg,
    rate_text,
    text_colour,
)
from batch.results.stats import (
    GROUPINGS,
    UNCATEGORIZED,
    batch_stats,
    group_stats,
    grouped,
    row_reason,
)
from batch.results.stats_cells import duration, judged_cell, percent
from batch.results.summary import SummaryRow, summary_rows
from batch.results.usage_stats import cost_text, row_usage, tokens_text

STATUS_LOOK = {  # status → (symbol, what the legend says)
    "passed": ("✓", "passed"),
    "failed": ("✗", "failed (model failure)"),
    "error": ("!", "error (non-model failure)"),
    "running": ("▸", "running"),
    "pending": ("·", "pending"),
    "skipped": ("\u2013", "skipped"),  # en dash
}


#: Statuses without an outcome: a batch holding any is incomplete.
UNFINISHED = ("running", "pending", "skipped")


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


def category_style(looks: Mapping[str, tuple[str, str]]) -> str:
    """One CSS class per category (``k0``, ``k1``, ...): a name may be any text, an index
    is always a valid class."""
    return "".join(
        f".k{i}{{background:{colour};color:{text_colour(colour)}}}"
        for i, (colour, _) in enumerate(looks.values())
    )


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


def tooltip_attr(text: str) -> str:
    return esc(text).replace("\n", "&#10;")


#: Sort rank of a cell when sorting by one model: failures first, then no outcome, passes.
RANK = {"failed": 0, "error": 0, "running": 1, "pending": 1, "skipped": 1, "passed": 2}


def grid_cell(
    job: Mapping[str, Any] | None,
    batch_dir: Path,
    report_dir: Path,
    kinds: Mapping[str, int],
    marks: Sequence[str],
) -> str:
    if job is None:
        return '<td class="none" data-r="3" title="no such job"></td>'
    category = job_category(job)
    status = job["status"]
    css = status if status in STATUS_LOOK else "unknown"
    symbol = STATUS_LOOK.get(status, ("?", status))[0]
    data = f' data-r="{RANK.get(status, 1)}"'
    if category is not None:
        css += f" k{kinds[category]}"
        symbol = marks[kinds[category]]
        data += f' data-k="{kinds[category]}"'
    tip = tooltip_attr(cell_tooltip(job))
    if isinstance(job.get("run_dir"), str) and job["run_dir"]:
        href = esc(output_log_href(batch_dir, job["run_dir"], report_dir))
        return f'<td class="{css}"{data}><a href="{href}" title="{tip}">{symbol}</a></td>'
    return f'<td class="{css}"{data}><span title="{tip}">{symbol}</span></td>'


def model_header(model: str, note: str) -> str:
    """A grid column header: the name written upwards, wrapping after a separator when it
    is too long for one line, never cut."""
    return (
        f'<th class="model" scope="col" title="{esc(model)}"><div class="v">'
        f"{breakable(model)}</div><small>{note}</small></th>"
    )


def breakable(name: str) -> str:
    """Escaped ``name`` that may wrap after ``/``, ``:``, ``_`` or ``-`` in a narrow header."""
    escaped = esc(name)
    for separator in "/:_-":
        escaped = escaped.replace(separator, separator + "<wbr>")
    return escaped


def grid_table(
    jobs: Sequence[SummaryRow],
    batch_dir: Path,
    report_dir: Path,
    looks: Mapping[str, tuple[str, str]],
) -> str:
    """Cases down, models across; the last column and each model's header count passes.

    Each row carries what the inline script sorts and filters by: its sweep position
    (``data-i``), name (``data-c``), failed + error count (``data-f``), passes (``data-p``)
    and the categories in it (``data-k``); each cell its sort rank (``data-r``).
    """
    kinds = {name: i for i, name in enumerate(looks)}
    marks = [mark for _, mark in looks.values()]
    by_pair = {(job["case"], job["model"]): job for job in jobs}
    cases, models = grouped(jobs, "case"), grouped(jobs, "model")
    head = "".join(
        model_header(model, judged_cell(group_stats(rows))) for model, rows in models.items()
    )
    body = []
    for index, (case, rows) in enumerate(cases.items()):
        stats = group_stats(rows)
        row_kinds = sorted({kinds[c] for c in map(job_category, rows) if c is not None})
        cells = "".join(
            grid_cell(by_pair.get((case, model)), batch_dir, report_dir, kinds, marks)
            for model in models
        )
        body.append(
            f'<tr data-i="{index}" data-c="{esc(case)}" data-f="{stats["failed"] + stats["error"]}"'
            f' data-p="{stats["passed"]}" data-k=" {" ".join(map(str, row_kinds))} ">'
            f'<th class="case" scope="row" title="{esc(case)}">{esc(case)}</th>{cells}'
            f'<td class="sum">{judged_cell(stats)}</td></tr>'
        )
    return (
        '<div class="grid-wrap"><table class="grid" id="grid"><thead>'
        f'<tr><th class="corner" scope="col">case \\ model</th>{head}'
        '<th class="sum" scope="col">passed</th></tr>'
        f"</thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def grid_controls(models: Sequence[str], looks: Mapping[str, tuple[str, str]]) -> str:
    """Sort and filter controls, hidden until the script shows them: without script they
    would do nothing, and the grid is whole anyway."""
    categories = "".join(
        f'<option value="{i}">{esc(mark)} {esc(name)}</option>'
        for i, (name, (_, mark)) in enumerate(looks.items())
    )
    by_model = "".join(
        f'<option value="m{i + 1}">{esc(model)}: failures first</option>'
        for i, model in enumerate(models)
    )
    return (
        '<form class="controls" id="grid-controls" hidden>'
        '<label><input type="checkbox" id="only-failures"> failures only</label>'
        '<label>category <select id="category"><option value="">any</option>'
        f"{categories}</select></label>"
        '<label>sort <select id="sort"><option value="i">sweep order</option>'
        '<option value="f">most failures first</option>'
        '<option value="p">fewest passes first</option>'
        f'<option value="c">case name</option>{by_model}</select></label>'
        '<output id="shown"></output></form>'
    )


#: Sorts and filters the grid by its rows' data- attributes (see grid_table); a click on
#: a model's header sorts by that model. Reads nothing but the page.
SCRIPT = """
(() => {
  const form = document.getElementById("grid-controls"), grid = document.getElementById("grid");
  if (!form || !grid) return;
  const body = grid.tBodies[0], rows = [...body.rows], $ = (id) => document.getElementById(id);
  const num = (row, key) => Number(row.dataset[key]);
  const keys = {i: (r) => num(r, "i"), f: (r) => -num(r, "f"), p: (r) => num(r, "p")};
  function apply() {
    const only = $("only-failures").checked, kind = $("category").value, how = $("sort").value;
    let shown = 0;
    for (const row of rows) {
      const wanted = kind === "" || row.dataset.k.includes(` ${kind} `);
      row.hidden = (only && num(row, "f") === 0) || !wanted;
      shown += row.hidden ? 0 : 1;
    }
    const col = Number(how.slice(1));
    const by = how === "c" ? (a, b) => a.dataset.c.localeCompare(b.dataset.c)
      : how[0] === "m" ? (a, b) => num(a.cells[col], "r") - num(b.cells[col], "r")
      : (a, b) => keys[how](a) - keys[how](b);
    body.append(...[...rows].sort((a, b) => by(a, b) || num(a, "i") - num(b, "i")));
    $("shown").textContent = `${shown} of ${rows.length} cases`;
  }
  grid.tHead.querySelectorAll("th.model").forEach((th, i) => {
    th.addEventListener("click", () => { $("sort").value = `m${i + 1}`; apply(); });
  });
  form.addEventListener("change", apply);
  form.hidden = false;
  apply();
})();
"""


def legend(items: Sequence[tuple[str, str, str]]) -> str:
    """``items``: (css class or colour, symbol, text)."""
    entries = []
    for look, symbol, text in items:
        style = f' style="background:{look};color:{text_colour(look)}"' if look[:1] == "#" else ""
        css = "" if style else f' class="{look}"'
        entries.append(f"<li><span{css}{style}>{esc(symbol)}</span>{esc(text)}</li>")
    return f'<ul class="legend">{"".join(entries)}</ul>'


def grid_legend(
    looks: Mapping[str, tuple[str, str]], counts: Mapping[str, int] | None = None
) -> str:
    statuses = [
        (status, symbol, text)
        for status, (symbol, text) in STATUS_LOOK.items()
        if status not in ("failed", "error")
    ]
    categories = [
        (colour, mark, name if counts is None else f"{name} ({counts.get(name, 0)})")
        for name, (colour, mark) in looks.items()
    ]
    return legend(statuses + categories)


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
    sections = f"""<section><h2>Pass rate by model</h2>
<p class="note">Bar: adjusted pass rate = passed / (passed + failed); errors are non-model
failures (infrastructure, API credit, task data, build) and are left out. Whisker: Wilson 95%
interval. Pending, running and skipped jobs are in no rate.</p>
{rate_bars_svg(models)}</section>
<section><h2>Failures by category</h2>{failures}</section>
{spend}
<section><h2>Case &times; model</h2>
<p class="note">A failed or error cell shows its failure category's mark and colour. Hover a
cell for category, reason, duration and spend; click it to open the run's output.log.
“passed” counts passed / (passed + failed).</p>
{grid_legend(looks, overall["failure_categories"])}
{grid_controls(list(grouped(jobs, "model")), looks)}
{grid_table(jobs, Path(batch_dir), report_path.parent, looks)}</section>"""
    footer = f"batch-ledger report of {esc(Path(batch_dir).name)}/batch-summary.json"
    return page(title, header, sections, footer, category_style(looks))


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
