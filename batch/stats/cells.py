"""The cells and sections ``batch stats`` shows: one table of text cells per model, case
or comparison, the same for every format that draws tables (``batch.stats.render``
renders them; the HTML report reuses the cells).
"""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from batch.stats.intervals import METHOD_TEXT
from batch.stats.rates import GROUPINGS
from batch.stats.stopped import stop_notes
from batch.stats.usage import cost_text, tokens_text

DASH = "—"
UNFINISHED = ("skipped", "pending", "running")


@attrs.frozen
class Section:
    """One table of text cells, rendered alike by rich and by Markdown."""

    headers: list[str]
    rows: list[list[str]]
    #: One entry per line: a name in a title may hold a line break, which is escaped, never
    #: taken as the end of a title line.
    title: list[str] = attrs.Factory(list)
    notes: list[str] = attrs.Factory(list)
    #: Rows from this index on are totals (rich draws a line above them).
    footer_from: int | None = None
    #: Column indexes holding numbers (right-aligned).
    numeric: frozenset[int] = frozenset()
    #: Column indexes that may wrap onto more lines when the terminal is narrow (names,
    #: reasons); every other column keeps each cell on one line.
    wrap: frozenset[int] = frozenset()
    #: Headers of the columns a narrow terminal may do without, the first left out first.
    optional: tuple[str, ...] = ()
    #: The header of an optional column that, rather than being left out, moves below the
    #: table as one line per row (``name: cell``).
    detach: str | None = None
    #: Lines printed after the table: a detached column.
    after: list[str] = attrs.Factory(list)


# -- cell formatting ---------------------------------------------------------------------


def percent(value: float | None) -> str:
    return DASH if value is None else f"{value * 100:.1f}%"


