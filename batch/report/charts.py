"""The report's SVG charts (``batch.report.page``, ``batch.report.compare``):
adjusted pass rate per model with Wilson 95% whiskers, failures per model stacked by
category, and A's and B's rates paired with the difference. Model labels wrap, never cut.

A chart is built as code: its shapes (:class:`Shape`: bars, whiskers, ticks, labels) are
plain values computed here and drawn by ``templates/charts.html.j2``, which escapes every
text in them. Also ``text_colour`` (readable text on a category's colour), which every part
of the report uses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from markupsafe import Markup

from batch.report.environment import macro
from batch.stats.cells import diff_cell, percent

CHAR_WIDTH = 7.2  # px per character of 13px sans-serif text, to size SVG label columns
PLOT_WIDTH = 420
#: Characters of a model name per line of an SVG label; longer names wrap onto more lines.
LABEL_CHARS = 34
LINE_HEIGHT = 15


@attrs.frozen
class Span:
    """A run of text in a ``<text>``: placed (``x``, ``y``: a label's line) or styled."""

    text: str
    css: str = ""
    x: float | None = None
    y: float | None = None


@attrs.frozen
class Shape:
    """One SVG element of a chart; ``kind`` says which, and which fields it reads."""

    kind: str  # text, line, rect, path, polygon, polyline, circle
    css: str = ""
    x: float | None = None
    y: float | None = None
    width: float = 0.0
    height: float = 0.0
    x1: float = 0.0
    y1: float = 0.0
    x2: float = 0.0
    y2: float = 0.0
    cx: float = 0.0
    cy: float = 0.0
    r: float = 3
    fill: str = ""
    title: str | None = None
    spans: tuple[Span, ...] = ()
    d: str = ""
    points: str = ""


def text(x: float | None, y: float | None, *spans: str | Span, css: str = "", **more: Any) -> Shape:
    """A ``<text>`` of plain strings and :class:`Span` runs."""
    runs = tuple(span if isinstance(span, Span) else Span(span) for span in spans)
    return Shape("text", css=css, x=x, y=y, spans=runs, **more)


def text_colour(background: str) -> str:
    """Dark text on a light background, white on a dark one (relative luminance)."""
    r, g, b = (int(background[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return "#212529" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.55 else "#fff"


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


def svg_label(name: str, x: float, mid: float) -> Shape:
    """A right-aligned label of one or more lines, centred on ``mid``."""
    lines = label_lines(name)
    first = mid + 4 - (len(lines) - 1) * LINE_HEIGHT / 2
    spans = [Span(line, x=x, y=first + i * LINE_HEIGHT) for i, line in enumerate(lines)]
    return text(None, None, *spans, css="label", title=name)


def row_heights(names: Sequence[str], base: float) -> list[float]:
    return [max(base, len(label_lines(name)) * LINE_HEIGHT + 8) for name in names]


def rate_text(row: Mapping[str, Any]) -> str:
    """The 95% interval of the adjusted pass rate in percent, its ends joined by an en dash."""
    low, high = row["adjusted_pass_rate_low"], row["adjusted_pass_rate_high"]
    return f"{low * 100:.1f}\u2013{high * 100:.1f}"


def rate_bar(row: Mapping[str, Any], x: Any, mid: float, height: float, css: str) -> list[Shape]:
    """One adjusted-rate bar with its whisker, or nothing when the rate is undefined."""
    rate = row["adjusted_pass_rate"]
    if rate is None:
        return []
    low, high = x(row["adjusted_pass_rate_low"]), x(row["adjusted_pass_rate_high"])
    title = f"adjusted pass rate {percent(rate)}, 95% interval {rate_text(row)}%"
    whisker = (
        f"M{low:.1f},{mid:.1f}H{high:.1f}M{low:.1f},{mid - 4:.1f}v8M{high:.1f},{mid - 4:.1f}v8"
    )
    return [
        Shape("rect", css=css, x=x(0), y=mid - height / 2, width=rate * PLOT_WIDTH,
              height=height, title=title),
        Shape("path", css="whisker", d=whisker),
    ]  # fmt: skip


def model_rows(
    rows: Sequence[Mapping[str, Any]], base: float, top: float
) -> tuple[float, float, list[tuple[Mapping[str, Any], float, Shape]]]:
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


def rate_axis(x: Any, top: float, height: float) -> list[Shape]:
    shapes = []
    for tick in (0, 0.25, 0.5, 0.75, 1):
        shapes.append(Shape("line", css="grid-line", x1=x(tick), y1=top - 4, x2=x(tick), y2=height))
        shapes.append(text(x(tick), top - 9, f"{tick:.0%}", css="tick"))
    return shapes


def rate_bars_svg(rows: Sequence[Mapping[str, Any]]) -> Markup:
    """Adjusted pass rate per model as a bar, its Wilson 95% interval as a whisker."""
    top = 24
    label_w, rows_h, placed = model_rows(rows, 30, top)
    width, height = label_w + PLOT_WIDTH + 340, top + rows_h + 4
    x = lambda rate: label_w + rate * PLOT_WIDTH  # noqa: E731
    shapes = rate_axis(x, top, height)
    for row, mid, label in placed:
        shapes.append(label)
        rate = row["adjusted_pass_rate"]
        judged = row["passed"] + row["failed"]
        raw = f"raw {percent(row['pass_rate'])}" if row["pass_rate"] is not None else ""
        if rate is None:
            said = "no passed or failed job yet" + (f" · {raw}" if raw else "")
            shapes.append(text(x(0) + 6, mid + 4, said, css="muted"))
            continue
        shapes += rate_bar(row, x, mid, 16, "bar")
        shapes.append(
            text(
                x(1) + 12,
                mid + 4,
                Span(percent(rate), css="strong"),
                f" ({rate_text(row)}) ",
                Span(f"· {row['passed']}/{judged} · {raw}", css="muted"),
            )
        )
    return svg(width, height, shapes, "Adjusted pass rate per model")


def failure_bars_svg(rows: Sequence[Mapping[str, Any]], colours: Mapping[str, str]) -> Markup:
    """Failed and error jobs per model, stacked by failure category on one shared scale."""
    label_w, rows_h, placed = model_rows(rows, 28, 2.0)
    width, height = label_w + PLOT_WIDTH + 300, rows_h + 4
    most = max((sum(row["failure_categories"].values()) for row in rows), default=0) or 1
    shapes = []
    for row, mid, label in placed:
        shapes.append(label)
        left, total = label_w, sum(row["failure_categories"].values())
        # Segments in legend order, so a category sits in the same place on every bar.
        counts = row["failure_categories"]
        for name, count in ((name, counts[name]) for name in colours if name in counts):
            w = count / most * PLOT_WIDTH
            shapes.append(
                Shape("rect", x=left, y=mid - 9, width=w, height=18, fill=colours[name],
                      title=f"{row['model']}: {name} {count}")
            )  # fmt: skip
            if w >= 22:
                fill = text_colour(colours[name])
                shapes.append(text(left + w / 2, mid + 4, str(count), css="in-bar", fill=fill))
            left += w
        summary = f"{total} failed or error" if total else "no failures"
        shapes.append(text((left + 8) if total else label_w, mid + 4, summary, css="muted"))
    return svg(width, height, shapes, "Failures per model by category")


def paired_rate_bars_svg(rows: Sequence[Mapping[str, Any]]) -> Markup:
    """Per model, A's and B's adjusted pass rate as two bars with whiskers, B - A beside."""
    top = 24
    label_w, rows_h, placed = model_rows(rows, 40, top)
    width, height = label_w + PLOT_WIDTH + 300, top + rows_h + 4
    x = lambda rate: label_w + rate * PLOT_WIDTH  # noqa: E731
    shapes = rate_axis(x, top, height)
    for row, mid, label in placed:
        shapes.append(label)
        for side, offset in (("a", -8), ("b", 8)):
            stats = row[side]
            if stats is None or stats["adjusted_pass_rate"] is None:
                what = "absent" if stats is None else "no passed or failed job"
                said = f"{side.upper()}: {what}"
                shapes.append(text(x(0) + 4, mid + offset + 4, said, css="muted small"))
                continue
            shapes += rate_bar(stats, x, mid + offset, 12, f"bar-{side}")
            said = f"{side.upper()} {percent(stats['adjusted_pass_rate'])}"
            shapes.append(text(x(1) + 10, mid + offset + 4, said, css="small"))
        diff = row["adjusted_pass_rate_diff"]
        css = "better" if diff and diff > 0 else "worse" if diff and diff < 0 else "muted"
        shapes.append(text(x(1) + 90, mid + 5, diff_cell(diff), css=f"strong {css}"))
    return svg(width, height, shapes, "Adjusted pass rate per model, A and B")


def svg(width: float, height: float, shapes: Sequence[Shape], label: str) -> Markup:
    """The chart: ``shapes`` drawn by ``templates/charts.html.j2``."""
    return macro("charts.html.j2", "svg", width, height, shapes, label)
