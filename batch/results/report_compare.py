"""``batch report A B``: two batches side by side in one self-contained HTML file — both
headers, paired rate bars with the difference, a table of rates, spend and differences per
model, and a grid of the cells whose status changed. Built from the single-batch page's
parts (``batch.results.report``) and the charts (``batch.results.report_charts``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from batch.results.invocations import Invocation, batch_span
from batch.results.report import batch_header, page
from batch.results.report_charts import esc, paired_rate_bars_svg, rate_text
from batch.results.report_grid import (
    STATUS_LOOK,
    breakable,
    category_looks,
    category_style,
    grid_legend,
    job_category,
    legend,
    model_header,
    tooltip_attr,
)
from batch.results.report_methods import compare_methods_lines, methods_section
from batch.results.report_repeats import compare_pairs_table
from batch.results.report_samples import changed_cell, samples_by_pair
from batch.results.sample_stats import has_repeats
from batch.results.stats import compare_stats, row_reason
from batch.results.stats_cells import diff_cell, judged_cell, percent
from batch.results.summary import SummaryRow
from batch.results.summary_read import summary_rows
from batch.results.usage_stats import cost_text

#: How the changed cells read when a batch has repeats (``report_repeats.changed_cell``).
REPEATS_CHANGED_NOTE = """<p class="note">With repeats a cell is A's c/n → B's (passes /
samples with a model outcome), green when B's share is higher, red when lower; hover for the
repeats that changed.</p>"""

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
    longer passes, grey otherwise; with repeats A's c/n → B's
    (``batch.results.report_repeats.changed_cell``)."""
    if not changed:
        return '<p class="muted">No job changed its status.</p>'
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

    body = []
    for case in cases:
        cells = []
        for model in models:
            if (case, model) not in pairs:
                cells.append('<td class="same"></td>')
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
    shown_statuses = {c[side] for c in result["changed"] for side in ("a", "b")}
    counts = ", ".join(f"{kinds.count(k)} {k}" for k in ("better", "worse", "changed"))
    title = " vs ".join(
        str(summary.get("batch_id") or path.name)
        for summary, path in zip(summaries, batch_dirs, strict=True)
    )
    repeated = has_repeats(rows_a) or has_repeats(rows_b)
    repeats_note = REPEATS_CHANGED_NOTE if repeated else ""
    sections = f"""<section><h2>Adjusted pass rate by model, A and B</h2>
<p class="note">Upper bar A, lower bar B, each with its 95% interval (named under Methods);
beside them B - A in percentage points.</p>
{paired_rate_bars_svg(result["models"])}</section>
<section><h2>Rates, spend and differences</h2>{comparison_table(result)}</section>
<section><h2>Paired difference by model</h2>
<p class="note">The same model on the cases both batches have a model outcome for: the mean of
the per-case differences B &minus; A of the share of samples that passed, with its paired 95%
interval (green or red only when it leaves out 0); McNemar's exact p when every shared case
has one sample a side (on the cases only one batch passed), with its Holm adjustment for the
number of models; the score's paired difference when the jobs report scores. Unlike Δ adjusted
above, it leaves out the cases only one batch has.</p>
{compare_pairs_table(result)}</section>
<section><h2>Changed cells</h2>
<p class="note">{esc(counts)}. A cell shows A's mark → B's (∅: no such job), on green when B
passes what A did not, on red when B no longer passes. Hover for both statuses and reasons.</p>
{repeats_note}{legend(CHANGE_LOOK)}{grid_legend(looks, present=shown_statuses)}
{changed_grid(rows_a, rows_b, result["changed"], looks)}</section>
{methods_section(compare_methods_lines(result), tests=_has_tests(result))}"""
    footer = f"batch-ledger report: A = {esc(batch_dirs[0])}, B = {esc(batch_dirs[1])}"
    return page(
        title,
        f'<h1>{esc(title)}</h1>{verdict}<div class="sides">{headers}</div>',
        sections,
        footer,
        category_style(looks),
    )


def _has_tests(result: Mapping[str, Any]) -> bool:
    return any((row.get("paired") or {}).get("mcnemar") for row in result["models"])
