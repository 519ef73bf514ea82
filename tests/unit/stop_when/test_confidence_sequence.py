"""The confidence sequence of ``stop_when`` against the reference code's formulas, and its
coverage at every n in simulations with a known truth.

``confseq`` (the reference implementation, Waudby-Smith & Ramdas) needs a C++ toolchain
and does not install here, so ``reference_bounds`` is its ``predmix_empbern_twosided_cs``
(with ``lambda_predmix_eb``'s bets, ``truncation=1/2``, ``running_intersection=True``)
written out plainly in numpy, line for line as ``confseq/predmix.py`` and
``confseq/betting_strategies.py`` compute it.
"""

from __future__ import annotations

import numpy as np
import pytest

from batch.stop_when.confidence_sequence import (
    Bounds,
    ConfidenceSequence,
    sequence_bounds,
    to_unit,
)


def _lambdas(x: np.ndarray, alpha: float, target: float | None) -> np.ndarray:
    t = np.arange(1, len(x) + 1)
    mu_hat_t = np.minimum((0.5 + np.cumsum(x)) / (t + 1), 1)
    sigma2_t = (0.25 + np.cumsum((x - mu_hat_t) ** 2)) / (t + 1)
    sigma2_tminus1 = np.append(0.25, sigma2_t[:-1])
    if target is None:
        lambdas = np.sqrt(2 * np.log(1 / alpha) / (t * np.log(1 + t) * sigma2_tminus1))
    else:  # the bets aimed at a half-width (the module's docstring): h / (s2 + h)
        lambdas = target / (sigma2_tminus1 + target)
    return np.minimum(0.5, lambdas)


def _lower(
    x: np.ndarray, alpha: float, population: int | None, target: float | None = None
) -> np.ndarray:
    t = np.arange(1, len(x) + 1)
    s_t = np.cumsum(x)
    s_tminus1 = np.append(0, s_t[:-1])
    mu_hat_tminus1 = np.append(0, (s_t / t)[:-1])
    v = (x - mu_hat_tminus1) ** 2
    if population is None:
        zstar, wstar = 0.0, 0.0
    else:
        zstar = s_tminus1 / (population - t + 1)
        wstar = (t - 1) / (population - t + 1)
    lambdas = _lambdas(x, alpha, target)
    psi = -np.log(1 - lambdas) - lambdas
    margin = (np.log(1 / alpha) + np.cumsum(v * psi)) / np.cumsum(lambdas * (1 + wstar))
    centre = np.cumsum(lambdas * (x + zstar)) / np.cumsum(lambdas * (1 + wstar))
    return np.maximum.accumulate(np.maximum(centre - margin, 0))


