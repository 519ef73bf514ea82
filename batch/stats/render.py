"""``batch stats``: read one or two summaries and print their statistics as a table, JSON,
CSV or Markdown.

The numbers come from ``batch.stats.rates`` and the cells from ``batch.stats.cells``;
this module fits them to a terminal and renders. Table and Markdown show the same cells
(percentages, "—" where a rate is undefined); JSON is ``batch.stats.rates``'s document as
is; CSV is one row per model (or case) with flat columns and no overall row, for
spreadsheets and pandas.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

import attrs

from batch.printable import json_text, one_line
from batch.stats.cells import Section, has_usage, status_text
from batch.stats.rates import GROUPINGS
from batch.stats.sections import sections_for
from run_support.numbers import whole_number

FORMATS = ("table", "json", "csv", "markdown")
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
#: Spend columns of CSV, after CSV_KEYS, present only when some job reported usage.
USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "tokens",
    "requests",
    "cost_usd",
    "cost_per_passed_case",
    "jobs_with_usage",
)


# -- fitting a terminal ------------------------------------------------------------------

#: The narrowest a wrapping column (a name, a reason) is made before columns are left out.
MIN_WRAP = 24


def table_width(section: Section, cell_len: Callable[[str], int], *, folded: bool = False) -> int:
    """The terminal columns ``section`` needs, its wrapping columns (names, reasons) whole
    or, ``folded``, at most :data:`MIN_WRAP` wide: rich's ``SIMPLE_HEAD`` table pads each
    column by one on both sides and draws a blank edge or divider around and between them."""
    total = len(section.headers) + 1
    for index in range(len(section.headers)):
        natural = natural_width(section, index, cell_len)
        total += 2 + (min(natural, MIN_WRAP) if folded and index in section.wrap else natural)
    return total


def natural_width(section: Section, index: int, cell_len: Callable[[str], int]) -> int:
    """The width column ``index`` needs for its header and every cell on one line."""
    cells = [section.headers[index]] + [row[index] for row in section.rows]
    return max(cell_len(one_line(cell)) for cell in cells)


def without_column(section: Section, header: str) -> Section:
    """``section`` without the column ``header``; the detachable one moves below the table."""
    index = section.headers.index(header)
    after = section.after
    if header == section.detach:
        after = [f"{header}:"] + [
            f"  {one_line(row[0])}: {one_line(row[index])}" for row in section.rows
        ]
    return attrs.evolve(
        section,
        headers=[h for i, h in enumerate(section.headers) if i != index],
        rows=[[c for i, c in enumerate(row) if i != index] for row in section.rows],
        numeric=frozenset(i - (i > index) for i in section.numeric if i != index),
        wrap=frozenset(i - (i > index) for i in section.wrap if i != index),
        after=after,
    )


def fit(section: Section, width: int, cell_len: Callable[[str], int] = len) -> Section:
    """``section`` narrow enough for ``width`` terminal columns: the fewest of its optional
    columns left out, in order (the detachable one moved below), with a note naming them.

    First with every name whole; only when even the narrowest layout is too wide do names
    and reasons wrap (never cut) at :data:`MIN_WRAP`. Every other cell stays on one line, so
    a rate's interval or a model's failures are never split or cut.
    """
    candidates = [section]
    for header in section.optional:
        if header in candidates[-1].headers:
            candidates.append(without_column(candidates[-1], header))
    chosen = next(
        (c for c in candidates if table_width(c, cell_len) <= width),
        next(
            (c for c in candidates if table_width(c, cell_len, folded=True) <= width),
            candidates[-1],
        ),
    )
    left_out = [h for h in section.headers if h not in chosen.headers and h != section.detach]
    if not left_out:
        return chosen
    note = (
        f"Left out to fit {width} columns: {', '.join(left_out)} "
        "(batch stats --wide shows every column)."
    )
    return attrs.evolve(chosen, notes=[*chosen.notes, note])


# -- renderers ---------------------------------------------------------------------------


#: The width piped output is rendered at when nothing sets one: wide enough that every row
#: stays on one line.
UNLIMITED = 10_000


def is_styled(out: TextIO, environ: Mapping[str, str]) -> bool:
    """Whether ``out`` is a terminal that shows bold text (rich treats a dumb one as 80
    columns wide, whatever it is: such a terminal gets plain text at its own width)."""
    is_tty = hasattr(out, "isatty") and out.isatty()
    return is_tty and environ.get("TERM", "") not in ("dumb", "unknown")


def output_width(out: TextIO, environ: Mapping[str, str]) -> int | None:
    """The columns ``out`` has: the terminal's, else ``COLUMNS`` when set (a pipe into a
    pager, a test); ``None`` when neither says (a pipe: no limit)."""
    if hasattr(out, "isatty") and out.isatty():
        try:
            return os.get_terminal_size(out.fileno()).columns
        except (OSError, ValueError, io.UnsupportedOperation):
            pass
    columns = whole_number(environ.get("COLUMNS", ""))
    return columns or None


def render_table(
    result: Mapping[str, Any], out: TextIO, *, width: int | None = None, styled: bool = False
) -> None:
    """The sections as rich tables fitted to ``width`` columns (:func:`fit`); every column
    when ``width`` is ``None``. ``styled``: bold headers, for a terminal that shows them."""
    # rich is slow to import; only the table format pays for it.
    from rich import box
    from rich.cells import cell_len
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    # Into a buffer, to drop rich's trailing padding.
    console = Console(
        file=io.StringIO(),
        width=width or UNLIMITED,
        highlight=False,
        force_terminal=styled,
        no_color=not styled,
    )
    for section in sections_for(result):
        render_width = width or UNLIMITED
        if width is not None:
            section = fit(section, width, cell_len)
            # Narrower than the narrowest layout: wider lines, rather than names squeezed
            # out of sight.
            render_width = max(width, table_width(section, cell_len, folded=True))
        table = Table(
            title=Text("\n".join(map(one_line, section.title))),
            title_justify="left",
            box=box.SIMPLE_HEAD,
            caption=Text("\n".join(map(one_line, section.notes))) if section.notes else None,
            caption_justify="left",
        )
        for index, header in enumerate(section.headers):
            # fold, never "…": a cell too long for its column goes on, not out.
            table.add_column(
                one_line(header),
                justify="right" if index in section.numeric else "left",
                no_wrap=index not in section.wrap,
                # A wrapping column keeps some room when rich squeezes the table.
                min_width=min(MIN_WRAP, natural_width(section, index, cell_len))
                if index in section.wrap
                else None,
                overflow="fold",
            )
        for index, cells in enumerate(section.rows):
            # Text(), not str: a model named "[bold]x" must print as itself, not as markup;
            # one_line: a newline or ESC in it must not start a row or move the cursor.
            table.add_row(
                *(Text(one_line(cell)) for cell in cells),
                end_section=index + 1 == section.footer_from,
            )
        console.width = render_width
        console.print(table)
        for line in section.after:
            console.print(Text(line))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    # Rich pads every line to the table's width; trailing spaces are noise in a pipe.
    out.write("".join(line.rstrip() + "\n" for line in text.splitlines()))


def render_json(result: Mapping[str, Any], out: TextIO) -> None:
    out.write(json_text(result) + "\n")


def _csv_value(value: Any) -> Any:
    return "" if value is None else value


def _keys(stats: Mapping[str, Any] | None) -> tuple[str, ...]:
    return CSV_KEYS + USAGE_KEYS if has_usage(stats) else CSV_KEYS


def _side_columns(
    prefix: str, stats: Mapping[str, Any] | None, categories: list[str], keys: Sequence[str]
) -> dict:
    if stats is None:
        return {}
    row = {f"{prefix}{key}": _csv_value(stats[key]) for key in keys}
    row.update(
        {
            f"{prefix}failure_categories.{name}": stats["failure_categories"].get(name, 0)
            for name in categories
        }
    )
    return row


def reasons_cell(group: Mapping[str, Any]) -> str:
    """``m1: error (infra_failure): timeout after 1m; m2: failed``: a case's jobs that did
    not pass, for one CSV field."""
    return "; ".join(
        f"{job['model']}: {status_text(job)}" + (f": {job['reason']}" if job["reason"] else "")
        for job in group["not_passed"]
    )


def _category_names(sides: Sequence[Mapping[str, Any] | None]) -> list[str]:
    return sorted({name for side in sides if side for name in side["failure_categories"]})


def render_csv(result: Mapping[str, Any], out: TextIO) -> None:
    by = result["by"]
    groups = result[GROUPINGS[by]]
    overall = result["overall"]
    if "changed" in result:
        categories = _category_names([row[side] for row in groups for side in ("a", "b")])
        usage = "cost_usd_diff" in overall
        keys: tuple[str, ...] = CSV_KEYS + USAGE_KEYS if usage else CSV_KEYS
        columns = [by]
        for side in ("a", "b"):
            columns += [f"{side}.{key}" for key in keys]
            columns += [f"{side}.failure_categories.{name}" for name in categories]
        columns += ["adjusted_pass_rate_diff", "changed"]
        columns += ["cost_usd_diff"] if usage else []
        rows = [
            {
                by: row[by],
                **_side_columns("a.", row["a"], categories, keys),
                **_side_columns("b.", row["b"], categories, keys),
                "adjusted_pass_rate_diff": _csv_value(row["adjusted_pass_rate_diff"]),
                "changed": row["changed"],
                **({"cost_usd_diff": _csv_value(row["cost_usd_diff"])} if usage else {}),
            }
            for row in groups
        ]
    else:
        categories = _category_names(groups)
        keys = _keys(overall)
        columns = [by, *keys, *(f"failure_categories.{name}" for name in categories)]
        columns += ["not_passed"] if by == "case" else []
        sampled = "pass_at_k" in overall
        if sampled:
            columns += repeats_columns(groups)
        rows = [
            {
                by: row[by],
                **_side_columns("", row, categories, keys),
                **({"not_passed": reasons_cell(row)} if by == "case" else {}),
                **(repeats_values(row) if sampled else {}),
            }
            for row in groups
        ]
    writer = csv.DictWriter(out, fieldnames=columns, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)


def repeats_columns(groups: Sequence[Mapping[str, Any]]) -> list[str]:
    """With repeats, after the other columns: the samples, then pass@k and pass^k for every
    k some group has (``pass_at_k.2``, ``pass_at_k.2_low``, ...), then flaky cases (a count)
    and the score."""
    top = max((group.get("k_max") or 0 for group in groups), default=0)
    columns = ["cases_sampled", "samples", "error_samples", "k_max"]
    for name in ("pass_at_k", "pass_hat_k"):
        for k in range(1, top + 1):
            columns += [f"{name}.{k}", f"{name}.{k}_low", f"{name}.{k}_high"]
    return [*columns, "flaky_cases", "score", "score_low", "score_high"]


def repeats_values(group: Mapping[str, Any]) -> dict[str, Any]:
    """One group's :func:`repeats_columns` (a k past the group's own ``k_max`` is empty)."""
    values: dict[str, Any] = {
        key: _csv_value(group.get(key))
        for key in ("cases_sampled", "samples", "error_samples", "k_max")
    }
    for name in ("pass_at_k", "pass_hat_k"):
        for k, figure in group[name].items():
            values[f"{name}.{k}"] = _csv_value(figure["estimate"])
            values[f"{name}.{k}_low"] = _csv_value(figure["low"])
            values[f"{name}.{k}_high"] = _csv_value(figure["high"])
    values["flaky_cases"] = len(group["flaky_cases"])
    score = group.get("score") or {}
    for key, field in (("score", "estimate"), ("score_low", "low"), ("score_high", "high")):
        values[key] = _csv_value(score.get(field))
    return values


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
