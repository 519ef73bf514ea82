"""The plan's table as lines (batch/display/boxed.py): rich's look, at any length."""

from __future__ import annotations

import io
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from batch.display import boxed
from batch.display.boxed import MIN_FOLDED, boxed_columns, boxed_text, terminal_paint

HEADERS = ("case", "model", "decision", "reason")
ROWS = [
    ("add-large", "mock/oracle", "run", "new batch dir"),
    ("c2", "provider/model-1:latest", "carry", "recorded passed in m/c2-a1"),
    ("c3", "m", "retry", "recorded error (infra_failure)"),
]
STYLES = ["run", "carry", "retry"]


def boxed_lines(*args: Any, **kwargs: Any) -> list[str]:
    text = "".join(boxed_text(*args, **kwargs))
    assert text.endswith("\n")
    return text.splitlines()


def rich_lines(rows: list[tuple[str, ...]]) -> list[str]:
    """What ``batch plan`` printed with rich's Table, piped (no width limit, no styles)."""
    out = io.StringIO()
    console = Console(file=out, highlight=False, soft_wrap=False, width=100_000)
    table = Table(*HEADERS[:3], title="batch plan")
    table.add_column(HEADERS[3], overflow="fold")
    for cells in rows:
        table.add_row(*(Text(cell) for cell in cells))
    console.print(table)
    return [line.rstrip() for line in out.getvalue().splitlines()]


def test_piped_the_table_is_the_one_rich_printed() -> None:
    assert list(boxed_lines("batch plan", HEADERS, ROWS)) == rich_lines(ROWS)


def test_rows_formatted_a_slice_at_a_time_are_the_ones_rich_printed(monkeypatch) -> None:
    # Slices of 3 rows and a shorter last one; cells that a format string would read as
    # directives must come out as written.
    monkeypatch.setattr(boxed, "ROWS_AT_ONCE", 3)
    rows = [*ROWS, ("%s", "%%", "run", "{0} {}"), ("c%d", "m", "carry", "100% of %(x)s"), *ROWS]
    assert boxed_lines("batch plan", HEADERS, rows) == rich_lines(rows)


def test_wide_characters_are_measured_in_terminal_cells() -> None:
    rows = [("日本語のケース", "m", "run", "new batch dir"), *ROWS]

    lines = list(boxed_lines("batch plan", HEADERS, rows))

    assert lines == rich_lines(rows)
    assert len({cell_len(line) for line in lines[1:]}) == 1


def test_a_narrow_terminal_folds_the_reason_and_never_cuts_it() -> None:
    reason = "recorded passed in provider--model-7--latest/case-09999-20261130T201044809248Z-a1"
    rows = [("c1", "m", "carry", reason)]

    lines = list(boxed_lines("batch plan", HEADERS, rows, width=60, fold=-1))

    body = [line for line in lines if line.startswith("│ ")]
    assert len(body) > 1
    assert all(cell_len(line) <= 60 for line in lines)
    assert "".join(line.split("│")[4].strip() for line in body) == reason
    assert body[0].split("│")[1].strip() == "c1"
    assert all(line.split("│")[1].strip() == "" for line in body[1:])


def test_a_terminal_narrower_than_the_other_columns_still_shows_some_reason() -> None:
    lines = list(boxed_lines("batch plan", HEADERS, ROWS, width=20, fold=-1))

    reasons = [line.split("│")[4] for line in lines if line.startswith("│ ")]
    assert {len(reason) - 2 for reason in reasons} == {MIN_FOLDED}


def test_rows_are_painted_only_where_a_terminal_shows_colour(monkeypatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    paint = terminal_paint(io.StringIO(), {"run": "bold"})
    assert paint is None  # not a terminal

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    paint = terminal_paint(Terminal(), {"run": "bold", "retry": "yellow"})
    assert paint is not None
    lines = list(boxed_lines("batch plan", HEADERS, ROWS, styles=STYLES, paint=paint))
    assert lines[4] == "\x1b[1m" + list(boxed_lines("batch plan", HEADERS, ROWS))[4] + "\x1b[0m"
    assert lines[5] == list(boxed_lines("batch plan", HEADERS, ROWS))[5]  # carry: no style given
    assert lines[6].startswith("\x1b[33m")

    monkeypatch.setenv("FORCE_COLOR", "1")  # rich paints even a pipe then, and so do we
    assert terminal_paint(io.StringIO(), {"run": "bold"}) == {"run": ("\x1b[1m", "\x1b[0m")}
    monkeypatch.delenv("FORCE_COLOR")

    monkeypatch.setenv("NO_COLOR", "1")
    paint = terminal_paint(Terminal(), {"run": "bold", "retry": "yellow"})
    assert paint is not None and paint["run"] == ("\x1b[1m", "\x1b[0m")
    assert paint["retry"] == ("", "")


def test_a_table_given_by_its_columns_is_the_one_rich_printed(monkeypatch) -> None:
    # batch plan gives its million rows as columns (no tuple per row): sliced (ASCII), and
    # a row at a time (wide characters), the table rich printed for the same rows.
    monkeypatch.setattr(boxed, "ROWS_AT_ONCE", 2)
    for rows in (
        [*ROWS, ("%s", "%%", "run", "{0} {}"), *ROWS],
        [("日本語", "m", "run", "r"), *ROWS],
    ):
        columns = [list(column) for column in zip(*rows, strict=True)]
        text = "".join(boxed_columns("batch plan", HEADERS, columns))
        assert text.splitlines() == rich_lines(rows)
