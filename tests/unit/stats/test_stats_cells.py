"""The text cells ``batch stats`` and the report show: durations, rates, categories, diffs."""

from __future__ import annotations

import pytest

from batch.stats.cells import categories_cell, diff_cell, duration, percent


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.04, "0.0 s"),
        (59.94, "59.9 s"),
        (60, "1m 00s"),
        (61.4, "1m 01s"),
        (3599.4, "59m 59s"),
        (3600, "1h 00m"),
        (3660, "1h 01m"),
        (36000 + 540, "10h 09m"),
    ],
)
def test_a_duration_in_the_largest_units_that_keep_it_short(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_an_unknown_figure_is_a_dash() -> None:
    assert duration(None) == percent(None) == diff_cell(None) == categories_cell({}) == "—"


def test_categories_with_their_counts_in_the_order_given() -> None:
    assert categories_cell({"model_failure": 3, "api_or_credit": 1}) == (
        "model_failure 3, api_or_credit 1"
    )


@pytest.mark.parametrize(
    ("diff", "text"), [(0.125, "+12.5 pp"), (-0.05, "-5.0 pp"), (0.0, "0.0 pp")]
)
def test_a_difference_in_percentage_points_with_its_sign(diff: float, text: str) -> None:
    assert diff_cell(diff) == text
