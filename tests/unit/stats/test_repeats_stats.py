"""The estimators of repeated samples against reference computations: pass@k and pass^k
against a direct count over every k-subset of the samples, their intervals against
statsmodels' Wilson interval, McNemar against ``scipy.stats.binomtest``; and the properties
every reader relies on (pass@k rises with k, pass^k falls, both equal c/n at 1). The interval
estimators themselves: test_intervals.py.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as scipy_stats
from statsmodels.stats.proportion import proportion_confint

from batch.stats.intervals import (
    WILSON,
    WILSON_CLUSTERED,
    Interval,
    incomplete_beta,
    paired_difference,
    t_quantile,
)
from batch.stats.repeats import (
    CaseSamples,
    max_k,
    mcnemar_exact,
    pass_at_k,
    pass_hat_k,
    repeat_stats,
)


def counted(n: int, c: int, k: int) -> tuple[float, float]:
    """(any pass, all pass) over every k-subset of n samples of which c passed: a count."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    any_pass = sum(any(samples[i] for i in s) for s in subsets)
    all_pass = sum(all(samples[i] for i in s) for s in subsets)
    return any_pass / len(subsets), all_pass / len(subsets)


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_and_pass_hat_k_are_the_counts_over_every_subset(n: int) -> None:
    for c in range(n + 1):
        for k in range(1, n + 1):
            at, hat = counted(n, c, k)
            assert pass_at_k(n, c, k) == pytest.approx(at, abs=1e-12)
            assert pass_hat_k(n, c, k) == pytest.approx(hat, abs=1e-12)


@given(st.integers(1, 60).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))))
def test_pass_at_k_rises_and_pass_hat_k_falls_with_k(nc: tuple[int, int]) -> None:
    n, c = nc
    at = [pass_at_k(n, c, k) for k in range(1, n + 1)]
    hat = [pass_hat_k(n, c, k) for k in range(1, n + 1)]
    assert at[0] == pytest.approx(c / n) and hat[0] == pytest.approx(c / n)
    assert all(x <= y + 1e-12 for x, y in itertools.pairwise(at))
    assert all(x >= y - 1e-12 for x, y in itertools.pairwise(hat))
    assert all(0.0 <= v <= 1.0 for v in at + hat)


def test_bad_counts_are_refused() -> None:
    for n, c, k in ((3, 4, 1), (3, 1, 0), (3, 1, 4), (0, 0, 1)):
        with pytest.raises(ValueError):
            pass_at_k(n, c, k)


def wilson_of(count: float, nobs: float) -> tuple[float, float]:
    low, high = proportion_confint(count, nobs, alpha=0.05, method="wilson")
    return float(low), float(high)


def test_repeats_of_a_case_are_one_cluster_not_n_samples() -> None:
    # 10 cases x 5 repeats, each case all-pass or all-fail: 50 samples but 10 clusters; an
    # interval over the 50 samples as if independent would be sqrt(5) times too narrow. The
    # cases are all-or-nothing, so they are worth 10 samples: Wilson of 5 of 10.
    cases = [CaseSamples(f"c{i}", 5, 5 if i < 5 else 0) for i in range(10)]
    figure = repeat_stats(cases)["pass_at_k"]["1"]
    assert figure["estimate"] == 0.5 and figure["cases"] == 10
    assert figure["method"] == WILSON_CLUSTERED
    assert (figure["low"], figure["high"]) == pytest.approx(wilson_of(5, 10), abs=1e-6)


def test_pass_at_k_of_every_case_all_passed_is_not_certain() -> None:
    # The pass@4 of six all-solved cases, 1.0 (1.0, 1.0): Wilson of 6 of 6 cases.
    figures = repeat_stats([CaseSamples(f"c{i}", 4, 4) for i in range(6)])
    for name in ("pass_at_k", "pass_hat_k"):
        for figure in figures[name].values():
            assert figure["estimate"] == 1.0
            assert (figure["low"], figure["high"]) == pytest.approx(wilson_of(6, 6), abs=1e-6)


def test_pass_hat_k_of_all_the_samples_is_a_proportion_of_cases() -> None:
    # pass^4 of 4 samples is 1 or 0 per case: a binomial count of cases, Wilson's interval.
    cases = [CaseSamples(f"c{i}", 4, 4 if i < 7 else 2) for i in range(10)]
    figure = repeat_stats(cases)["pass_hat_k"]["4"]
    assert figure["estimate"] == pytest.approx(0.7) and figure["method"] == WILSON
    assert (figure["low"], figure["high"]) == pytest.approx(wilson_of(7, 10), abs=1e-6)