def reference_bounds(
    x: np.ndarray, confidence: float, population: int | None, target: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    alpha = 1 - confidence
    low = _lower(x, alpha / 2, population, target)
    high = 1 - _lower(1 - x, alpha / 2, population, target)
    return low, high


@pytest.mark.parametrize("kind", ["binary", "shares", "uniform"])
@pytest.mark.parametrize("confidence", [0.95, 0.9])
def test_the_population_sequence_is_the_reference_codes(kind: str, confidence: float) -> None:
    rng = np.random.default_rng(7)
    x = {
        "binary": (rng.random(400) < 0.8).astype(float),
        "shares": rng.integers(0, 5, 400) / 4,  # 4 repeats a case, averaged
        "uniform": rng.random(400),
    }[kind]
    low, high = reference_bounds(x, confidence, None)
    ours = sequence_bounds(list(x), confidence)
    assert [b.low for b in ours] == pytest.approx(list(low), abs=1e-12)
    assert [b.high for b in ours] == pytest.approx(list(high), abs=1e-12)


@pytest.mark.parametrize("target", [0.03, 0.1])
def test_the_bets_aimed_at_a_target_are_the_reference_codes_with_those_bets(
    target: float,
) -> None:
    rng = np.random.default_rng(9)
    x = rng.integers(0, 3, 500) / 2
    low, high = reference_bounds(x, 0.95, None, target)
    ours = sequence_bounds(list(x), 0.95, target=target)
    assert [b.low for b in ours] == pytest.approx(list(low), abs=1e-12)
    assert [b.high for b in ours] == pytest.approx(list(high), abs=1e-12)


def test_bets_aimed_at_the_target_reach_it_sooner_at_a_rate_near_one_half() -> None:
    rng = np.random.default_rng(10)
    x = list((rng.random(3000) < 0.5).astype(float))
    aimed = next(b.n for b in sequence_bounds(x, 0.95, target=0.05) if b.half_width <= 0.05)
    default = next(b.n for b in sequence_bounds(x, 0.95) if b.half_width <= 0.05)
    assert aimed < 0.7 * default


def test_with_a_case_set_it_is_the_hull_of_both_reference_sequences() -> None:
    rng = np.random.default_rng(8)
    x = (rng.random(300) < 0.7).astype(float)
    low_iid, high_iid = reference_bounds(x, 0.95, None)
    low_wor, high_wor = reference_bounds(x, 0.95, 300)
    ours = sequence_bounds(list(x), 0.95, cases=300)
    assert [b.low for b in ours] == pytest.approx(list(np.minimum(low_iid, low_wor)), abs=1e-12)
    assert [b.high for b in ours] == pytest.approx(list(np.maximum(high_iid, high_wor)), abs=1e-12)
    # Late in the case set the without-replacement side is the narrower: the hull is the
    # population sequence there, never narrower than it.
    assert ours[-1].low == pytest.approx(low_iid[-1])
    assert high_wor[-1] - low_wor[-1] < high_iid[-1] - low_iid[-1]


def _ever_misses(
    truth: float, values: np.ndarray, cases: int | None, target: float | None = None
) -> bool:
    bounds = sequence_bounds(list(values), 0.95, cases, target)
    return any(not b.low <= truth <= b.high for b in bounds)


@pytest.mark.parametrize("target", [None, 0.05])
@pytest.mark.parametrize("rate", [0.5, 0.9, 0.99])
def test_it_covers_the_population_rate_at_every_n(rate: float, target: float | None) -> None:
    # 200 sweeps of 150 cases: a sweep counts as a miss if ANY of its 150 intervals misses.
    rng = np.random.default_rng(int(rate * 1000))
    misses = sum(
        _ever_misses(rate, (rng.random(150) < rate).astype(float), None, target) for _ in range(200)
    )
    assert misses <= 0.05 * 200


def test_it_covers_the_case_sets_rate_at_every_n() -> None:
    # Each sweep: 120 cases drawn from a population at 0.8 (each case its own pass chance,
    # 4 repeats averaged), run in a random order; the truth is the mean of the 120 cases'
    # values, which the population sequence alone does not promise to cover.
    rng = np.random.default_rng(11)
    misses = 0
    for _ in range(150):
        chances = rng.beta(3.2, 0.8, 120)
        values = rng.binomial(4, chances) / 4
        truth = float(values.mean())
        misses += _ever_misses(truth, rng.permutation(values), 120, 0.05)
    assert misses <= 0.05 * 150


def test_a_broken_sequence_would_be_caught() -> None:
    # The same simulation with a fixed-n Wilson interval checked after every case misses in
    # far more than 5 % of sweeps: the coverage test above can fail.
    from batch.stats.intervals import wilson

    rng = np.random.default_rng(12)
    misses = 0
    for _ in range(200):
        x = rng.random(150) < 0.5
        passes = np.cumsum(x)
        misses += any(
            not (lambda lh: lh[0] <= 0.5 <= lh[1])(wilson(float(passes[n - 1]), n))
            for n in range(1, 151)
        )
    assert misses > 0.2 * 200


def test_before_any_value_the_interval_is_everything() -> None:
    sequence = ConfidenceSequence(0.95, cases=10)
    assert sequence.bounds() == Bounds(0.0, 1.0, 0, 0.5)


def test_the_interval_narrows_as_values_come() -> None:
    bounds = sequence_bounds([1.0, 0.0] * 500, 0.95)
    widths = [b.half_width for b in bounds]
    assert widths == sorted(widths, reverse=True)
    assert bounds[-1].low < 0.5 < bounds[-1].high
    assert bounds[-1].half_width < 0.07


def test_a_difference_maps_back_to_minus_one_one() -> None:
    assert to_unit(-1.0) == 0.0 and to_unit(1.0) == 1.0 and to_unit(0.0) == 0.5
    assert Bounds(0.25, 0.75, 3, 0.5).as_difference() == Bounds(-0.5, 0.5, 3, 0.0)


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_a_value_outside_zero_one_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        ConfidenceSequence(0.95).add(bad)


@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5])
def test_a_confidence_outside_zero_one_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="confidence"):
        ConfidenceSequence(bad)


