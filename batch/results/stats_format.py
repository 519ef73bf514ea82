"""``batch stats``: read one or two summaries and print their statistics as a table, JSON,
CSV or Markdown.

The numbers come from ``batch.results.stats``; this module only reads the summaries and renders.
Table and Markdown show the same cells (percentages,
"—" where a rate is undefined); JSON is ``batch.results.stats``'s document as is; CSV is one row
per model (or case) with flat columns and no overall row, for spreadsheets and pandas.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import attrs

from batch.printable import json_text, one_line
from batch.results.stats import GROUPINGS

FORMATS = ("table", "json", "csv", "markdown")
DASH = "—"
#: Columns of a per-group row in CSV, in order; failure categories follow as
#: ``failure_categories.<name>`` columns, one per category present, sorted by name.
CSV_KEYS = (
    "jobs",
    "passed",
    "failed",
    "error",
    "skipped",
    "pending",
    "running",
    "pass_rate",
    "pass_rate_low",
    "pass_rate_high",
    "adjusted_pass_rate",
    "adjusted_pass_rate_low",
    "adjusted_pass_rate_high",
    "mean_duration_seconds",
    "median_duration_seconds",
)
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


def unfinished(stats: Mapping[str, Any]) -> int:
    return sum(stats[status] for status in UNFINISHED)


def judged_cell(stats: Mapping[str, Any] | None) -> str:
    """``6/9``: passed out of the jobs the adjusted rate counts (passed + failed)."""
    if stats is None:
        return DASH
    return f"{stats['passed']}/{stats['passed'] + stats['failed']}"


def batch_line(identity: Mapping[str, Any]) -> str:
    return f"{identity['batch_id'] or '(no batch id)'} ({identity['state'] or 'unknown state'})"


# -- sections ----------------------------------------------------------------------------


def stats_sections(result: Mapping[str, Any]) -> list[Section]:
    """The cells of one batch's statistics: one row per group, then "all jobs"."""
    by = result["by"]
    groups = result[GROUPINGS[by]]
    rows_stats = [*groups, result["overall"]]
    show_unfinished = any(unfinished(stats) for stats in rows_stats)
    headers = [by.capitalize(), "Jobs", "Passed", "Failed", "Error"]
    headers += ["Not run"] if show_unfinished else []
    headers += ["Pass rate (95% CI)", "Adjusted (95% CI)", "Mean", "Median", "Failures"]
    rows = []
    for label, stats in [(row[by], row) for row in groups] + [("all jobs", result["overall"])]:
        cells = [label, *(str(stats[key]) for key in ("jobs", "passed", "failed", "error"))]
        cells += [str(unfinished(stats))] if show_unfinished else []
        cells += [
            rate_cell(stats, "pass_rate"),
            rate_cell(stats, "adjusted_pass_rate"),
            duration(stats["mean_duration_seconds"]),
            duration(stats["median_duration_seconds"]),
            categories_cell(stats["failure_categories"]),
        ]
        rows.append(cells)
    notes = []
    if show_unfinished:
        notes.append(
            f"{unfinished(result['overall'])} jobs not run yet (pending, running or skipped): "
            "counted as jobs, left out of every rate."
        )
    notes.append("Adjusted = passed / (passed + failed): error (non-model failures) left out.")
    return [
        Section(
            headers,
            rows,
            title=[f"{batch_line(result)} — {result['batch_dir']}"],
            notes=notes,
            footer_from=len(groups),
            numeric=frozenset(range(1, len(headers) - 1)),
        )
    ]


def compare_sections(result: Mapping[str, Any]) -> list[Section]:
    """The cells of a comparison: per group side by side, then the jobs whose status changed."""
    by = result["by"]
    groups = result[GROUPINGS[by]]
    headers = [
        by.capitalize(),
        "A passed",
        "A adjusted (95% CI)",
        "B passed",
        "B adjusted (95% CI)",
        "Δ adjusted",
        "Changed",
    ]
    rows = []
    for label, row in [(row[by], row) for row in groups] + [("all jobs", result["overall"])]:
        rows.append(
            [
                label,
                judged_cell(row["a"]),
                rate_cell(row["a"], "adjusted_pass_rate") if row["a"] else "absent",
                judged_cell(row["b"]),
                rate_cell(row["b"], "adjusted_pass_rate") if row["b"] else "absent",
                diff_cell(row["adjusted_pass_rate_diff"]),
                str(row["changed"]),
            ]
        )
    title = [
        f"A: {batch_line(result['a'])} — {result['a']['batch_dir']}",
        f"B: {batch_line(result['b'])} — {result['b']['batch_dir']}",
    ]
    notes = ["passed = passed/(passed + failed); Δ adjusted = B - A in percentage points."]
    sections = [
        Section(
            headers,
            rows,
            title=title,
            notes=notes,
            footer_from=len(groups),
            numeric=frozenset(range(1, len(headers))),
        )
    ]
    changes = [
        [change["case"], change["model"], change["a"] or "absent", change["b"] or "absent"]
        for change in result["changed"]
    ]
    sections.append(
        Section(
            ["Case", "Model", "A", "B"],
            changes,
            title=[f"Jobs whose status changed: {len(changes)}"],
        )
    )
    return sections


