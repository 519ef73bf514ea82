"""The interval estimators of ``batch.stats.intervals`` against reference computations:
Wilson against statsmodels, the effective sample size against statsmodels' cluster-robust
standard error, Newcombe's paired interval against its formula over a 2 x 2 table built
from statsmodels' Wilson intervals, Holm against statsmodels' ``multipletests``, the t
interval against scipy."""

from __future__ import annotations

import gc
import math
import random

import pytest
from helpers.interval_reference import effective_interval
from helpers.interval_reference import wilson as reference_wilson
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as scipy_stats
from statsmodels.stats.multitest import multipletests

from batch.stats.intervals import (
    NEWCOMBE,
    NEWCOMBE_CLUSTERED,
    WILSON,
    WILSON_CLUSTERED,
    clustered_proportion,
    holm,
    incomplete_beta,
    paired_difference,
    t_mean,
    t_quantile,
    unit_clusters,
    wilson,
)


@pytest.mark.parametrize("n", [1, 2, 5, 10, 12, 40, 1000])
def test_wilson_is_statsmodels(n: int) -> None:
    for x in range(n + 1):
        assert wilson(x, n) == pytest.approx(reference_wilson(x, n), abs=1e-12)


def test_12_of_12_is_not_certainty() -> None:
    low, high = wilson(12, 12)
    assert high == 1.0 and low == pytest.approx(0.757506, abs=1e-6)


def cluster_counts(per_case: list[tuple[int, int]]) -> dict[tuple[float, float], int]:
    counts: dict[tuple[float, float], int] = {}
    for passed, samples in per_case:
        key = (float(passed), float(samples))
        counts[key] = counts.get(key, 0) + 1
    return counts


@given(st.lists(st.booleans(), min_size=2, max_size=60))
def test_one_sample_a_case_is_the_wilson_interval_of_the_cases(outcomes: list[bool]) -> None:
    got = clustered_proportion(cluster_counts([(int(o), 1) for o in outcomes]), len(outcomes))
    assert got is not None and got.method == WILSON and got.clusters == len(outcomes)
    expected = reference_wilson(sum(outcomes), len(outcomes))
    assert (got.low, got.high) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed", range(12))
def test_repeats_get_wilson_on_the_effective_sample_size_of_statsmodels_clusters(
    seed: int,
) -> None:
    rng = random.Random(seed)
    cases = rng.choice([5, 10, 40])
    per_case = []
    for _ in range(cases):
        samples = rng.choice([3, 4, 5])
        p = rng.betavariate(2, 1)
        per_case.append((sum(rng.random() < p for _ in range(samples)), samples))
    total = sum(samples for _, samples in per_case)
    if sum(passed for passed, _ in per_case) in (0, total):
        pytest.skip("drawn at the bound; covered by its own test")  # never, for these seeds
    got = clustered_proportion(cluster_counts(per_case), total)
    assert got is not None and got.method == WILSON_CLUSTERED
    assert got.estimate == pytest.approx(sum(p for p, _ in per_case) / total)
    assert (got.low, got.high) == pytest.approx(effective_interval(per_case)[1:], abs=1e-9)


def test_every_case_at_the_bound_counts_as_many_samples_as_cases() -> None:
    # 12 cases x 4 samples, all passed: nothing says how much the cases differ, so the
    # interval is the Wilson interval of 12 cases, not of 48 samples.
    got = clustered_proportion(cluster_counts([(4, 4)] * 12), 48)
    assert got is not None and (got.low, got.high) == pytest.approx(reference_wilson(12, 12))
    none = clustered_proportion(cluster_counts([(0, 4)] * 12), 48)
    assert none is not None and (none.low, none.high) == pytest.approx(reference_wilson(0, 12))


def test_agreeing_cases_never_count_for_more_than_their_samples() -> None:
    # Every case 3 of 4: no spread between cases (variance 0), so the samples are all the
    # information there is: Wilson of 30 of 40.
    got = clustered_proportion(cluster_counts([(3, 4)] * 10), 40)
    assert got is not None and (got.low, got.high) == pytest.approx(reference_wilson(30, 40))


def test_one_case_is_its_samples() -> None:
    got = clustered_proportion(cluster_counts([(3, 4)]), 4)
    assert got is not None and (got.low, got.high) == pytest.approx(reference_wilson(3, 4))
    assert clustered_proportion({}, 0) is None


def reference_newcombe(a: list[int], b: list[int]) -> tuple[float, float]:
    """Newcombe's paired interval of B - A from the 2 x 2 table of 0/1 columns, as R's
    MKinfer ``binomDiffCI(paired = TRUE, method = "wilson-cc")`` writes it: statsmodels'
    Wilson interval of each margin and phi with the continuity correction."""
    n = len(a)
    both = sum(x and y for x, y in zip(a, b, strict=True))
    b_only = sum(y and not x for x, y in zip(a, b, strict=True))
    a_only = sum(x and not y for x, y in zip(a, b, strict=True))
    neither = n - both - b_only - a_only
    # Newcombe's "first" proportion is B's here: d = p1 - p2 = B - A.
    p1, p2 = (both + b_only) / n, (both + a_only) / n
    l1, u1 = reference_wilson(both + b_only, n)
    l2, u2 = reference_wilson(both + a_only, n)
    margins = (both + b_only) * (a_only + neither) * (both + a_only) * (b_only + neither)
    if margins == 0:
        phi = 0.0
    else:
        cross = both * neither - b_only * a_only
        phi = (cross if cross <= 0 else max(cross - n / 2, 0)) / math.sqrt(margins)
    d = p1 - p2
    low = d - math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    high = d + math.sqrt((p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2)
    return low, high


@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=2, max_size=50))
def test_one_sample_a_side_is_newcombes_paired_interval(pairs: list[tuple[bool, bool]]) -> None:
    a = [int(x) for x, _ in pairs]
    b = [int(y) for _, y in pairs]
    got = paired_difference([float(x) for x in a], [float(y) for y in b], (len(a), len(b)))
    assert got is not None and got.method == NEWCOMBE and got.clusters == len(pairs)
    assert got.estimate == pytest.approx((sum(b) - sum(a)) / len(a))
    assert (got.low, got.high) == pytest.approx(reference_newcombe(a, b), abs=1e-9)
    assert got.low is not None and got.high is not None and got.high - got.low > 0