def rate_cell(stats: Mapping[str, Any], name: str) -> str:
    """``66.7% (35.4-87.9)``: a rate and its Wilson 95% interval, or "—" when undefined."""
    if stats[name] is None:
        return DASH
    low, high = stats[f"{name}_low"] * 100, stats[f"{name}_high"] * 100
    return f"{percent(stats[name])} ({low:.1f}-{high:.1f})"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return DASH
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def categories_cell(categories: Mapping[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in categories.items()) or DASH


def diff_cell(diff: float | None) -> str:
    if diff is None:
        return DASH
    sign = "+" if diff > 0 else "-" if diff < 0 else ""
    return f"{sign}{abs(diff) * 100:.1f} pp"


def signed_cell(figure: Mapping[str, Any] | None, *, rate: bool = True) -> str:
    """``-20.0 pp (-41.3 to 1.3)``: a paired difference B - A."""
    if not figure:
        return DASH
    scale, unit, digits = (100, " pp", 1) if rate else (1, "", 3)

    def signed(value: float) -> str:
        # + 0.0: a mean of zero differences may be -0.0, which is no difference at all.
        return f"{round(value * scale, digits) + 0.0:+.{digits}f}"

    value, low, high = figure["estimate"], figure["low"], figure["high"]
    text = signed(value) + unit
    if low is None or high is None:
        return text
    return f"{text} ({signed(low)} to {signed(high)})"


def unfinished(stats: Mapping[str, Any]) -> int:
    return sum(stats[status] for status in UNFINISHED)


def judged_cell(stats: Mapping[str, Any] | None) -> str:
    """``6/9``: passed out of the jobs the adjusted rate counts (passed + failed)."""
    if stats is None:
        return DASH
    return f"{stats['passed']}/{stats['passed'] + stats['failed']}"


def batch_line(identity: Mapping[str, Any]) -> str:
    return f"{identity['batch_id'] or '(no batch id)'} ({identity['state'] or 'unknown state'})"


def methods_note(figures: Sequence[tuple[str, Iterable[str | None]]]) -> str:
    """``95% intervals (docs/stats.md) — rates: Wilson score interval.``: the methods each
    figure of a table carries (their ``method`` in JSON), each named once, in order."""
    parts = []
    for label, methods in figures:
        named = [METHOD_TEXT.get(m, m) for m in dict.fromkeys(m for m in methods if m)]
        if named:
            parts.append(f"{label}: {'; '.join(named)}")
    return "95% intervals (docs/stats.md) — " + (". ".join(parts) or "none") + "."


def rate_methods(rows: Iterable[Mapping[str, Any] | None]) -> list[str | None]:
    """The methods of the pass rates' intervals of ``rows`` (``batch_stats``'s groups)."""
    return [
        row.get(f"{name}_method")
        for row in rows
        if row
        for name in ("pass_rate", "adjusted_pass_rate")
    ]


# -- sections ----------------------------------------------------------------------------

#: The table columns of spend, shown only when some job reported usage.
USAGE_HEADERS = ("Tokens", "Cost", "Cost/pass")


def has_usage(stats: Mapping[str, Any] | None) -> bool:
    """Whether ``batch.stats.rates`` added spend keys (some job reported usage)."""
    return bool(stats) and "cost_usd" in stats  # type: ignore[operator]


def usage_cells(stats: Mapping[str, Any]) -> list[str]:
    return [
        tokens_text(stats["tokens"]),
        cost_text(stats["cost_usd"]),
        cost_text(stats["cost_per_passed_case"]),
    ]


def usage_note(overall: Mapping[str, Any]) -> str:
    return (
        f"Spend as jobs reported it ({overall['jobs_with_usage']} of {overall['jobs']} jobs "
        f"reported usage); batch total {cost_text(overall['cost_usd'])}. "
        "Cost/pass = cost / passed jobs, failures' spend included."
    )


def stats_sections(result: Mapping[str, Any]) -> list[Section]:
    """The cells of one batch's statistics: one row per group, then "all jobs"; per case,
    a second table of the jobs that did not pass and why."""
    by = result["by"]
    groups = result[GROUPINGS[by]]
    rows_stats = [*groups, result["overall"]]
    show_unfinished = any(unfinished(stats) for stats in rows_stats)
    show_usage = has_usage(result["overall"])
    headers = [by.capitalize(), "Jobs", "Passed", "Failed", "Error"]
    headers += ["Not run"] if show_unfinished else []
    headers += ["Pass rate (95% CI)", "Adjusted (95% CI)", "Mean", "Median"]
    headers += list(USAGE_HEADERS) if show_usage else []
    headers += ["Failures"]
    rows = []
    for label, stats in [(row[by], row) for row in groups] + [("all jobs", result["overall"])]:
        cells = [label, *(str(stats[key]) for key in ("jobs", "passed", "failed", "error"))]
        cells += [str(unfinished(stats))] if show_unfinished else []
        cells += [
            rate_cell(stats, "pass_rate"),
            rate_cell(stats, "adjusted_pass_rate"),
            duration(stats["mean_duration_seconds"]),
            duration(stats["median_duration_seconds"]),
        ]
        cells += usage_cells(stats) if show_usage else []
        cells.append(categories_cell(stats["failure_categories"]))
        rows.append(cells)
    notes = []
    if show_unfinished:
        notes.append(
            f"{_jobs(unfinished(result['overall']))} not run yet (pending, running or skipped): "
            "counted as jobs, left out of every rate."
        )
    notes += retried_pass_notes(groups, by)
    notes.append("Adjusted = passed / (passed + failed): error (non-model failures) left out.")
    notes.append(methods_note([("rates", rate_methods(rows_stats))]))
    if show_usage:
        notes.append(usage_note(result["overall"]))
    notes.extend(result.get("warnings", ()))
    notes += stop_notes(result, groups)
    sections = [
        Section(
            headers,
            rows,
            title=[f"{batch_line(result)} — {result['batch_dir']}"],
            notes=notes,
            footer_from=len(groups),
            numeric=frozenset(range(1, len(headers) - 1)),
            wrap=frozenset({0}),
            optional=(
                "Median",
                "Mean",
                "Jobs",
                "Failures",
                "Pass rate (95% CI)",
                "Tokens",
                "Cost/pass",
                "Not run",
            ),
            # Per case, the reasons table below already names every failure.
            detach="Failures" if by == "model" else None,
        )
    ]
    if by == "case":
        sections.append(reasons_section(groups))
    return sections


def status_text(job: Mapping[str, Any]) -> str:
    category = job.get("failure_category")
    return f"{job['status']} ({category})" if category else job["status"]


def reasons_section(groups: Sequence[Mapping[str, Any]]) -> Section:
    """Per case, each job that did not pass: its model, status and ``reason``."""
    rows = [
        [group["case"], job["model"], status_text(job), job["reason"] or DASH]
        for group in groups
        for job in group["not_passed"]
    ]
    return Section(
        ["Case", "Model", "Status", "Reason"],
        rows,
        title=[f"Jobs that did not pass: {len(rows)}"],
        wrap=frozenset({0, 1, 3}),
    )


def compare_sections(result: Mapping[str, Any]) -> list[Section]:
    """The cells of a comparison: per group side by side, then the jobs whose status changed."""
    by = result["by"]
    groups = result[GROUPINGS[by]]
    show_usage = "cost_usd_diff" in result["overall"]
    headers = [
        by.capitalize(),
        "A passed",
        "A adjusted (95% CI)",
        "B passed",
        "B adjusted (95% CI)",
        "Δ adjusted",
        "B - A paired (95% CI)",
        "Changed",
    ]
    headers += ["A cost", "B cost", "Δ cost"] if show_usage else []
    rows = []
    for label, row in [(row[by], row) for row in groups] + [("all jobs", result["overall"])]:
        cells = [
            label,
            judged_cell(row["a"]),
            rate_cell(row["a"], "adjusted_pass_rate") if row["a"] else "absent",
            judged_cell(row["b"]),
            rate_cell(row["b"], "adjusted_pass_rate") if row["b"] else "absent",
            diff_cell(row["adjusted_pass_rate_diff"]),
            signed_cell((row.get("paired") or {}).get("pass_rate_diff")),
            str(row["changed"]),
        ]
        if show_usage:
            cells += [
                cost_text(row["a"]["cost_usd"]) if row["a"] else "absent",
                cost_text(row["b"]["cost_usd"]) if row["b"] else "absent",
                cost_text(row["cost_usd_diff"], signed=True),
            ]
        rows.append(cells)
    title = [
        f"A: {batch_line(result['a'])} — {result['a']['batch_dir']}",
        f"B: {batch_line(result['b'])} — {result['b']['batch_dir']}",
    ]
    notes = [
        "passed = passed/(passed + failed); Δ adjusted = B - A in percentage points; paired: "
        "B - A over the cases both batches have (the mean of the per-case differences).",
        methods_note(
            [
                (
                    "rates",
                    rate_methods(
                        [row[side] for row in [*groups, result["overall"]] for side in "ab"]
                    ),
                ),
                (
                    "paired",
                    [
                        ((row.get("paired") or {}).get("pass_rate_diff") or {}).get("method")
                        for row in groups
                    ],
                ),
            ]
        ),
    ]
    if show_usage:
        notes.append("Cost as jobs reported it; Δ cost = B - A, — where a side reported none.")
    sections = [
        Section(
            headers,
            rows,
            title=title,
            notes=notes,
            footer_from=len(groups),
            numeric=frozenset(range(1, len(headers))),
            wrap=frozenset({0}),
            optional=(
                "A cost",
                "B cost",
                "Changed",
                "A passed",
                "B passed",
                "B - A paired (95% CI)",
            ),
        )
    ]
    # With repeats a (case, model) is several jobs: the repeat tells them apart.
    repeats = any("repeat" in change for change in result["changed"])
    changes = [
        [
            change["case"],
            change["model"],
            *([str(change.get("repeat", 1))] if repeats else []),
            change["a"] or "absent",
            change["b"] or "absent",
        ]
        for change in result["changed"]
    ]
    sections.append(
        Section(
            ["Case", "Model", *(["Repeat"] if repeats else []), "A", "B"],
            changes,
            title=[f"Jobs whose status changed: {len(changes)}"],
            numeric=frozenset({2}) if repeats else frozenset(),
            wrap=frozenset({0, 1}),
        )
    )
    return sections


def _jobs(count: int) -> str:
    return f"{count} job" if count == 1 else f"{count} jobs"


def retried_pass_notes(groups: Sequence[Mapping[str, Any]], by: str) -> list[str]:
    """One line per group some of whose passes took more than one attempt: "12 passed, 12
    after a retry (12 more attempts)"; a rate alone does not show what it cost."""
    notes = []
    for stats in groups:
        retried = stats.get("passed_after_retry") or 0
        if retried:
            extra = stats.get("retried_pass_extra_attempts") or 0
            more = "attempt" if extra == 1 else "attempts"
            notes.append(
                f"{stats[by]}: {stats['passed']} passed, {retried} after a retry "
                f"({extra} more {more})."
            )
    return notes
