"""``batch stats`` rendered: each format of each kind of result, word for word (golden files
under ``tests/data/stats/render``), fitting a terminal's width, and telling a terminal from
a pipe."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import struct
import termios
from collections.abc import Callable
from typing import Any, TextIO

import pytest
from helpers.paths import TEST_DATA

from batch.stats.rates import batch_stats, compare_stats
from batch.stats.render import (
    FORMATS,
    RENDERERS,
    is_styled,
    output_width,
    render_csv,
    render_markdown,
    render_table,
)

DATA = TEST_DATA / "stats"
RENDER = DATA / "render"


def summary(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text())


#: The documents rendered: a halted batch with reasons, skipped jobs and spend, per case and
#: per model; a comparison with spend on one side (basic reported none) and on both.
RESULTS: dict[str, Callable[[], dict[str, Any]]] = {
    "reasons.case": lambda: batch_stats(
        summary("reasons.json"), by="case", batch_dir="runs/reasons"
    ),
    "reasons.model": lambda: batch_stats(
        summary("reasons.json"), by="model", batch_dir="runs/reasons"
    ),
    "basic-reasons.compare": lambda: compare_stats(
        summary("basic.json"), summary("reasons.json"), batch_dirs=("runs/basic", "runs/reasons")
    ),
    # B has models A lacks: A's side is "absent", spend on A's side only.
    "reasons-basic.compare": lambda: compare_stats(
        summary("reasons.json"), summary("basic.json"), batch_dirs=("runs/reasons", "runs/basic")
    ),
    "reasons-b.compare": lambda: compare_stats(
        summary("reasons.json"),
        summary("reasons_b.json"),
        batch_dirs=("runs/reasons", "runs/reasons_b"),
    ),
    "reasons-b.compare.case": lambda: compare_stats(
        summary("reasons.json"),
        summary("reasons_b.json"),
        by="case",
        batch_dirs=("runs/reasons", "runs/reasons_b"),
    ),
}
RENDERED: dict[str, Callable[[dict[str, Any], TextIO], None]] = {
    "table.txt": render_table,
    "csv": render_csv,
    "md": render_markdown,
}


def rendered(render: Callable[..., None], result: dict[str, Any], **options: Any) -> str:
    out = io.StringIO()
    render(result, out, **options)
    return out.getvalue()


@pytest.mark.parametrize("ext", RENDERED)
@pytest.mark.parametrize("name", RESULTS)
def test_every_format_of_every_result_reads_as_its_golden_file(name: str, ext: str) -> None:
    expected = (RENDER / f"{name}.{ext}").read_text()
    assert rendered(RENDERED[ext], RESULTS[name]()) == expected


def long_names() -> dict[str, Any]:
    """The reasons batch with case names too long to stay whole on a narrow terminal."""
    reasons = summary("reasons.json")
    jobs = [{**job, "case": f"{job['case']}-a-rather-long-case-name-{'x' * 20}"}
            for job in reasons["jobs"]]  # fmt: skip
    return batch_stats({**reasons, "jobs": jobs}, by="case", batch_dir="runs/long")


NARROW: dict[str, Callable[[], dict[str, Any]]] = {**RESULTS, "long.case": long_names}


@pytest.mark.parametrize(
    ("name", "width"),
    [("reasons.model", 100), ("reasons.model", 60), ("reasons.case", 120), ("reasons.case", 50),
     ("reasons-basic.compare", 80), ("long.case", 100), ("long.case", 90)],
)  # fmt: skip
def test_a_narrow_terminal_leaves_out_the_fewest_columns_and_says_which(
    name: str, width: int
) -> None:
    # Per model the failures move below the table; names wrap only when no layout fits
    # with them whole (long.case), and below the narrowest layout the table is wider than
    # asked rather than cut.
    expected = (RENDER / f"{name}.w{width}.table.txt").read_text()
    assert rendered(render_table, NARROW[name](), width=width) == expected


def test_a_wide_enough_terminal_shows_every_column_and_no_note() -> None:
    result = RESULTS["reasons.case"]()
    assert rendered(render_table, result, width=400) == rendered(render_table, result)


def test_styled_output_is_the_same_text_in_bold() -> None:
    result = RESULTS["reasons.model"]()
    styled = rendered(render_table, result, styled=True)
    assert "\x1b[1m" in styled
    assert rendered(render_table, result) == (RENDER / "reasons.model.table.txt").read_text()


def test_the_formats_are_the_renderers() -> None:
    assert FORMATS == ("table", "json", "csv", "markdown") == tuple(RENDERERS)


class Terminal(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty

    def fileno(self) -> int:
        raise io.UnsupportedOperation("not a real terminal")


@pytest.mark.parametrize(
    ("tty", "term", "styled"),
    [(True, "xterm-256color", True), (True, None, True), (True, "dumb", False),
     (True, "unknown", False), (False, "xterm", False)],
)  # fmt: skip
def test_only_a_terminal_that_shows_bold_gets_styled_output(
    tty: bool, term: str | None, styled: bool
) -> None:
    environ = {} if term is None else {"TERM": term}
    assert is_styled(Terminal(tty), environ) is styled


def test_a_stream_without_isatty_is_a_pipe() -> None:
    class Bare:
        def write(self, text: str) -> int:
            return len(text)

    assert not is_styled(Bare(), {"TERM": "xterm"})  # type: ignore[arg-type]
    assert output_width(Bare(), {}) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("columns", "width"),
    [(None, None), ("120", 120), ("1", 1), ("0", None), ("-5", None), ("wide", None), ("", None)],
)
def test_a_pipe_is_as_wide_as_columns_says(columns: str | None, width: int | None) -> None:
    environ = {} if columns is None else {"COLUMNS": columns}
    assert output_width(io.StringIO(), environ) == width
    # A terminal whose size cannot be read falls back to COLUMNS as well.
    assert output_width(Terminal(True), environ) == width


def test_a_real_terminal_is_as_wide_as_it_says_whatever_columns_says() -> None:
    main, side = pty.openpty()
    try:
        fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 93, 0, 0))
        with os.fdopen(side, "w", closefd=False) as terminal:
            assert output_width(terminal, {"COLUMNS": "200"}) == 93
    finally:
        os.close(main)
        os.close(side)


@pytest.mark.parametrize("name", ["reasons.model", "reasons.case"])
def test_a_table_exactly_as_wide_as_the_terminal_is_left_whole(name: str) -> None:
    result = RESULTS[name]()
    whole = rendered(render_table, result)
    # The rule under the headers spans the table but for its blank edges.
    width = max(len(line) for line in whole.splitlines() if line.startswith(" ─")) + 1
    assert rendered(render_table, result, width=width) == whole
    assert "Left out to fit" in rendered(render_table, result, width=width - 1)
