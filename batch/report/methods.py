"""The methods note of ``batch report``: which 95% interval each figure on the page carries
and how p-values are adjusted, read from ``batch stats``'s document (each interval's
``method``), so that a figure quoted from the page can be quoted with its method."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from markupsafe import Markup

from batch.report.environment import macro
from batch.stats.intervals import METHOD_TEXT


def _named(methods: Iterable[str | None]) -> str:
    found = [METHOD_TEXT.get(m, m) for m in dict.fromkeys(m for m in methods if m)]
    return "; ".join(found)


def _figure_methods(rows: Sequence[Mapping[str, Any]], key: str) -> list[str | None]:
    methods: list[str | None] = []
    for row in rows:
        figure = row.get(key)
        if isinstance(figure, Mapping):
            values = figure.values() if key in ("pass_at_k", "pass_hat_k") else [figure]
            methods += [value.get("method") for value in values if value]
    return methods


def _pair_methods(pairs: Iterable[Mapping[str, Any] | None], key: str) -> list[str | None]:
    return [((pair or {}).get(key) or {}).get("method") for pair in pairs]


def methods_lines(stats: Mapping[str, Any], *, repeated: bool) -> list[tuple[str, str]]:
    """``(figure, method)`` for every figure of one batch's page that has an interval."""
    rows = [*stats["models"], stats["overall"]]
    lines = [
        (
            "Pass rate, adjusted pass rate",
            _named(
                row.get(f"{name}_method")
                for row in rows
                for name in ("pass_rate", "adjusted_pass_rate")
            ),
        )
    ]
    if repeated:
        lines.append(("pass@k, pass^k", _named(_figure_methods(rows, "pass_at_k"))))
    lines.append(("Score", _named(_figure_methods(rows, "score"))))
    pairs = stats.get("paired") or []
    lines.append(("B - A pass rate (paired)", _named(_pair_methods(pairs, "pass_rate_diff"))))
    lines.append(("B - A score (paired)", _named(_pair_methods(pairs, "score_diff"))))
    return [(figure, method) for figure, method in lines if method]


def compare_methods_lines(result: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(figure, method)`` for the figures of ``batch report A B``."""
    rows = [*result["models"], result["overall"]]
    sides = [row[side] for row in rows for side in ("a", "b") if row.get(side)]
    pairs = [row.get("paired") for row in result["models"]]
    lines = [
        (
            "Adjusted pass rate (each batch)",
            _named(row.get("adjusted_pass_rate_method") for row in sides),
        ),
        ("B - A pass rate (paired)", _named(_pair_methods(pairs, "pass_rate_diff"))),
        ("B - A score (paired)", _named(_pair_methods(pairs, "score_diff"))),
    ]
    return [(figure, method) for figure, method in lines if method]


def methods_section(lines: Sequence[tuple[str, str]], *, tests: bool) -> Markup:
    """The page's methods note: a line per figure, and how p-values are adjusted."""
    return macro("parts.html.j2", "methods_section", lines, tests)
