"""The pass@k chart of ``batch report`` for a batch with repeats: one small panel per model,
k from 1 to the model's ``k_max`` on x, pass@k and pass^k on y, each with its 95% interval
as a band (a whisker when there is only k = 1).

The figures are ``batch stats``'s, as ``batch.stats.rates.batch_stats`` puts them in each
group (``pass_at_k``, ``pass_hat_k`` keyed by k as a string; docs/stats.md, "Repeats");
nothing is computed here but positions. The model's name is the panel's HTML caption, so
it wraps and is never cut; every number in the SVG sits inside its viewBox.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from batch.report.charts import Shape, svg, text
from batch.report.environment import macro
from batch.report.grid import legend
from batch.stats.repeats_cells import estimate_cell

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


def curve_panel(group: Mapping[str, Any]) -> dict[str, Any]:
    """One model's panel: its name, the two curves with bands, the figures at k_max."""
    k_max = group.get("k_max") or 0
    if not k_max:
        return {"model": group["model"], "chart": None, "figures": ""}
    x = lambda k: LEFT + (PLOT_W / 2 if k_max == 1 else (k - 1) / (k_max - 1) * PLOT_W)  # noqa: E731
    y = lambda v: TOP + (1 - v) * PLOT_H  # noqa: E731
    shapes = []
    for tick in (0, 0.25, 0.5, 0.75, 1):
        shapes.append(
            Shape("line", css="grid-line", x1=LEFT, y1=y(tick), x2=LEFT + PLOT_W, y2=y(tick))
        )
        shapes.append(text(LEFT - 6, y(tick) + 4, f"{tick:.0%}", css="label small"))
    for k in x_ticks(k_max):
        shapes.append(text(x(k), TOP + PLOT_H + 15, str(k), css="tick"))
    shapes.append(text(LEFT + PLOT_W / 2, TOP + PLOT_H + 31, "k (samples drawn)", css="tick"))
    for key, label, css in SERIES:
        shapes += series(group[key], label, css, k_max, x, y)
    width, height = LEFT + PLOT_W + RIGHT, TOP + PLOT_H + BOTTOM
    top = str(k_max)
    figures = (
        f"pass@1 {estimate_cell(group['pass_at_k'].get('1'))} · "
        f"pass@{top} {estimate_cell(group['pass_at_k'].get(top))} · "
        f"pass^{top} {estimate_cell(group['pass_hat_k'].get(top))} · "
        f"{len(group['flaky_cases'])} flaky of {group['cases_sampled']} cases"
    )
    chart = svg(width, height, shapes, f"pass@k and pass^k of {group['model']}")
    return {"model": group["model"], "chart": chart, "figures": figures}


def series(
    figures: Mapping[str, Mapping[str, Any]], label: str, css: str, k_max: int, x: Any, y: Any
) -> list[Shape]:
    """One series: its band (or whisker at k = 1), its line and a point per k with the
    figure and interval on hover."""
    ks = range(1, k_max + 1)
    points = [(k, figures[str(k)]) for k in ks]
    shapes = []
    bounded = all(f["low"] is not None and f["high"] is not None for _, f in points)
    if bounded and k_max > 1:
        edge = [f"{x(k):.1f},{y(f['high']):.1f}" for k, f in points]
        edge += [f"{x(k):.1f},{y(f['low']):.1f}" for k, f in reversed(points)]
        shapes.append(Shape("polygon", css=f"band {css}", points=" ".join(edge)))
    elif bounded:
        (_, only), left = points[0], x(1)
        low, high = y(only["low"]), y(only["high"])
        d = (
            f"M{left:.1f},{low:.1f}V{high:.1f}"
            f"M{left - 4:.1f},{low:.1f}h8M{left - 4:.1f},{high:.1f}h8"
        )
        shapes.append(Shape("path", css=f"whisker {css}", d=d))
    line = " ".join(f"{x(k):.1f},{y(f['estimate']):.1f}" for k, f in points)
    shapes.append(Shape("polyline", css=f"curve-line {css}", points=line))
    for k, figure in points:
        title = f"{label}{k} {estimate_cell(figure)}, {figure['cases']} cases"
        shapes.append(
            Shape("circle", css=f"point {css}", cx=x(k), cy=y(figure["estimate"]), title=title)
        )
    return shapes


def curves(groups: Sequence[Mapping[str, Any]]) -> Markup:
    """The legend and a panel per model."""
    key = legend(
        [
            (COLOURS["at"], "", "pass@k: at least one of k samples passes"),
            (COLOURS["hat"], "", "pass^k: all k samples pass"),
        ]
    )
    return macro("curves.html.j2", "curves", key, [curve_panel(group) for group in groups])


def style() -> Markup:
    """The panels' CSS."""
    return macro("curves.html.j2", "style", LEFT + PLOT_W + RIGHT, COLOURS["at"], COLOURS["hat"])
