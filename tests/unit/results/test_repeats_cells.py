"""The cells of the repeats tables (``batch stats`` and ``batch report`` show the same)."""

from __future__ import annotations

import pytest

from batch.results.repeats_cells import signed_cell


@pytest.mark.parametrize(
    ("figure", "text"),
    [
        ({"estimate": 0.0123, "low": 0.0031, "high": 0.0216}, "+0.012 (+0.003 to +0.022)"),
        ({"estimate": -0.25, "low": -0.5, "high": 0.125}, "-0.250 (-0.500 to +0.125)"),
    ],
)
def test_a_score_difference_has_its_bounds_at_the_estimates_precision(
    figure: dict[str, float], text: str
) -> None:
    assert signed_cell(figure, rate=False) == text


def test_no_difference_is_not_written_as_minus_zero() -> None:
    # A mean of per-case differences that are all 0 can be -0.0 in floating point.
    figure = {"estimate": -0.0, "low": -0.29, "high": 0.29}
    assert signed_cell(figure) == "+0.0 pp (-29.0 to +29.0)"
    assert signed_cell({"estimate": -0.0, "low": -0.0, "high": 0.0}, rate=False) == (
        "+0.000 (+0.000 to +0.000)"
    )
