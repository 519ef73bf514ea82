"""Statistics of repeated samples: pass@k, pass^k, flaky cases, paired comparisons, scores.

Pure functions over plain numbers (docs/stats.md, "Repeats"). A sweep with ``repeats: N``
samples every case x model N times; the case is then the unit of analysis and its repeats
one cluster, because two samples of one case are not independent evidence about a model.

- Per case ``i`` of a group: ``n_i`` samples that ended with a model outcome (``passed`` or
  ``failed``; a non-model ``error`` is left out and counted) of which ``c_i`` passed.
- ``pass@k`` (HumanEval's unbiased estimator, Chen et al. 2021, "Evaluating Large Language
  Models Trained on Code", eq. 1): per case ``1 - C(n-c, k) / C(n, k)``, the chance that
  at least one of k samples drawn without replacement from its n passes; averaged over
  cases. ``pass@1`` is the mean over cases of ``c_i / n_i``.
- ``pass^k`` (τ-bench, Yao et al. 2024, "τ-bench: A Benchmark for Tool-Agent-User
  Interaction in Real-World Domains", sec. 5): per case ``C(c, k) / C(n, k)``, the chance
  that all k samples pass; averaged over cases.
- k runs from 1 to the smallest ``n_i`` of the group's cases with any sample, so every case
  weighs in every figure and the curve compares like with like.
- Each mean over cases gets a 95% interval from the clustered standard error: the per-case
  values ``x_i`` are independent across cases (the clusters), so the mean's standard error
  is ``s / sqrt(m)`` with ``s`` their sample standard deviation and ``m`` the number of
  cases, and the interval is ``mean ± t(0.975, m-1) · s / sqrt(m)``, cut to [0, 1] for a
  rate. This is the cluster-robust (CR1) standard error of an intercept-only regression on
  the case means, with Student's t on m - 1 degrees of freedom as for any clustered
  estimate with few clusters.
- Paired comparisons over the cases both sides have: per-case differences ``d_i`` of the
  case means, their mean, and the same t interval (the paired t interval); with one sample
  per case also McNemar's exact test on the discordant cases.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import chain, compress, repeat
from operator import and_, itemgetter, lt, sub, truediv
from typing import Any, NamedTuple

import attrs

#: Two-sided 95%.
CONFIDENCE = 0.95


class CaseSamples(NamedTuple):
    """One case's samples in one group: its model outcomes, its errors, its scores.

    A named tuple rather than an attrs class: a batch of 10,000 cases x 10 models makes
    100,000 of them, made from columns at once (``CaseSamples._make``) and read a field at a
    time by ``itemgetter``, both in C (bench/README.md, ``repeats_scale.py``).
    """

    case: str
    #: Samples that ended ``passed`` or ``failed`` (the model's outcomes).
    finished: int
    passed: int
    #: Samples that ended in a non-model ``error``: in no rate, counted.
    errors: int = 0
    #: The scores the finished samples reported (``result.json`` ``score``), if any.
    scores: tuple[float, ...] = ()

    @property
    def flaky(self) -> bool:
        """Passed some of its samples but not all."""
        return 0 < self.passed < self.finished


def pass_at_k(n: int, c: int, k: int) -> float:
    """``1 - C(n-c, k) / C(n, k)``: at least one of k of the n samples passes (exact: the
    quotient of two integers, which Python rounds once, correctly, as a ``Fraction`` would)."""
    _check(n, c, k)
    draws = math.comb(n, k)
    return (draws - math.comb(n - c, k)) / draws


def pass_hat_k(n: int, c: int, k: int) -> float:
    """``C(c, k) / C(n, k)``: all k of the n samples pass (exact, as :func:`pass_at_k`)."""
    _check(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _check(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")


@attrs.frozen
class Estimate:
    """A mean over clusters with its 95% interval; ``low``/``high`` None with one cluster."""

    estimate: float
    low: float | None
    high: float | None
    clusters: int

    def to_json(self, digits: int = 6) -> dict[str, Any]:
        return {
            "estimate": round(self.estimate, digits),
            "low": None if self.low is None else round(self.low, digits),
            "high": None if self.high is None else round(self.high, digits),
            "cases": self.clusters,
        }


def clustered_mean(values: Iterable[float], *, bounded: bool = True) -> Estimate | None:
    """The mean of per-cluster values with the t interval of its clustered standard error
    (``mean ± t(0.975, m-1) · s / sqrt(m)``); ``bounded``: cut to [0, 1]. None for none."""
    return counted_mean(Counter(values), bounded=bounded)


def counted_mean(counts: Mapping[float, int], *, bounded: bool = True) -> Estimate | None:
    """:func:`clustered_mean` of the values ``counts`` holds, each as many times as it says.

    A rate per case takes a few values (pass@k of n = 5 samples: at most 6), so a group of
    100,000 cases costs as much as its distinct values; the sums are the same ``fsum`` calls
    over the same values, so the figures are those of the list, to the last bit.
    """
    m = sum(counts.values())
    if m == 0:
        return None
    mean = math.fsum(_each(counts.keys(), counts)) / m
    if m == 1:
        return Estimate(mean, None, None, 1)
    deviations = [(x - mean) ** 2 for x in counts]
    variance = math.fsum(_each(deviations, counts)) / (m - 1)
    half = t_quantile(0.5 + CONFIDENCE / 2, m - 1) * math.sqrt(variance / m)
    low, high = mean - half, mean + half
    if bounded:
        low, high = max(0.0, low), min(1.0, high)
    return Estimate(mean, low, high, m)


#: The largest k reported. pass@k is published up to 100 (HumanEval: k = 1, 10, 100 of
#: n = 200); past it the curve is flat for any case that ever passed, and bounding it
#: bounds the work whatever a summary holds (a hostile one: a million rows of one case).
MAX_K = 100


def _each(values: Iterable[float], counts: Mapping[float, int]) -> Iterator[float]:
    """Each of ``values`` as many times as the count of the key in its place."""
    return chain.from_iterable(map(repeat, values, counts.values()))


def max_k(cases: Iterable[CaseSamples]) -> int:
    """The largest k every case with a sample can be drawn for: the smallest ``n_i``, at
    most :data:`MAX_K`."""
    sizes = [case.finished for case in cases if case.finished]
    return min(min(sizes), MAX_K) if sizes else 0


_FINISHED = itemgetter(1)
_PASSED = itemgetter(2)
_OUTCOMES = itemgetter(1, 2)
_ERRORS = itemgetter(3)
_SCORES = itemgetter(4)


def repeat_stats(cases: Sequence[CaseSamples]) -> dict[str, Any]:
    """A group's figures: samples per case, ``pass_at_k`` and ``pass_hat_k`` keyed by k as
    a string, each an estimate with its interval, the flaky cases, the score's mean."""
    # Field by field in C: a group may hold 500,000 cases (one sample of 50,000 cases x 10
    # models, overall).
    sampled = list(compress(cases, map(_FINISHED, cases)))
    top = max_k(sampled)
    sizes = list(map(_FINISHED, sampled))
    stats: dict[str, Any] = {
        "cases_sampled": len(sampled),
        "samples": sum(sizes),
        "samples_per_case": {"min": min(sizes), "max": max(sizes)} if sizes else None,
        "error_samples": sum(map(_ERRORS, cases)),
        "k_max": top,
        "pass_at_k": {},
        "pass_hat_k": {},
    }
    # Cases with the same (n, c) have the same figure for every k: each is computed once.
    outcomes = Counter(map(_OUTCOMES, sampled))
    for k in range(1, top + 1):
        at = counted_mean(_per_value(pass_at_k, outcomes, k))
        hat = counted_mean(_per_value(pass_hat_k, outcomes, k))
        assert at is not None and hat is not None
        stats["pass_at_k"][str(k)] = at.to_json()
        stats["pass_hat_k"][str(k)] = hat.to_json()
    passed = list(map(_PASSED, sampled))
    some = map(lt, repeat(0), passed)
    flaky = list(compress(sampled, map(and_, some, map(lt, passed, sizes))))
    stats["flaky_cases"] = [case.case for case in flaky]
    stats["flaky"] = [
        {"case": case.case, "passed": case.passed, "samples": case.finished} for case in flaky
    ]
    scored = list(filter(None, map(_SCORES, cases)))
    score = clustered_mean(map(truediv, map(math.fsum, scored), map(len, scored)), bounded=False)
    stats["score"] = None if score is None else score.to_json()
    return stats


