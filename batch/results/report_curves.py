"""The pass@k chart of ``batch report`` for a batch with repeats: one small panel per model,
k from 1 to the model's ``k_max`` on x, pass@k and pass^k on y, each with its 95% interval
as a band (a whisker when there is only k = 1).

The figures are ``batch stats``'s, as ``batch.results.stats.batch_stats`` puts them in each
group (``pass_at_k``, ``pass_hat_k`` keyed by k as a string; docs/stats.md, "Repeats");
nothing is computed here but positions. The model's name is the panel's HTML caption, so
it wraps and is never cut; every number in the SVG sits inside its viewBox.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from batch.results.repeats_cells import estimate_cell
from batch.results.report_charts import esc, svg
from batch.results.report_grid import breakable, legend

LEFT, RIGHT, TOP, BOTTOM = 44.0, 20.0, 10.0, 36.0
PLOT_W, PLOT_H = 200.0, 120.0
#: Past this many values of k, the x axis labels a few of them only.
ALL_TICKS = 10
#: (key in the group, label, css class): the two series, drawn in this order.
SERIES = (
    ("pass_at_k", "pass@", "at"),
    ("pass_hat_k", "pass^", "hat"),
)
COLOURS = {"at": "#4c6ef5", "hat": "#f76707"}


def x_ticks(k_max: int) -> list[int]:
    """Every k up to :data:`ALL_TICKS`; past it 1, k_max and four between."""
    if k_max <= ALL_TICKS:
        return list(range(1, k_max + 1))
    return sorted({1, k_max, *(round(1 + i * (k_max - 1) / 5) for i in range(1, 5))})


def curve_panel(group: Mapping[str, Any]) -> str:
    """One model's panel: its name, the two curves with bands, the figures at k_max."""
    k_max = group.get("k_max") or 0
    caption = f'<figcaption class="name">{breakable(group["model"])}</figcaption>'
    if not k_max:
        return (
            f'<figure class="curve">{caption}<p class="muted">no finished sample yet</p></figure>'
        )
    x = lambda k: LEFT + (PLOT_W / 2 if k_max == 1 else (k - 1) / (k_max - 1) * PLOT_W)  # noqa: E731
    y = lambda v: TOP + (1 - v) * PLOT_H  # noqa: E731
    parts = []
    for tick in (0, 0.25, 0.5, 0.75, 1):
        parts.append(
            f'<line x1="{LEFT}" y1="{y(tick):.1f}" x2="{LEFT + PLOT_W}" y2="{y(tick):.1f}" '
            f'class="grid-line"/><text x="{LEFT - 6}" y="{y(tick) + 4:.1f}" class="label small">'
            f"{tick:.0%}</text>"
        )
    for k in x_ticks(k_max):
        parts.append(f'<text x="{x(k):.1f}" y="{TOP + PLOT_H + 15:.1f}" class="tick">{k}</text>')
    parts.append(
        f'<text x="{LEFT + PLOT_W / 2:.1f}" y="{TOP + PLOT_H + 31:.1f}" class="tick">'
        "k (samples drawn)</text>"
    )
    for key, label, css in SERIES:
        parts += series(group[key], label, css, k_max, x, y)
    width, height = LEFT + PLOT_W + RIGHT, TOP + PLOT_H + BOTTOM
    top = str(k_max)
    figures = (
        f"pass@1 {esc(estimate_cell(group['pass_at_k'].get('1')))} · "
        f"pass@{top} {esc(estimate_cell(group['pass_at_k'].get(top)))} · "
        f"pass^{top} {esc(estimate_cell(group['pass_hat_k'].get(top)))} · "
        f"{len(group['flaky_cases'])} flaky of {group['cases_sampled']} cases"
    )
    chart = svg(width, height, parts, f"pass@k and pass^k of {group['model']}")
    return f'<figure class="curve">{caption}{chart}<p class="note">{figures}</p></figure>'


def series(
    figures: Mapping[str, Mapping[str, Any]], label: str, css: str, k_max: int, x: Any, y: Any
) -> list[str]:
    """One series: its band (or whisker at k = 1), its line and a point per k with the
    figure and interval on hover."""
    ks = range(1, k_max + 1)
    points = [(k, figures[str(k)]) for k in ks]
    parts = []
    bounded = all(f["low"] is not None and f["high"] is not None for _, f in points)
    if bounded and k_max > 1:
        edge = [f"{x(k):.1f},{y(f['high']):.1f}" for k, f in points]
        edge += [f"{x(k):.1f},{y(f['low']):.1f}" for k, f in reversed(points)]
        parts.append(f'<polygon points="{" ".join(edge)}" class="band {css}"/>')
    elif bounded:
        (_, only), left = points[0], x(1)
        parts.append(
            f'<path d="M{left:.1f},{y(only["low"]):.1f}V{y(only["high"]):.1f}'
            f'M{left - 4:.1f},{y(only["low"]):.1f}h8M{left - 4:.1f},{y(only["high"]):.1f}h8" '
            f'class="whisker {css}"/>'
        )
    line = " ".join(f"{x(k):.1f},{y(f['estimate']):.1f}" for k, f in points)
    parts.append(f'<polyline points="{line}" class="curve-line {css}"/>')
    for k, figure in points:
        parts.append(
            f'<circle cx="{x(k):.1f}" cy="{y(figure["estimate"]):.1f}" r="3" class="point {css}">'
            f"<title>{esc(label)}{k} {esc(estimate_cell(figure))}, {figure['cases']} cases"
            "</title></circle>"
        )
    return parts


def curves(groups: Sequence[Mapping[str, Any]]) -> str:
    """The legend and a panel per model."""
    key = legend(
        [
            (COLOURS["at"], "", "pass@k: at least one of k samples passes"),
            (COLOURS["hat"], "", "pass^k: all k samples pass"),
        ]
    )
    panels = "".join(curve_panel(group) for group in groups)
    return f'{key}<div class="curves">{panels}</div>'


STYLE = f"""
.curves {{ display: flex; flex-wrap: wrap; gap: 12px 28px; }}
figure.curve {{ margin: 0; width: {LEFT + PLOT_W + RIGHT:.0f}px; }}
figure.curve figcaption {{ font-weight: 600; overflow-wrap: anywhere; }}
figure.curve .note {{ font-size: 12px; }}
.band {{ stroke: none; opacity: 0.18; }}
.curve-line {{ fill: none; stroke-width: 2; }}
.curve-line.hat {{ stroke-dasharray: 5 3; }}
.band.at, .point.at {{ fill: {COLOURS["at"]}; }} .band.hat, .point.hat {{ fill: {COLOURS["hat"]}; }}
.curve-line.at, .whisker.at {{ stroke: {COLOURS["at"]}; }}
.curve-line.hat, .whisker.hat {{ stroke: {COLOURS["hat"]}; }}
"""
