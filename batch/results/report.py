"""``batch report``: one self-contained HTML file that shows a batch at a glance.

Three parts, all generated here as HTML and inline SVG (no scripts, fonts or styles from
the network, so the file opens anywhere, offline, and can be mailed as is):

- pass rate per model: adjusted pass rate bars with Wilson 95% whiskers;
- failures per model, stacked by failure category;
- the case-by-model grid, each cell coloured by status; hovering shows category and
  duration, clicking opens the run's ``output.log`` by a link relative to the report.

Every name from the summary is untrusted text (a case may be called ``<script>``) and goes
through ``html.escape``; links are built from percent-encoded path segments, so a run dir
cannot become a ``javascript:`` URL.
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from batch.layout import OUTPUT_LOG
from batch.results.stats import GROUPINGS, UNCATEGORIZED, batch_stats, group_stats, grouped
from batch.results.stats_format import duration, judged_cell, percent
from batch.results.summary import SummaryRow, summary_rows

STATUS_LOOK = {  # status → (symbol, what the legend says)
    "passed": ("✓", "passed"),
    "failed": ("✗", "failed (model failure)"),
    "error": ("!", "error (non-model failure)"),
    "running": ("▸", "running"),
    "pending": ("·", "pending"),
    "skipped": ("\u2013", "skipped"),  # en dash
}
CATEGORY_COLOURS = {
    "model_failure": "#e03131",
    "infra_failure": "#f59f00",
    "api_or_credit": "#7048e8",
    "task_data": "#a0785a",
    "build_instruction": "#1098ad",
    "uncategorized": "#adb5bd",
}
EXTRA_COLOURS = ("#e64980", "#4263eb", "#82c91e", "#0ca678", "#f76707", "#ae3ec9")
CHAR_WIDTH = 7.2  # px per character of 13px sans-serif text, to size SVG label columns
PLOT_WIDTH = 420


def esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def output_log_href(batch_dir: Path, run_dir: str, report_dir: Path) -> str:
    """A relative URL from the report's directory to ``BATCH_DIR/<run_dir>/output.log``."""
    target = os.path.abspath(Path(batch_dir) / run_dir / OUTPUT_LOG)
    relative = os.path.relpath(target, os.path.abspath(report_dir))
    return "/".join(quote(part, safe="") for part in relative.split(os.sep))


def category_colours(names: Sequence[str]) -> dict[str, str]:
    """A colour per category, in the order given, with ``uncategorized`` last.

    Known categories keep their colour in every report; others get the spare colours in
    name order, so the same batch always looks the same.
    """
    extra = sorted(name for name in names if name not in CATEGORY_COLOURS)
    spare = {name: EXTRA_COLOURS[i % len(EXTRA_COLOURS)] for i, name in enumerate(extra)}
    ordered = [name for name in names if name != UNCATEGORIZED]
    ordered += [UNCATEGORIZED] if UNCATEGORIZED in names else []
    return {name: CATEGORY_COLOURS.get(name) or spare[name] for name in ordered}


def breakable(name: str) -> str:
    """Escaped ``name`` that may wrap after ``/``, ``:``, ``_`` or ``-`` in a narrow header."""
    escaped = esc(name)
    for separator in "/:_-":
        escaped = escaped.replace(separator, separator + "<wbr>")
    return escaped


def fitted(name: str, chars: int) -> str:
    return name if len(name) <= chars else name[: chars - 1] + "…"


def label_column(names: Sequence[str]) -> tuple[float, int]:
    """Width of the SVG label column and how many characters of a name fit in it."""
    chars = min(max((len(name) for name in names), default=4), 36)
    return chars * CHAR_WIDTH + 16, chars


