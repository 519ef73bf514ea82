"""``batch report``: one self-contained HTML file that shows a batch at a glance, or two
batches side by side (``batch report A B``).

One batch:

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

Two batches: both headers, paired rate bars with the difference, a table of rates, spend
and differences per model, and a grid of the cells whose status changed.

Nothing comes from the network (no fonts, styles, images or script files), so the file
opens anywhere, offline, and can be mailed as is. Every name from a summary is untrusted
text (a case may be called ``<script>``) and goes through ``html.escape``; links are built
from percent-encoded path segments, so a run dir cannot become a ``javascript:`` URL; the
script reads only the page's own ``data-`` attributes.
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from batch.layout import OUTPUT_LOG
from batch.results.invocations import BatchSpan, Invocation, batch_span, parse_stamp
from batch.results.stats import (
    GROUPINGS,
    UNCATEGORIZED,
    batch_stats,
    compare_stats,
    group_stats,
    grouped,
    row_reason,
)
from batch.results.stats_format import diff_cell, duration, judged_cell, percent
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
CHAR_WIDTH = 7.2  # px per character of 13px sans-serif text, to size SVG label columns
PLOT_WIDTH = 420
#: Characters of a model name per line of an SVG label; longer names wrap onto more lines.
LABEL_CHARS = 34
LINE_HEIGHT = 15


def esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


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


def text_colour(background: str) -> str:
    """Dark text on a light background, white on a dark one (relative luminance)."""
    r, g, b = (int(background[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return "#212529" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.55 else "#fff"


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


# -- SVG charts ------------------------------------------------------------------------------


def label_lines(name: str, chars: int = LABEL_CHARS) -> list[str]:
    """``name`` as lines of at most ``chars`` characters, broken after ``/``, ``:``, ``_``
    or ``-`` where it can be, anywhere where it cannot: a long model name wraps, it is
    never cut."""
    lines: list[str] = []
    rest = name
    while len(rest) > chars:
        cut = max(rest.rfind(sep, 0, chars) for sep in "/:_-. ") + 1
        cut = cut if cut > chars // 3 else chars
        lines.append(rest[:cut])
        rest = rest[cut:]
    return [*lines, rest]


def label_column(names: Sequence[str]) -> float:
    """Width of the SVG label column: the longest line of any name."""
    longest = max((len(line) for name in names for line in label_lines(name)), default=4)
    return longest * CHAR_WIDTH + 16


def svg_label(name: str, x: float, mid: float) -> str:
    """A right-aligned label of one or more lines, centred on ``mid``."""
    lines = label_lines(name)
    first = mid + 4 - (len(lines) - 1) * LINE_HEIGHT / 2
    spans = "".join(
        f'<tspan x="{x:.1f}" y="{first + i * LINE_HEIGHT:.1f}">{esc(line)}</tspan>'
        for i, line in enumerate(lines)
    )
    return f'<text class="label"><title>{esc(name)}</title>{spans}</text>'


def row_heights(names: Sequence[str], base: float) -> list[float]:
    return [max(base, len(label_lines(name)) * LINE_HEIGHT + 8) for name in names]


def rate_text(row: Mapping[str, Any]) -> str:
    low, high = row["adjusted_pass_rate_low"], row["adjusted_pass_rate_high"]
    return f"{low * 100:.1f}&ndash;{high * 100:.1f}"


def rate_bar(row: Mapping[str, Any], x: Any, mid: float, height: float, css: str) -> str:
    """One adjusted-rate bar with its whisker, or nothing when the rate is undefined."""
    rate = row["adjusted_pass_rate"]
    if rate is None:
        return ""
    low, high = x(row["adjusted_pass_rate_low"]), x(row["adjusted_pass_rate_high"])
    return (
        f'<rect x="{x(0):.1f}" y="{mid - height / 2:.1f}" width="{rate * PLOT_WIDTH:.1f}" '
        f'height="{height}" class="{css}"><title>adjusted pass rate {percent(rate)}, 95% '
        f"interval {rate_text(row)}%</title></rect>"
        f'<path d="M{low:.1f},{mid:.1f}H{high:.1f}M{low:.1f},{mid - 4:.1f}v8'
        f'M{high:.1f},{mid - 4:.1f}v8" class="whisker"/>'
    )


def model_rows(
    rows: Sequence[Mapping[str, Any]], base: float, top: float
) -> tuple[float, float, list[tuple[Mapping[str, Any], float, str]]]:
    """A per-model chart's rows: the label column's width, the rows' total height, and each
    row with its middle and its model's label (placed from ``top`` down)."""
    names = [row["model"] for row in rows]
    label_w = label_column(names)
    heights = row_heights(names, base)
    placed = []
    y = float(top)
    for row, row_h in zip(rows, heights, strict=True):
        mid = y + row_h / 2
        y += row_h
        placed.append((row, mid, svg_label(row["model"], label_w - 10, mid)))
    return label_w, sum(heights), placed