def test_two_models_that_agree_on_every_case_are_not_shown_as_equal_for_sure() -> None:
    # The issue's +0.0 pp (+0.0 to +0.0): 12 cases both passed.
    got = paired_difference([1.0] * 12, [1.0] * 12, (12, 12))
    assert got is not None and got.estimate == 0.0
    low, _ = reference_wilson(12, 12)
    assert (got.low, got.high) == pytest.approx((-(1 - low), 1 - low))
    # Half passed by both, half by neither: phi = 1 would make it zero-width without the
    # continuity correction.
    half = paired_difference([1.0, 0.0] * 6, [1.0, 0.0] * 6, (12, 12))
    assert half is not None and half.low is not None and half.high is not None
    assert half.low < -0.05 and half.high > 0.05


def test_repeats_pair_the_case_means_with_each_sides_effective_interval() -> None:
    rng = random.Random(5)
    a = [rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]) for _ in range(30)]
    b = [min(1.0, x + rng.choice([0.0, 0.25])) for x in a]
    got = paired_difference(a, b, (120.0, 120.0))
    assert got is not None and got.method == NEWCOMBE_CLUSTERED
    side_a = clustered_proportion(unit_clusters(a), 120.0)
    side_b = clustered_proportion(unit_clusters(b), 120.0)
    assert side_a is not None and side_b is not None
    r = float(scipy_stats.pearsonr(a, b).statistic)
    # the continuity correction: 1/2 off the sum of cross products
    sxy = sum((x - side_a.estimate) * (y - side_b.estimate) for x, y in zip(a, b, strict=True))
    sxx = sum((x - side_a.estimate) ** 2 for x in a)
    syy = sum((y - side_b.estimate) ** 2 for y in b)
    assert sxy / math.sqrt(sxx * syy) == pytest.approx(r)
    r_cc = (sxy - 0.5) / math.sqrt(sxx * syy)
    down_b, up_a = side_b.estimate - side_b.low, side_a.high - side_a.estimate  # type: ignore[operator]
    d = side_b.estimate - side_a.estimate
    assert got.low == pytest.approx(d - math.sqrt(down_b**2 - 2 * r_cc * down_b * up_a + up_a**2))
    # paired: narrower than the two sides' intervals would make it independently
    assert got.low > d - math.hypot(down_b, up_a)


def test_no_shared_case_has_no_difference() -> None:
    assert paired_difference([], [], (0, 0)) is None


def statsmodels_holm(pvalues: list[float]) -> list[float]:
    """statsmodels' Holm-adjusted p-values. Its Holm branch ends in ``gc.collect()`` (to free
    big arrays), which in a test process holding scipy, statsmodels and the suite walks every
    object alive: 0.05-0.3 s a call. What is alive before the call is frozen for it (as
    ``run_support.heap`` does), so the collection walks only what the call made."""
    gc.freeze()
    try:
        return list(multipletests(pvalues, alpha=0.05, method="holm")[1])
    finally:
        gc.unfreeze()


@given(st.lists(st.floats(0, 1), min_size=1, max_size=30))
def test_holm_is_statsmodels(pvalues: list[float]) -> None:
    expected = statsmodels_holm(pvalues)
    assert holm(pvalues) == pytest.approx(expected, abs=1e-12)


def test_the_t_interval_of_unbounded_scores_is_scipys() -> None:
    rng = random.Random(7)
    values = [rng.gauss(5, 3) for _ in range(25)]
    got = t_mean(values)
    assert got is not None
    mean = sum(values) / len(values)
    half = scipy_stats.t.ppf(0.975, len(values) - 1) * scipy_stats.sem(values)
    assert (got.low, got.high) == (pytest.approx(mean - half), pytest.approx(mean + half))
    # Nothing bounds such values: equal ones give no interval rather than one of zero width.
    assert t_mean([2.0, 2.0, 2.0]) == t_mean([2.0, 2.0, 2.0])
    same = t_mean([2.0, 2.0, 2.0])
    assert same is not None and (same.low, same.high) == (None, None)
    assert t_mean([]) is None


@pytest.mark.parametrize("df", [1, 2, 3, 9, 39, 1000])
def test_t_quantile_is_scipys(df: int) -> None:
    assert t_quantile(0.975, df) == pytest.approx(scipy_stats.t.ppf(0.975, df), rel=1e-9)


def test_the_incomplete_beta_is_scipys_and_ends_at_0_and_1() -> None:
    for x, a, b in ((0.3, 2.0, 3.0), (0.9, 0.5, 4.5), (0.5, 100.0, 101.0)):
        assert incomplete_beta(x, a, b) == pytest.approx(scipy_stats.beta.cdf(x, a, b), rel=1e-9)
    assert incomplete_beta(-0.5, 2.0, 3.0) == 0.0 and incomplete_beta(1.5, 2.0, 3.0) == 1.0
