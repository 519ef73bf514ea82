"""The case-by-model grid of ``batch report``: each cell coloured by status, a failed or
error cell by its failure category with the category's own mark (so it reads without colour
too); hovering shows category, reason, duration and spend, clicking opens the run's
``output.log`` by a link relative to the report. A few lines of inline script
(:data:`SCRIPT`) sort and filter the grid; without script it is the whole grid in sweep
order. Every name is escaped (``esc``); the script reads only the page's ``data-``
attributes. ``batch.results.report_compare`` builds its grid from these parts too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from batch.layout import OUTPUT_LOG
from batch.results.report_charts import (
    esc,
    text_colour,
)
from batch.results.stats import (
    UNCATEGORIZED,
    group_stats,
    grouped,
    row_reason,
)
from batch.results.stats_cells import duration, judged_cell
from batch.results.summary import SummaryRow
from batch.results.usage_stats import cost_text, row_usage, tokens_text

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
    samples_cell: Callable[[Sequence[SummaryRow]], str] | None = None,
) -> str:
    """Cases down, models across; the last column and each model's header count passes.

    Each row carries what the inline script sorts and filters by: its sweep position
    (``data-i``), name (``data-c``), failed + error count (``data-f``), passes (``data-p``)
    and the categories in it (``data-k``); each cell its sort rank (``data-r``).
    ``samples_cell``: the cell of a (case, model)'s rows in a batch with repeats
    (``batch.results.report_repeats``); without it a cell shows the pair's (last) row.
    """
    kinds = {name: i for i, name in enumerate(looks)}
    marks = [mark for _, mark in looks.values()]
    by_pair: dict[tuple[str, str], list[SummaryRow]] = {}
    for job in jobs:
        by_pair.setdefault((job["case"], job["model"]), []).append(job)

    def cell(samples: Sequence[SummaryRow] | None) -> str:
        if samples and samples_cell is not None:
            return samples_cell(samples)
        return grid_cell(samples[-1] if samples else None, batch_dir, report_dir, kinds, marks)

    cases, models = grouped(jobs, "case"), grouped(jobs, "model")
    head = "".join(
        model_header(model, judged_cell(group_stats(rows))) for model, rows in models.items()
    )
    body = []
    for index, (case, rows) in enumerate(cases.items()):
        stats = group_stats(rows)
        row_kinds = sorted({kinds[c] for c in map(job_category, rows) if c is not None})
        cells = "".join(cell(by_pair.get((case, model))) for model in models)
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
    looks: Mapping[str, tuple[str, str]],
    counts: Mapping[str, int] | None = None,
    present: Collection[str] | None = None,
) -> str:
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