def rate_axis(x: Any, top: float, height: float) -> list[str]:
    return [
        f'<line x1="{x(tick):.1f}" y1="{top - 4}" x2="{x(tick):.1f}" y2="{height}" '
        f'class="grid-line"/><text x="{x(tick):.1f}" y="{top - 9}" class="tick">'
        f"{tick:.0%}</text>"
        for tick in (0, 0.25, 0.5, 0.75, 1)
    ]


def rate_bars_svg(rows: Sequence[Mapping[str, Any]]) -> str:
    """Adjusted pass rate per model as a bar, its Wilson 95% interval as a whisker."""
    top = 24
    label_w, rows_h, placed = model_rows(rows, 30, top)
    width, height = label_w + PLOT_WIDTH + 340, top + rows_h + 4
    x = lambda rate: label_w + rate * PLOT_WIDTH  # noqa: E731
    parts = rate_axis(x, top, height)
    for row, mid, label in placed:
        parts.append(label)
        rate = row["adjusted_pass_rate"]
        judged = row["passed"] + row["failed"]
        raw = f"raw {percent(row['pass_rate'])}" if row["pass_rate"] is not None else ""
        if rate is None:
            parts.append(
                f'<text x="{x(0) + 6:.1f}" y="{mid + 4:.1f}" class="muted">'
                f"no passed or failed job yet{esc(' · ' + raw) if raw else ''}</text>"
            )
            continue
        parts.append(rate_bar(row, x, mid, 16, "bar"))
        parts.append(
            f'<text x="{x(1) + 12:.1f}" y="{mid + 4:.1f}">'
            f'<tspan class="strong">{percent(rate)}</tspan> ({rate_text(row)})'
            f' <tspan class="muted">· {row["passed"]}/{judged} · {esc(raw)}</tspan></text>'
        )
    return svg(width, height, parts, "Adjusted pass rate per model")


def failure_bars_svg(rows: Sequence[Mapping[str, Any]], colours: Mapping[str, str]) -> str:
    """Failed and error jobs per model, stacked by failure category on one shared scale."""
    label_w, rows_h, placed = model_rows(rows, 28, 2.0)
    width, height = label_w + PLOT_WIDTH + 300, rows_h + 4
    most = max((sum(row["failure_categories"].values()) for row in rows), default=0) or 1
    parts = []
    for row, mid, label in placed:
        parts.append(label)
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
                    f'<text x="{left + w / 2:.1f}" y="{mid + 4:.1f}" class="in-bar" '
                    f'style="fill:{text_colour(colours[name])}">{count}</text>'
                )
            left += w
        summary = f"{total} failed or error" if total else "no failures"
        parts.append(
            f'<text x="{(left + 8) if total else label_w:.1f}" y="{mid + 4:.1f}" '
            f'class="muted">{summary}</text>'
        )
    return svg(width, height, parts, "Failures per model by category")