def rate_bars_svg(rows: Sequence[Mapping[str, Any]]) -> str:
    """Adjusted pass rate per model as a bar, its Wilson 95% interval as a whisker."""
    label_w, chars = label_column([row["model"] for row in rows])
    row_h, top = 30, 24
    width, height = label_w + PLOT_WIDTH + 340, top + row_h * len(rows) + 4
    x = lambda rate: label_w + rate * PLOT_WIDTH  # noqa: E731
    parts = []
    for tick in (0, 0.25, 0.5, 0.75, 1):
        parts.append(
            f'<line x1="{x(tick):.1f}" y1="{top - 4}" x2="{x(tick):.1f}" y2="{height}" '
            f'class="grid-line"/><text x="{x(tick):.1f}" y="{top - 9}" class="tick">'
            f"{tick:.0%}</text>"
        )
    for i, row in enumerate(rows):
        y = top + i * row_h
        mid = y + row_h / 2
        parts.append(
            f'<text x="{label_w - 10:.1f}" y="{mid + 4:.1f}" class="label">'
            f"<title>{esc(row['model'])}</title>{esc(fitted(row['model'], chars))}</text>"
        )
        rate = row["adjusted_pass_rate"]
        judged = row["passed"] + row["failed"]
        raw = f"raw {percent(row['pass_rate'])}" if row["pass_rate"] is not None else ""
        if rate is None:
            parts.append(
                f'<text x="{x(0) + 6:.1f}" y="{mid + 4:.1f}" class="muted">'
                f"no passed or failed job yet{esc(' · ' + raw) if raw else ''}</text>"
            )
            continue
        low, high = x(row["adjusted_pass_rate_low"]), x(row["adjusted_pass_rate_high"])
        interval = (
            f"{row['adjusted_pass_rate_low'] * 100:.1f}&ndash;"
            f"{row['adjusted_pass_rate_high'] * 100:.1f}"
        )
        parts.append(
            f'<rect x="{x(0):.1f}" y="{mid - 8:.1f}" width="{rate * PLOT_WIDTH:.1f}" '
            f'height="16" class="bar"><title>{esc(row["model"])}: adjusted pass rate '
            f"{percent(rate)}, 95% interval {interval}%</title></rect>"
            f'<path d="M{low:.1f},{mid:.1f}H{high:.1f}M{low:.1f},{mid - 5:.1f}v10'
            f'M{high:.1f},{mid - 5:.1f}v10" class="whisker"/>'
            f'<text x="{x(1) + 12:.1f}" y="{mid + 4:.1f}">'
            f'<tspan class="strong">{percent(rate)}</tspan> ({interval})'
            f' <tspan class="muted">· {row["passed"]}/{judged} · {esc(raw)}</tspan></text>'
        )
    return svg(width, height, parts, "Adjusted pass rate per model")


def failure_bars_svg(rows: Sequence[Mapping[str, Any]], colours: Mapping[str, str]) -> str:
    """Failed and error jobs per model, stacked by failure category on one shared scale."""
    label_w, chars = label_column([row["model"] for row in rows])
    row_h = 28
    width, height = label_w + PLOT_WIDTH + 300, row_h * len(rows) + 4
    most = max((sum(row["failure_categories"].values()) for row in rows), default=0) or 1
    parts = []
    for i, row in enumerate(rows):
        mid = i * row_h + row_h / 2 + 2
        parts.append(
            f'<text x="{label_w - 10:.1f}" y="{mid + 4:.1f}" class="label">'
            f"<title>{esc(row['model'])}</title>{esc(fitted(row['model'], chars))}</text>"
        )
        left, total = label_w, sum(row["failure_categories"].values())
        # Segments in legend order, so a category sits in the same place on every bar.
        counts = row["failure_categories"]
        for name, count in ((name, counts[name]) for name in colours if name in counts):
            w = count / most * PLOT_WIDTH
            parts.append(
                f'<rect x="{left:.1f}" y="{mid - 9:.1f}" width="{w:.1f}" height="18" '
                f'fill="{colours[name]}"><title>{esc(row["model"])}: {esc(name)} {count}'
                "</title></rect>"
            )
            if w >= 22:
                parts.append(
                    f'<text x="{left + w / 2:.1f}" y="{mid + 4:.1f}" class="in-bar">{count}</text>'
                )
            left += w
        summary = f"{total} failed or error" if total else "no failures"
        parts.append(
            f'<text x="{(left + 8) if total else label_w:.1f}" y="{mid + 4:.1f}" '
            f'class="muted">{summary}</text>'
        )
    return svg(width, height, parts, "Failures per model by category")


def svg(width: float, height: float, parts: Sequence[str], label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" role="img" aria-label="{esc(label)}">'
        + "".join(parts)
        + "</svg>"
    )