def _per_value(
    figure: Callable[[int, int, int], float], outcomes: Mapping[tuple[int, int], int], k: int
) -> dict[float, int]:
    """How many cases have each value of ``figure(n, c, k)``, from the cases per (n, c)."""
    counts: dict[float, int] = {}
    for (n, c), cases in outcomes.items():
        value = figure(n, c, k)
        counts[value] = counts.get(value, 0) + cases
    return counts


# --- paired comparisons ---------------------------------------------------------------------


def paired_difference(
    a: Mapping[str, float], b: Mapping[str, float], *, bounded: bool = True
) -> dict[str, Any] | None:
    """B - A over the cases both have: the mean of the per-case differences of their case
    means, with the paired t interval (``mean ± t(0.975, m-1) · s_d / sqrt(m)``); cut to
    [-1, 1] when ``bounded`` (rates). None when no case is shared."""
    return difference_estimate(shared_differences(a, b), bounded=bounded)


def shared_differences(a: Mapping[str, float], b: Mapping[str, float]) -> list[float]:
    """``b[case] - a[case]`` for every case both have, in no particular order."""
    if list(a) == list(b):  # nearly always: two models of one sweep, the same cases in order
        return list(map(sub, b.values(), a.values()))
    shared = a.keys() & b.keys()
    return list(map(sub, map(b.__getitem__, shared), map(a.__getitem__, shared)))