def paired_rate_bars_svg(rows: Sequence[Mapping[str, Any]]) -> str:
    """Per model, A's and B's adjusted pass rate as two bars with whiskers, B - A beside."""
    top = 24
    label_w, rows_h, placed = model_rows(rows, 40, top)
    width, height = label_w + PLOT_WIDTH + 300, top + rows_h + 4
    x = lambda rate: label_w + rate * PLOT_WIDTH  # noqa: E731
    parts = rate_axis(x, top, height)
    for row, mid, label in placed:
        parts.append(label)
        for side, offset in (("a", -8), ("b", 8)):
            stats = row[side]
            if stats is None or stats["adjusted_pass_rate"] is None:
                what = "absent" if stats is None else "no passed or failed job"
                parts.append(
                    f'<text x="{x(0) + 4:.1f}" y="{mid + offset + 4:.1f}" class="muted small">'
                    f"{side.upper()}: {what}</text>"
                )
                continue
            parts.append(rate_bar(stats, x, mid + offset, 12, f"bar-{side}"))
            parts.append(
                f'<text x="{x(1) + 10:.1f}" y="{mid + offset + 4:.1f}" class="small">'
                f"{side.upper()} {percent(stats['adjusted_pass_rate'])}</text>"
            )
        diff = row["adjusted_pass_rate_diff"]
        css = "better" if diff and diff > 0 else "worse" if diff and diff < 0 else "muted"
        parts.append(
            f'<text x="{x(1) + 90:.1f}" y="{mid + 5:.1f}" class="strong {css}">'
            f"{esc(diff_cell(diff))}</text>"
        )
    return svg(width, height, parts, "Adjusted pass rate per model, A and B")


def svg(width: float, height: float, parts: Sequence[str], label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" role="img" aria-label="{esc(label)}">'
        + "".join(parts)
        + "</svg>"
    )


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