def test_a_group_of_known_answer() -> None:
    cases = [
        CaseSamples("a", 4, 4),  # always passes
        CaseSamples("b", 4, 2, errors=1),  # flaky: 2 of 4, one sample lost to an error
        CaseSamples("c", 3, 0, errors=1),  # never, and only 3 model outcomes
        CaseSamples("d", 0, 0, errors=4),  # every sample an error: in no rate
    ]
    got = repeat_stats(cases)
    assert got["cases_sampled"] == 3 and got["samples"] == 11 and got["error_samples"] == 6
    assert got["samples_per_case"] == {"min": 3, "max": 4}
    assert got["k_max"] == 3  # case c has 3: k is bounded by the smallest n
    assert list(got["pass_at_k"]) == ["1", "2", "3"]
    # pass@2: a 1, b 1 - C(2,2)/C(4,2) = 5/6, c 0; pass^2: a 1, b C(2,2)/C(4,2) = 1/6, c 0.
    assert got["pass_at_k"]["2"]["estimate"] == pytest.approx((1 + 5 / 6 + 0) / 3, abs=1e-6)
    assert got["pass_hat_k"]["2"]["estimate"] == pytest.approx((1 + 1 / 6 + 0) / 3, abs=1e-6)
    assert got["pass_at_k"]["1"]["estimate"] == pytest.approx((1 + 0.5 + 0) / 3, abs=1e-6)
    assert got["flaky_cases"] == ["b"]
    assert got["flaky"] == [{"case": "b", "passed": 2, "samples": 4}]
    assert max_k(cases) == 3


def test_k_stops_at_100_however_many_samples_every_case_has() -> None:
    # A summary no driver wrote may hold a million rows of one case; k must not follow.
    cases = [CaseSamples("a", 1_000_000, 999_999), CaseSamples("b", 150, 0)]
    got = repeat_stats(cases)
    assert got["k_max"] == 100 and list(got["pass_at_k"]) == [str(k) for k in range(1, 101)]
    # a: 1 - C(1, 100)/C(10^6, 100) = 1 (one failure cannot fill 100 draws); b: 0.
    assert got["pass_at_k"]["100"]["estimate"] == 0.5
    # pass^100 of a: C(999999, 100)/C(10^6, 100) = (10^6 - 100)/10^6.
    assert got["pass_hat_k"]["100"]["estimate"] == pytest.approx((1 - 100 / 1e6) / 2, abs=1e-6)


def test_scores_are_averaged_per_case_then_over_cases() -> None:
    cases = [
        CaseSamples("a", 2, 1, scores=(0.2, 0.4)),
        CaseSamples("b", 3, 3, scores=(1.0, 1.0, 1.0)),
        CaseSamples("c", 1, 0),
    ]
    score = repeat_stats(cases)["score"]
    assert score["estimate"] == pytest.approx(0.65) and score["cases"] == 2