def cell_tooltip(job: Mapping[str, Any]) -> str:
    lines = [f"case: {job['case']}", f"model: {job['model']}", f"status: {job['status']}"]
    if job.get("failure_category"):
        lines.append(f"category: {job['failure_category']}")
    seconds = job.get("duration_seconds")
    if isinstance(seconds, int | float) and not isinstance(seconds, bool):
        lines.append(f"duration: {duration(float(seconds))}")
    attempts = job.get("attempts")
    if attempts:
        lines.append(f"attempts: {attempts}" + (" (carried over)" if job.get("resumed") else ""))
    if job.get("run_dir"):
        lines.append("click: open output.log")
    return "\n".join(lines)


def grid_cell(job: Mapping[str, Any] | None, batch_dir: Path, report_dir: Path) -> str:
    if job is None:
        return '<td class="none" title="no such job"></td>'
    status = job["status"]
    symbol = STATUS_LOOK.get(status, ("?", status))[0]
    css = status if status in STATUS_LOOK else "unknown"
    tip = esc(cell_tooltip(job)).replace("\n", "&#10;")
    if isinstance(job.get("run_dir"), str) and job["run_dir"]:
        href = esc(output_log_href(batch_dir, job["run_dir"], report_dir))
        return f'<td class="{css}"><a href="{href}" title="{tip}">{symbol}</a></td>'
    return f'<td class="{css}"><span title="{tip}">{symbol}</span></td>'