# -- two batches -----------------------------------------------------------------------------


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
) -> str:
    """The cells whose status changed, cases down and models across: A's mark → B's (the
    marks say status and category), on green when B passes what A did not, red when B no
    longer passes, grey otherwise."""
    if not changed:
        return '<p class="muted">No job changed its status.</p>'
    kinds = {name: i for i, name in enumerate(looks)}
    marks = [mark for _, mark in looks.values()]
    a_jobs = {(j["case"], j["model"]): j for j in rows_a}
    b_jobs = {(j["case"], j["model"]): j for j in rows_b}
    cases = list(dict.fromkeys(change["case"] for change in changed))
    models = list(dict.fromkeys([*(j["model"] for j in rows_a), *(j["model"] for j in rows_b)]))
    models = [m for m in models if any(change["model"] == m for change in changed)]
    pairs = {(change["case"], change["model"]) for change in changed}

    def mark(job: Mapping[str, Any] | None) -> str:
        if job is None:
            return "∅"
        category = job_category(job)
        if category is not None:
            return marks[kinds[category]]
        return STATUS_LOOK.get(job["status"], ("?", ""))[0]

    body = []
    for case in cases:
        cells = []
        for model in models:
            if (case, model) not in pairs:
                cells.append('<td class="same"></td>')
                continue
            a, b = a_jobs.get((case, model)), b_jobs.get((case, model))
            kind = change_kind(a and a["status"], b and b["status"])
            tip = tooltip_attr(
                f"case: {case}\nmodel: {model}\nA: {side_text(a)}\nB: {side_text(b)}"
            )
            cells.append(
                f'<td class="{kind}"><span title="{tip}">{esc(mark(a))}→{esc(mark(b))}</span></td>'
            )
        body.append(
            f'<tr><th class="case" scope="row" title="{esc(case)}">{esc(case)}</th>'
            f"{''.join(cells)}</tr>"
        )
    head = "".join(model_header(model, "") for model in models)
    return (
        '<div class="grid-wrap"><table class="grid changes"><thead>'
        f'<tr><th class="corner" scope="col">case \\ model</th>{head}</tr>'
        f"</thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def comparison_table(result: Mapping[str, Any]) -> str:
    usage = "cost_usd_diff" in result["overall"]
    names = ["model", "A passed", "A adjusted (95% CI)", "B passed", "B adjusted (95% CI)"]
    names += ["Δ adjusted", "changed jobs"]
    names += ["A cost", "B cost", "Δ cost"] if usage else []
    head = "".join(f"<th>{esc(name)}</th>" for name in names)

    def side_rate(stats: Mapping[str, Any] | None) -> str:
        if stats is None:
            return "absent"
        if stats["adjusted_pass_rate"] is None:
            return "—"
        return f"{percent(stats['adjusted_pass_rate'])} ({rate_text(stats)})"

    def cells(label: str, row: Mapping[str, Any], tag: str = "td") -> str:
        diff = row["adjusted_pass_rate_diff"]
        css = "better" if diff and diff > 0 else "worse" if diff and diff < 0 else ""
        values = [
            esc(judged_cell(row["a"])),
            side_rate(row["a"]),
            esc(judged_cell(row["b"])),
            side_rate(row["b"]),
            f'<span class="{css}">{esc(diff_cell(diff))}</span>',
            str(row["changed"]),
        ]
        if usage:
            values += [
                esc(cost_text(row["a"]["cost_usd"]) if row["a"] else "absent"),
                esc(cost_text(row["b"]["cost_usd"]) if row["b"] else "absent"),
                esc(cost_text(row["cost_usd_diff"], signed=True)),
            ]
        return (
            f'<tr><{tag} class="name">{label}</{tag}>'
            + "".join(f'<{tag} class="num">{v}</{tag}>' for v in values)
            + "</tr>"
        )

    body = "".join(cells(breakable(row["model"]), row) for row in result["models"])
    return (
        f'<table class="spend"><thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
        f"<tfoot>{cells('all jobs', result['overall'], 'th')}</tfoot></table>"
    )


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
    headers = "".join(
        batch_header(summary, overall[side], batch_span(side_runs, summary), f"{side.upper()}: ")
        for side, summary, side_runs in (("a", summary_a, runs[0]), ("b", summary_b, runs[1]))
    )
    diff = overall["adjusted_pass_rate_diff"]
    cost = (
        f" · cost B - A {esc(cost_text(overall['cost_usd_diff'], signed=True))}"
        if "cost_usd_diff" in overall
        else ""
    )
    verdict = (
        f'<p class="headline"><span class="label">B - A</span> <b>{esc(diff_cell(diff))}</b>'
        f" adjusted pass rate · {overall['changed']} jobs changed status{cost}</p>"
    )
    kinds = [change_kind(c["a"], c["b"]) for c in result["changed"]]
    counts = ", ".join(f"{kinds.count(k)} {k}" for k in ("better", "worse", "changed"))
    title = " vs ".join(
        str(summary.get("batch_id") or path.name)
        for summary, path in zip(summaries, batch_dirs, strict=True)
    )
    sections = f"""<section><h2>Adjusted pass rate by model, A and B</h2>
<p class="note">Upper bar A, lower bar B, each with its Wilson 95% interval; beside them
B - A in percentage points.</p>
{paired_rate_bars_svg(result["models"])}</section>
<section><h2>Rates, spend and differences</h2>{comparison_table(result)}</section>
<section><h2>Changed cells</h2>
<p class="note">{esc(counts)}. A cell shows A's mark → B's (∅: no such job), on green when B
passes what A did not, on red when B no longer passes. Hover for both statuses and reasons.</p>
{legend(CHANGE_LOOK)}{grid_legend(looks)}
{changed_grid(rows_a, rows_b, result["changed"], looks)}</section>"""
    footer = f"batch-ledger report: A = {esc(batch_dirs[0])}, B = {esc(batch_dirs[1])}"
    return page(
        title,
        f'<h1>{esc(title)}</h1>{verdict}<div class="sides">{headers}</div>',
        sections,
        footer,
        category_style(looks),
    )


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