@given(st.integers(0, 40), st.integers(0, 40))
def test_mcnemar_exact_is_scipys_binomial_test(a_only: int, b_only: int) -> None:
    expected = (
        1.0 if a_only + b_only == 0 else scipy_stats.binomtest(a_only, a_only + b_only).pvalue
    )
    assert mcnemar_exact(a_only, b_only) == pytest.approx(expected, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize(
    ("a_only", "b_only"),
    [(900, 1100), (1000, 1000), (999, 1002), (2000, 2500), (10_000, 10_500), (50, 3000)],
)
def test_mcnemar_exact_of_many_discordant_cases_is_scipys(a_only: int, b_only: int) -> None:
    # Around and past EXACT_TAIL_UP_TO, where the exact sum gives way to the beta function.
    expected = scipy_stats.binomtest(a_only, a_only + b_only).pvalue
    assert mcnemar_exact(a_only, b_only) == pytest.approx(expected, rel=1e-9, abs=1e-300)


# --- edges the tests above do not reach -----------------------------------------------------


@pytest.mark.parametrize(("passed", "flaky"), [(0, False), (1, True), (2, True), (3, False)])
def test_a_case_is_flaky_when_it_passed_some_of_its_samples_but_not_all(
    passed: int, flaky: bool
) -> None:
    assert CaseSamples("c", 3, passed).flaky is flaky
    assert repeat_stats([CaseSamples("c", 3, passed)])["flaky_cases"] == (["c"] if flaky else [])
    assert CaseSamples("c", 0, 0).flaky is False


def test_bad_counts_are_refused_by_both_figures_with_the_counts() -> None:
    message = r"^need 0 <= c <= n and 1 <= k <= n, got n=3, c=4, k=1$"
    for figure in (pass_at_k, pass_hat_k):
        with pytest.raises(ValueError, match=message):
            figure(3, 4, 1)


def test_no_case_with_a_sample_has_no_k() -> None:
    assert max_k([]) == 0
    assert max_k([CaseSamples("c", 0, 0, errors=2)]) == 0
    got = repeat_stats([CaseSamples("c", 0, 0, errors=2)])
    assert got["k_max"] == 0 and got["pass_at_k"] == {} and got["samples_per_case"] is None


def test_a_mean_score_outside_0_and_1_has_the_t_interval() -> None:
    cases = [CaseSamples(f"c{i}", 1, 1, scores=(float(s),)) for i, s in enumerate((2, 9, 4))]
    score = repeat_stats(cases)["score"]
    half = scipy_stats.t.ppf(0.975, 2) * scipy_stats.sem([2, 9, 4])
    assert score["estimate"] == 5.0 and score["method"] == "t"
    assert (score["low"], score["high"]) == pytest.approx((5 - half, 5 + half), abs=1e-6)


def test_a_mean_score_in_0_and_1_is_a_proportion_of_the_cases() -> None:
    # One score a case, every one 1.0: Wilson of 3 of 3 cases, not the certainty of (1, 1).
    cases = [CaseSamples(f"c{i}", 1, 1, scores=(1.0,)) for i in range(3)]
    score = repeat_stats(cases)["score"]
    assert score["estimate"] == 1.0 and score["method"] == WILSON
    assert (score["low"], score["high"]) == pytest.approx(wilson_of(3, 3), abs=1e-6)


def test_estimates_are_rounded_to_6_digits_and_name_their_method() -> None:
    got = Interval(2 / 3, 0.2, 0.9, 3, WILSON).to_json()
    assert got == {"estimate": 0.666667, "low": 0.2, "high": 0.9, "cases": 3, "method": WILSON}
    assert Interval(2 / 3, None, None, 1, "t").to_json(digits=2)["estimate"] == 0.67


def test_the_paired_interval_is_narrower_than_two_independent_ones() -> None:
    # Two models measured on the same cases differ by less noise than their separate
    # intervals suggest when the cases' difficulty is shared.
    rng = random.Random(11)
    hard = [rng.random() for _ in range(50)]
    a = [float(h > 0.5) for h in hard]
    b = [float(h > 0.45) for h in hard]
    paired = paired_difference(a, b, (50, 50))
    ea, eb = wilson_of(sum(a), 50), wilson_of(sum(b), 50)
    assert paired is not None and paired.low is not None and paired.high is not None
    assert paired.high - paired.low < math.hypot(ea[1] - ea[0], eb[1] - eb[0])


def test_mcnemar_of_as_many_cases_each_way_is_1() -> None:
    assert mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(0, 0) == 1.0


def test_mcnemar_up_to_the_threshold_is_the_exact_sum() -> None:
    # 2,000 discordant cases: the binomial tail summed in integers, rounded once.
    tail = sum(math.comb(2000, i) for i in range(901))
    assert mcnemar_exact(900, 1100) == 2 * tail / 2**2000


def test_t_quantile_near_the_median_and_its_bad_arguments() -> None:
    for p in (0.6, 0.7):  # quantiles below 1: the bisection starts at 0
        assert t_quantile(p, 1_000_000) == pytest.approx(scipy_stats.t.ppf(p, 1_000_000), rel=1e-6)
    for p, df in ((0.5, 3), (1.0, 3), (0.4, 3), (0.975, 0)):
        with pytest.raises(
            ValueError, match=rf"^need 0.5 < p < 1 and df >= 1, got p={p}, df={df}$"
        ):
            t_quantile(p, df)


def test_the_incomplete_beta_at_its_ends() -> None:
    assert incomplete_beta(0.0, 2.0, 3.0) == 0.0
    assert incomplete_beta(-0.5, 2.0, 3.0) == 0.0
    assert incomplete_beta(1.0, 2.0, 3.0) == 1.0
    assert incomplete_beta(1.5, 2.0, 3.0) == 1.0


def test_mcnemar_of_many_cases_as_many_each_way_is_1() -> None:
    assert mcnemar_exact(1500, 1500) == 1.0  # past EXACT_TAIL_UP_TO
