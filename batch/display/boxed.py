"""A table as lines of text, in rich's default box, at any length.

rich's ``Table`` measures and renders every cell as styled segments: a plan of 100,000 jobs
printed through it took a minute and hundreds of MB (bench/scale.py). :func:`boxed_text`
writes the same box a row at a time, with the column widths from one pass over the cells.
Cells are shown as given: escaping them (:func:`batch.printable.one_line`) is the caller's.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import TextIO

from rich.cells import cell_len, chop_cells

#: Environment variables that make rich treat any stream as a terminal.
_FORCED = ("FORCE_COLOR", "TTY_COMPATIBLE")
#: Rows formatted into one piece of text.
ROWS_AT_ONCE = 5_000
#: The narrowest a folded column gets, however narrow the terminal.
MIN_FOLDED = 10


def boxed_text(
    title: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    styles: Sequence[str | None] | None = None,
    width: int | None = None,
    fold: int = -1,
    paint: Mapping[str, tuple[str, str]] | None = None,
) -> Iterator[str]:
    """The table as text, in pieces of whole lines (each ending with a newline): ``title``
    centred above the box, ``headers``, then one line per row.

    With ``width`` (a terminal's), a table wider than it folds column ``fold`` onto more
    lines of its row, never cutting a cell; without, every row is one line (for grep and
    less). ``styles`` names each row's style, a key of ``paint``, which maps it to the escape
    codes around the row's lines (from :func:`terminal_paint`); without it, no codes are
    written.
    """
    columns = list(zip(*rows, strict=True)) or [()] * len(headers)
    return boxed_columns(
        title, headers, columns, styles=styles, width=width, fold=fold, paint=paint
    )


def boxed_columns(
    title: str,
    headers: Sequence[str],
    columns: Sequence[Sequence[str]],
    *,
    styles: Sequence[str | None] | None = None,
    width: int | None = None,
    fold: int = -1,
    paint: Mapping[str, tuple[str, str]] | None = None,
) -> Iterator[str]:
    """:func:`boxed_text` of the table given as its columns, one sequence per header, all
    as long: a caller with a million rows need not hold a tuple per row."""
    # ASCII text (names, decisions, run dirs, nearly always) is as wide as it is long: len
    # and str.format, at C speed; anything else is measured in terminal cells by rich.
    plain = all(all(map(str.isascii, column)) for column in columns)
    measure = len if plain else cell_len
    widths = [
        max(cell_len(header), max(map(measure, column), default=0))
        for header, column in zip(headers, columns, strict=True)
    ]
    total = sum(widths) + 3 * len(widths) + 1
    if width is not None and total > width:
        widths[fold] = max(MIN_FOLDED, widths[fold] - (total - width))
        total = sum(widths) + 3 * len(widths) + 1
    codes = paint or {}
    title_on, title_off = codes.get("title", ("", ""))
    header_on, header_off = codes.get("header", ("", ""))
    heads = (header_on + _padded(h, w) + header_off for h, w in zip(headers, widths, strict=True))
    yield (
        " " * ((total - cell_len(title)) // 2) + title_on + title + title_off + "\n"
        "┏" + "┳".join("━" * (w + 2) for w in widths) + "┓\n"
        "┃ " + " ┃ ".join(heads) + " ┃\n"
        "┡" + "╇".join("━" * (w + 2) for w in widths) + "┩\n"
    )
    template = "│ " + " │ ".join(f"{{:<{w}}}" for w in widths) + " │"
    folded = widths[fold]
    if plain and not codes and max(map(len, columns[fold]), default=0) <= folded:
        # The usual table, piped: every row one line, a slice of rows at a time (all of them
        # at once would hold the whole text twice), each slice by one %-format of as many
        # lines as it has rows: half the time of a format and a join per row. ``%-Ns`` pads
        # as ``{:<N}`` does; plain ASCII cells are as wide as they are long.
        line = "│ " + " │ ".join(f"%-{w}s" for w in widths) + " │\n"
        for start in range(0, len(columns[0]), ROWS_AT_ONCE):
            part = [column[start : start + ROWS_AT_ONCE] for column in columns]
            cells = tuple(itertools.chain.from_iterable(zip(*part, strict=True)))
            yield (line * len(part[0])) % cells
    else:
        # Not strict: without styles, an endless repeat(None).
        rows = zip(*columns, strict=True)
        for cells, style in zip(rows, styles or itertools.repeat(None), strict=False):
            on, off = codes.get(style, ("", "")) if style is not None else ("", "")
            cell = cells[fold]
            if measure(cell) <= folded:
                line = template.format(*cells) if plain else _line(cells, widths)
                yield on + line + off + "\n"
                continue
            blank = [""] * len(cells)
            for index, piece in enumerate(chop_cells(cell, folded)):
                parts = list(cells) if index == 0 else list(blank)
                parts[fold] = piece
                yield on + _line(parts, widths) + off + "\n"
    yield "└" + "┴".join("─" * (w + 2) for w in widths) + "┘\n"


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "│ " + " │ ".join(_padded(c, w) for c, w in zip(cells, widths, strict=True)) + " │"


def _padded(cell: str, width: int) -> str:
    return cell + " " * (width - cell_len(cell))


def terminal_paint(out: TextIO, styles: Mapping[str, str]) -> dict[str, tuple[str, str]] | None:
    """The escape codes around each of ``styles`` (name: a rich style such as ``"dim"``) as
    rich would write them to ``out``: None where it would write none (not a terminal,
    ``NO_COLOR``, ``TERM=dumb``)."""
    if not out.isatty() and not any(os.environ.get(name) for name in _FORCED):
        return None  # what rich would decide, without importing it
    from rich.console import COLOR_SYSTEMS, Console
    from rich.style import Style

    console = Console(file=out)
    if console.color_system is None:
        return None
    system = COLOR_SYSTEMS[console.color_system]
    codes = {}
    for name, text in styles.items():
        style = Style.parse(text)
        if console.no_color:  # NO_COLOR drops colours, keeps bold and dim (as rich does)
            style = style.without_color
        on, _, off = style.render("\0", color_system=system).partition("\0")
        codes[name] = (on, off)
    return codes