def sections_for(result: Mapping[str, Any]) -> list[Section]:
    return compare_sections(result) if "changed" in result else stats_sections(result)


# -- renderers ---------------------------------------------------------------------------


def render_table(result: Mapping[str, Any], out: TextIO) -> None:
    # rich costs ~0.1 s to import; only the table format pays for it.
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    is_tty = hasattr(out, "isatty") and out.isatty()
    # Piped output has no width: render wide enough that a row stays on one line, then
    # drop the padding rich adds up to that width.
    console = Console(
        file=out if is_tty else io.StringIO(), width=None if is_tty else 250, highlight=False
    )
    for section in sections_for(result):
        table = Table(
            title=Text("\n".join(map(one_line, section.title))),
            title_justify="left",
            box=box.SIMPLE_HEAD,
            caption=Text("\n".join(map(one_line, section.notes))) if section.notes else None,
            caption_justify="left",
        )
        for index, header in enumerate(section.headers):
            table.add_column(
                one_line(header), justify="right" if index in section.numeric else "left"
            )
        for index, cells in enumerate(section.rows):
            # Text(), not str: a model named "[bold]x" must print as itself, not as markup;
            # one_line: a newline or ESC in it must not start a row or move the cursor.
            table.add_row(
                *(Text(one_line(cell)) for cell in cells),
                end_section=index + 1 == section.footer_from,
            )
        console.print(table)
    if not is_tty:
        text = console.file.getvalue()  # type: ignore[attr-defined]
        out.write("".join(line.rstrip() + "\n" for line in text.splitlines()))


def render_json(result: Mapping[str, Any], out: TextIO) -> None:
    out.write(json_text(result) + "\n")


def _csv_value(value: Any) -> Any:
    return "" if value is None else value


def _side_columns(prefix: str, stats: Mapping[str, Any] | None, categories: list[str]) -> dict:
    if stats is None:
        return {}
    row = {f"{prefix}{key}": _csv_value(stats[key]) for key in CSV_KEYS}
    row.update(
        {
            f"{prefix}failure_categories.{name}": stats["failure_categories"].get(name, 0)
            for name in categories
        }
    )
    return row


def _category_names(sides: Sequence[Mapping[str, Any] | None]) -> list[str]:
    return sorted({name for side in sides if side for name in side["failure_categories"]})


def render_csv(result: Mapping[str, Any], out: TextIO) -> None:
    by = result["by"]
    groups = result[GROUPINGS[by]]
    if "changed" in result:
        categories = _category_names([row[side] for row in groups for side in ("a", "b")])
        columns = [by]
        for side in ("a", "b"):
            columns += [f"{side}.{key}" for key in CSV_KEYS]
            columns += [f"{side}.failure_categories.{name}" for name in categories]
        columns += ["adjusted_pass_rate_diff", "changed"]
        rows = [
            {
                by: row[by],
                **_side_columns("a.", row["a"], categories),
                **_side_columns("b.", row["b"], categories),
                "adjusted_pass_rate_diff": _csv_value(row["adjusted_pass_rate_diff"]),
                "changed": row["changed"],
            }
            for row in groups
        ]
    else:
        categories = _category_names(groups)
        columns = [by, *CSV_KEYS, *(f"failure_categories.{name}" for name in categories)]
        rows = [{by: row[by], **_side_columns("", row, categories)} for row in groups]
    writer = csv.DictWriter(out, fieldnames=columns, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)


_MARKDOWN_SPECIAL = str.maketrans({char: "\\" + char for char in "\\`*_[]<>|~#"})


def markdown_escape(text: str) -> str:
    """Text that shows as itself in a Markdown table cell (a name may hold ``|``, ``<`` or a
    line break)."""
    return one_line(text).translate(_MARKDOWN_SPECIAL)


def render_markdown(result: Mapping[str, Any], out: TextIO) -> None:
    blocks = []
    for section in sections_for(result):
        lines = [markdown_escape(line) + "  " for line in section.title]
        lines[-1] = lines[-1].rstrip()
        lines.append("")
        lines.append("| " + " | ".join(map(markdown_escape, section.headers)) + " |")
        lines.append(
            "|"
            + "|".join(
                "---:" if i in section.numeric else "---" for i in range(len(section.headers))
            )
            + "|"
        )
        for index, cells in enumerate(section.rows):
            escaped = [markdown_escape(cell) for cell in cells]
            if index == section.footer_from:
                escaped[0] = f"**{escaped[0]}**"
            lines.append("| " + " | ".join(escaped) + " |")
        if section.notes:
            lines.append("")
            lines.extend(markdown_escape(note) for note in section.notes)
        blocks.append("\n".join(lines))
    out.write("\n\n".join(blocks) + "\n")


RENDERERS = {
    "table": render_table,
    "json": render_json,
    "csv": render_csv,
    "markdown": render_markdown,
}