def test_a_target_of_zero_is_refused() -> None:
    with pytest.raises(ValueError, match="target"):
        ConfidenceSequence(0.95, target=0.0)


def test_more_values_than_the_case_set_holds_is_refused() -> None:
    sequence = ConfidenceSequence(0.95, cases=2)
    sequence.add(1.0)
    sequence.add(0.0)
    with pytest.raises(ValueError, match="more values"):
        sequence.add(1.0)


@pytest.mark.parametrize("target", [None, 0.05])
def test_each_side_without_replacement_is_the_reference_codes(target: float | None) -> None:
    # The hull often hides the without-replacement side: checked on its own, bound by bound.
    from batch.stop_when.confidence_sequence import _LowerBound

    rng = np.random.default_rng(13)
    x = rng.integers(0, 5, 250) / 4
    for population in (250, 400):
        side = _LowerBound(0.025, population, target)
        bests = []
        for value in x:
            side.add(float(value))
            bests.append(side.best)
        assert bests == pytest.approx(list(_lower(x, 0.025, population, target)), abs=1e-12)


def test_the_estimate_the_count_and_the_variance_are_the_values() -> None:
    import statistics

    values = [1.0, 0.0, 0.5, 0.25, 1.0]
    sequence = ConfidenceSequence(0.95)
    assert sequence.variance == 0.25  # before two values: the most there can be
    sequence.add(values[0])
    assert sequence.variance == 0.25
    for value in values[1:]:
        sequence.add(value)
    assert sequence.n == 5
    assert sequence.bounds().estimate == pytest.approx(statistics.fmean(values))
    assert sequence.variance == pytest.approx(statistics.variance(values))
    assert Bounds(0.2, 0.5, 5, 0.3).half_width == pytest.approx(0.15)


def test_the_messages_name_the_problem() -> None:
    with pytest.raises(ValueError, match=r"^confidence must be between 0 and 1, got 2$"):
        ConfidenceSequence(2)
    with pytest.raises(ValueError, match=r"^a target half-width must be above 0, got -1$"):
        ConfidenceSequence(0.95, target=-1)
    with pytest.raises(ValueError, match=r"^a value must lie in \[0, 1\], got 2$"):
        ConfidenceSequence(0.95).add(2)
    sequence = ConfidenceSequence(0.95, cases=1)
    sequence.add(0.0)
    with pytest.raises(ValueError, match=r"^more values than the 1 there are$"):
        sequence.add(0.0)


def test_the_method_is_named_as_batch_stats_json_names_it() -> None:
    from batch.stop_when.confidence_sequence import METHOD, METHOD_TEXT

    assert METHOD == "eb-confidence-sequence"  # a format value (docs/stats.md)
    assert METHOD_TEXT.startswith("anytime-valid empirical Bernstein confidence sequence")


def test_the_variance_of_two_values() -> None:
    sequence = ConfidenceSequence(0.95)
    sequence.add(1.0)
    sequence.add(0.0)
    assert sequence.variance == pytest.approx(0.5)