def grid_table(jobs: Sequence[SummaryRow], batch_dir: Path, report_dir: Path) -> str:
    """Cases down, models across; the last column and each model's header count passes."""
    by_pair = {(job["case"], job["model"]): job for job in jobs}
    cases, models = grouped(jobs, "case"), grouped(jobs, "model")
    head = "".join(
        f'<th class="model" scope="col" title="{esc(model)}">{breakable(model)}'
        f"<small>{judged_cell(group_stats(rows))}</small></th>"
        for model, rows in models.items()
    )
    body = []
    for case, rows in cases.items():
        cells = "".join(
            grid_cell(by_pair.get((case, model)), batch_dir, report_dir) for model in models
        )
        body.append(
            f'<tr><th class="case" scope="row" title="{esc(case)}">{esc(case)}</th>{cells}'
            f'<td class="sum">{judged_cell(group_stats(rows))}</td></tr>'
        )
    return (
        '<div class="grid-wrap"><table class="grid"><thead>'
        f'<tr><th class="corner" scope="col">case \\ model</th>{head}'
        '<th class="sum" scope="col">passed</th></tr>'
        f"</thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def legend(items: Sequence[tuple[str, str, str]]) -> str:
    """``items``: (css class or colour, symbol, text)."""
    entries = []
    for look, symbol, text in items:
        style = f' style="background:{look}"' if look.startswith("#") else ""
        css = "" if style else f' class="{look}"'
        entries.append(f"<li><span{css}{style}>{symbol}</span>{esc(text)}</li>")
    return f'<ul class="legend">{"".join(entries)}</ul>'


def render_report(summary: Mapping[str, Any], *, batch_dir: Path, report_path: Path) -> str:
    """The whole report as an HTML string; pure apart from resolving paths for links."""
    stats = batch_stats(summary, by="model", batch_dir=str(batch_dir))
    models, overall = stats[GROUPINGS["model"]], stats["overall"]
    jobs = summary_rows(summary)
    colours = category_colours(list(overall["failure_categories"]))
    title = f"{summary.get('batch_id') or Path(batch_dir).name}"
    totals = "".join(
        f'<li><span class="{status}">{STATUS_LOOK[status][0]}</span>'
        f"<b>{overall[status]}</b> {status}</li>"
        for status in STATUS_LOOK
        if overall[status] or status in ("passed", "failed", "error")
    )
    meta = " · ".join(
        esc(part)
        for part in (
            f"state: {summary.get('state') or 'unknown'}",
            f"started {summary.get('started_at') or '—'}",
            f"elapsed {duration(summary.get('elapsed_seconds'))}",
            f"{overall['jobs']} jobs",
            f"adjusted pass rate {percent(overall['adjusted_pass_rate'])}",
        )
    )
    failures = (
        legend(
            [
                (colour, "", f"{name} ({overall['failure_categories'][name]})")
                for name, colour in colours.items()
            ]
        )
        + failure_bars_svg(models, colours)
        if overall["failure_categories"]
        else '<p class="muted">No failed or error jobs.</p>'
    )
    status_legend = legend(
        [(status, symbol, text) for status, (symbol, text) in STATUS_LOOK.items()]
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)} — batch report</title>
<style>{STYLE}</style></head>
<body>
<header><h1>{esc(title)}</h1><p class="meta">{meta}</p><ul class="totals">{totals}</ul></header>
<section><h2>Pass rate by model</h2>
<p class="note">Bar: adjusted pass rate = passed / (passed + failed); errors are non-model
failures (infrastructure, API credit, task data, build) and are left out. Whisker: Wilson 95%
interval. Pending, running and skipped jobs are in no rate.</p>
{rate_bars_svg(models)}</section>
<section><h2>Failures by category</h2>{failures}</section>
<section><h2>Case &times; model</h2>
<p class="note">Hover a cell for category and duration; click it to open the run's
output.log. “passed” counts passed / (passed + failed).</p>
{status_legend}{grid_table(jobs, Path(batch_dir), report_path.parent)}</section>
<footer>batch-ledger report of {esc(Path(batch_dir).name)}/batch-summary.json</footer>
</body></html>
"""


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
svg { max-width: 100%; height: auto; display: block; font-size: 13px; }
svg text { fill: var(--fg); }
svg .label { text-anchor: end; }
svg .tick { text-anchor: middle; fill: var(--muted); font-size: 11px; }
svg .muted, svg tspan.muted { fill: var(--muted); }
svg .strong { font-weight: 600; }
svg .in-bar { text-anchor: middle; fill: #fff; font-size: 11px; font-weight: 600; }
.grid-line { stroke: #e9ecef; }
.bar { fill: #4c6ef5; }
.whisker { stroke: #1b2559; stroke-width: 1.5; fill: none; }
ul.totals, ul.legend { list-style: none; padding: 0; margin: 10px 0; display: flex;
  flex-wrap: wrap; gap: 6px 18px; }
ul.totals li, ul.legend li { display: flex; align-items: center; gap: 6px; }
ul.totals span, ul.legend span { display: inline-block; width: 18px; height: 18px;
  border-radius: 3px; text-align: center; line-height: 18px; font-size: 12px; }
.grid-wrap { overflow: auto; max-height: 80vh; border: 1px solid var(--line); width: max-content;
  max-width: 100%; }
table.grid { border-collapse: separate; border-spacing: 0; font-size: 13px; }
.grid th, .grid td { border-bottom: 1px solid #f1f3f5; padding: 0; }
.grid thead th { position: sticky; top: 0; background: #f8f9fa; z-index: 2; font-weight: 600;
  vertical-align: bottom; }
.grid thead th { border-bottom: 1px solid var(--line); }
.grid th.model small { display: block; font-weight: normal; color: var(--muted); }
.grid th.model { width: 7.5em; min-width: 7.5em; max-width: 7.5em; padding: 6px 4px;
  overflow-wrap: anywhere; font-size: 12px; text-align: center; }
.grid th.case, .grid th.corner { position: sticky; left: 0; background: #fff; z-index: 1;
  text-align: left; padding: 2px 12px 2px 8px; font-weight: normal; white-space: nowrap;
  max-width: 22em; overflow: hidden; text-overflow: ellipsis;
  border-right: 1px solid var(--line); }
.grid thead th.corner { z-index: 3; background: #f8f9fa; color: var(--muted); font-size: 12px; }
.grid td { text-align: center; height: 24px; border-left: 2px solid #fff; }
.grid td a, .grid td span { display: block; line-height: 24px; color: inherit;
  text-decoration: none; font-weight: 600; }
.grid td a:hover, .grid td span:hover { outline: 2px solid #212529; outline-offset: -2px; }
.grid td.sum, .grid th.sum { color: var(--muted); padding: 0 10px; font-weight: normal;
  white-space: nowrap; text-align: right; }
.grid tbody tr:hover th.case { background: #f1f3f5; }
.passed { background: #2f9e44; color: #fff; }
.failed { background: #e03131; color: #fff; }
.error { background: #f59f00; color: #212529; }
.running { background: #74c0fc; color: #212529; }
.pending { background: #e9ecef; color: #495057; }
.skipped { background: repeating-linear-gradient(45deg, #f1f3f5 0 4px, #dee2e6 4px 8px);
  color: #495057; }
.unknown { background: #ced4da; }
td.none { background: #fff; }
"""
