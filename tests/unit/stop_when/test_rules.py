"""The stopping rules of ``stop_when`` and the estimate of the cases a target takes."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from batch.stop_when.confidence_sequence import Bounds, ConfidenceSequence, sequence_bounds
from batch.stop_when.estimate import (
    compare_cases_needed,
    rate_cases_needed,
    worst_case_compare_cases,
)
from batch.stop_when.rules import (
    A_BETTER,
    B_BETTER,
    REACHED_HALF_WIDTH,
    STOPPED,
    WITHIN_MARGIN,
    case_unit,
    compare_decided,
    first_stop,
    half_width_reached,
)


def test_half_width_holds_at_the_target_and_not_above() -> None:
    assert half_width_reached(Bounds(0.40, 0.46, 900, 0.43), 0.03) == REACHED_HALF_WIDTH
    assert half_width_reached(Bounds(0.40, 0.4601, 900, 0.43), 0.03) is None
    assert half_width_reached(Bounds(0.0, 1.0, 0, 0.5), 0.6) is None  # no case yet


@pytest.mark.parametrize(
    ("low", "high", "answer"),
    [
        (0.001, 0.3, B_BETTER),
        (-0.3, -0.001, A_BETTER),
        (-0.01, 0.01, WITHIN_MARGIN),
        (-0.02, 0.01, None),  # could still be 2 pp worse: not within 1 pp
        (-0.2, 0.2, None),
        (0.0, 0.2, None),  # 0 is inside: the sign is not known
    ],
)
def test_a_compare_stops_on_a_known_sign_or_within_the_margin(
    low: float, high: float, answer: str | None
) -> None:
    assert compare_decided(Bounds(low, high, 50, (low + high) / 2), 0.01) == answer


def test_without_a_margin_only_the_sign_stops_a_compare() -> None:
    assert compare_decided(Bounds(-0.001, 0.001, 9000, 0.0), 0.0) is None


def test_first_stop_is_the_first_prefix_the_rule_holds_on() -> None:
    rng = np.random.default_rng(3)
    values = list((rng.random(3000) < 0.9).astype(float))
    stop, final = first_stop(values, lambda b: half_width_reached(b, 0.05), 0.95)
    assert stop is not None and final.n == 3000
    widths = [b.half_width for b in sequence_bounds(values, 0.95)]
    first = next(n for n, w in enumerate(widths, 1) if w <= 0.05)
    assert stop.bounds.n == first
    assert stop.bounds.half_width == pytest.approx(widths[first - 1])
    assert stop.reason == REACHED_HALF_WIDTH


def test_first_stop_of_a_difference_reports_b_minus_a() -> None:
    # B passes every case, A 60 %: the interval is of B - A, above 0.
    rng = np.random.default_rng(4)
    a = rng.random(400) < 0.6
    diffs = [1.0 - float(x) for x in a]
    stop, final = first_stop(diffs, lambda b: compare_decided(b, 0.01), 0.95, difference=True)
    assert stop is not None and stop.reason == B_BETTER
    assert stop.bounds.low > 0 and stop.bounds.n < 100
    assert final.estimate == pytest.approx(sum(diffs) / 400)


def test_no_stop_when_the_rule_never_holds() -> None:
    stop, final = first_stop([1.0, 0.0] * 10, lambda b: half_width_reached(b, 0.01), 0.95)
    assert stop is None and final.n == 20


def test_a_cases_unit_is_its_pass_share() -> None:
    assert case_unit([True, False, True, True]) == 0.75
    assert case_unit([]) is None


@pytest.mark.parametrize(("rate", "half_width"), [(0.5, 0.05), (0.9, 0.05), (0.97, 0.03)])
def test_the_estimate_is_near_the_median_stop_of_simulated_sweeps(
    rate: float, half_width: float
) -> None:
    rng = np.random.default_rng(5)
    stops = []
    for _ in range(25):
        sequence = ConfidenceSequence(0.95, target=half_width)
        while sequence.n == 0 or sequence.bounds().half_width > half_width:
            sequence.add(float(rng.random() < rate))
        stops.append(sequence.n)
    estimate = rate_cases_needed(rate, half_width, 0.95)
    assert estimate is not None
    # The expected path is a little pessimistic near a bound (a run with fewer failures
    # than expected has a smaller variance estimate and stops sooner): never far below the
    # median stop, at most 30 % above it.
    median = statistics.median(stops)
    assert 0.9 * median <= estimate <= 1.3 * median


def test_a_tighter_target_takes_more_cases() -> None:
    needs = [rate_cases_needed(0.8, h, 0.95) for h in (0.1, 0.05, 0.03, 0.02)]
    assert all(n is not None for n in needs)
    assert needs == sorted(needs)  # type: ignore[type-var]
    assert rate_cases_needed(0.8, 0.0, 0.95) is None


def test_a_compare_far_apart_takes_fewer_cases_than_one_close() -> None:
    far = compare_cases_needed(0.3, 0.5, 0.01, 0.95)
    close = compare_cases_needed(0.05, 0.5, 0.01, 0.95)
    assert far is not None and close is not None and far < close
    assert compare_cases_needed(0.0, 0.5, 0.0, 0.95) is None  # equal models, no margin
    worst = worst_case_compare_cases(0.05, 0.95)
    assert worst is not None and worst >= (compare_cases_needed(0.025, 0.5, 0.05, 0.95) or 0)


def test_the_reasons_are_the_words_the_summary_and_skip_reasons_use() -> None:
    # Written into batch-summary.json (docs/summary.md) and every skip_reason: a format.
    assert (REACHED_HALF_WIDTH, B_BETTER, A_BETTER, WITHIN_MARGIN) == (
        "half_width",
        "b_better",
        "a_better",
        "within_margin",
    )
    assert STOPPED == "stopped by stop_when"


def test_no_stop_before_any_value_however_wide_the_target() -> None:
    assert half_width_reached(Bounds(0.5, 0.5, 0, 0.5), 0.1) is None
    assert compare_decided(Bounds(0.2, 0.3, 0, 0.25), 0.5) is None
    assert compare_decided(Bounds(0.2, 0.3, 1, 0.25), 0.5) == B_BETTER


def test_an_interval_touching_zero_does_not_know_the_sign() -> None:
    assert compare_decided(Bounds(-0.2, 0.0, 50, -0.1), 0.0) is None
    assert compare_decided(Bounds(0.0, 0.0, 50, 0.0), 0.0) is None  # no margin: never within


def test_a_cases_unit_reads_any_iterable() -> None:
    assert case_unit(iter([True, False])) == 0.5


def _median_stop(rng: np.random.Generator, draw, target: float | None, rule) -> float:  # type: ignore[no-untyped-def]
    stops = []
    for _ in range(25):
        sequence = ConfidenceSequence(0.95, target=target)
        while sequence.n == 0 or rule(sequence.bounds()) is None:
            sequence.add(draw(rng))
        stops.append(sequence.n)
    return statistics.median(stops)


def test_the_default_bets_estimate_is_near_the_median_stop() -> None:
    from batch.stop_when.estimate import cases_needed

    rng = np.random.default_rng(6)
    median = _median_stop(
        rng, lambda r: float(r.random() < 0.8), None, lambda b: half_width_reached(b, 0.08)
    )
    estimate = cases_needed(0.8, 0.16, 0.08, 0.95, aimed=False)
    assert estimate is not None and 0.85 * median <= estimate <= 1.3 * median


@pytest.mark.parametrize(("a", "b"), [(0.5, 0.8), (0.8, 0.6)])
def test_a_compares_estimate_is_near_the_median_stop(a: float, b: float) -> None:
    rng = np.random.default_rng(7)

    def pair(r: np.random.Generator) -> float:  # B - A of one case, as the unit value
        return ((r.random() < b) - (r.random() < a) + 1) / 2

    def rule(bounds: Bounds) -> str | None:
        return compare_decided(bounds.as_difference(), 0.01)

    median = _median_stop(rng, pair, None, rule)
    variance = a * (1 - a) + b * (1 - b)
    estimate = compare_cases_needed(b - a, variance, 0.01, 0.95)
    assert estimate is not None and 0.7 * median <= estimate <= 1.5 * median


def test_a_target_too_far_gives_no_estimate() -> None:
    from batch.stop_when.estimate import LIMIT

    assert LIMIT == 1_000_000
    assert rate_cases_needed(0.5, 0.0005, 0.95) is None  # past a million cases
    assert rate_cases_needed(0.5, 0.02, 0.95) is not None


def test_one_value_may_already_stop_a_wide_target() -> None:
    assert half_width_reached(Bounds(0.4, 0.6, 1, 0.5), 0.2) == REACHED_HALF_WIDTH