def difference_estimate(
    differences: Sequence[float], *, bounded: bool = True
) -> dict[str, Any] | None:
    """:func:`paired_difference` of the per-case differences it takes."""
    estimate = clustered_mean(differences, bounded=False)
    if estimate is None:
        return None
    low, high = estimate.low, estimate.high
    if bounded and low is not None and high is not None:
        low, high = max(-1.0, low), min(1.0, high)
    return attrs.evolve(estimate, low=low, high=high).to_json()


#: Up to this many discordant cases the binomial tail is summed exactly (in integers); past
#: it, the sum's cost grows with the square of the count, for every pair of models
#: (bench/repeats_scale.py), and the tail is the incomplete beta function.
EXACT_TAIL_UP_TO = 2_000


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """McNemar's exact test: the two-sided p-value that the ``a_only`` cases A passed and B
    failed, against the ``b_only`` the other way, are Binomial(a_only + b_only, 1/2)
    (``min(1, 2 · P(X <= min(a_only, b_only)))``; McNemar 1947, the exact form).

    Up to :data:`EXACT_TAIL_UP_TO` discordant cases the tail is an exact sum of binomial
    coefficients, rounded once; past it, ``P(X <= m) = I_{1/2}(n - m, m + 1)``, the
    regularized incomplete beta function (Abramowitz and Stegun 26.5.24), whose relative
    error there is below 1e-10 (its log-gamma terms are that large), where the exact sum of
    20,000 discordant cases would take a tenth of a second.
    """
    discordant = a_only + b_only
    fewer = min(a_only, b_only)
    if discordant > EXACT_TAIL_UP_TO:
        return min(1.0, 2 * _incomplete_beta(0.5, discordant - fewer, fewer + 1))
    # C(n, 0) + ... + C(n, m), each term exactly from the one before.
    term = tail = 1
    for i in range(fewer):
        term = term * (discordant - i) // (i + 1)
        tail += term
    # One integer quotient, rounded once (correctly) to a float.
    return min(1.0, 2 * tail / (1 << discordant))


# --- Student's t ----------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (``p`` > 0.5), by
    bisection on its CDF (the regularized incomplete beta; Numerical Recipes 6.4). Kept
    per (p, df): a batch asks for the same few (every figure of a group has its cases - 1
    degrees of freedom), each some 50 evaluations of the CDF."""
    if not 0.5 < p < 1 or df < 1:
        raise ValueError(f"need 0.5 < p < 1 and df >= 1, got p={p}, df={df}")
    low, high = 0.0, 1.0
    while _t_cdf(high, df) < p:
        high *= 2
    for _ in range(200):
        middle = (low + high) / 2
        if _t_cdf(middle, df) < p:
            low = middle
        else:
            high = middle
        if high - low < 1e-12 * max(1.0, high):
            break
    return (low + high) / 2


def _t_cdf(t: float, df: int) -> float:
    """P(T <= t) for t >= 0: ``1 - I_x(df/2, 1/2) / 2`` with ``x = df / (df + t²)``."""
    x = df / (df + t * t)
    return 1.0 - 0.5 * _incomplete_beta(x, df / 2.0, 0.5)


def _incomplete_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta ``I_x(a, b)``, by its continued fraction."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(x, a, b) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(1.0 - x, b, a) / b


def _beta_fraction(x: float, a: float, b: float) -> float:
    """The continued fraction of the incomplete beta (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 10_000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return result
