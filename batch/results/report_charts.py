"""The report's SVG charts (``batch.results.report``, ``batch.results.report_compare``):
adjusted pass rate per model with Wilson 95% whiskers, failures per model stacked by
category, and A's and B's rates paired with the difference. Model labels wrap, never cut.

Also the two small helpers every part of the report uses: ``esc`` (every name from a
summary is untrusted text) and ``text_colour`` (readable text on a category's colour).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from batch.results.stats_cells import diff_cell, percent

CHAR_WIDTH = 7.2  # px per character of 13px sans-serif text, to size SVG label columns
PLOT_WIDTH = 420
#: Characters of a model name per line of an SVG label; longer names wrap onto more lines.
LABEL_CHARS = 34
LINE_HEIGHT = 15


def esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


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
