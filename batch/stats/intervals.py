"""The 95% intervals of ``batch stats``: plain functions over plain numbers, no state.

The target of every figure is its mean over the population of cases the batch's cases were
drawn from (Miller 2024, "Adding Error Bars to Evals"): a case's repeats are one *cluster*,
and a batch of 12 cases says what 12 cases can, however often each was sampled. Every
interval here holds its 95 % in simulation at 10 cases and more, rates from 0.03 to 0.97 and
1 or 4 samples a case (``bench/coverage.py``); none has zero width from a finite sample.

- :func:`wilson` — the Wilson score interval of a binomial proportion (Wilson 1927), which
  stays inside [0, 1] and keeps its width at 0/n and n/n.
- :func:`clustered_proportion` — a mean of values in [0, 1] over clusters (a pass rate with
  repeats, pass@k, pass^k, a score in [0, 1]): Wilson on an *effective sample size* (Kish's
  design effect; Korn & Graubard 1998, "Confidence intervals for proportions with small
  expected number of positive counts estimated from survey data"). ``n_eff = p(1-p) / v``,
  ``v`` the cluster-robust variance of the mean (the ratio estimator's, CR1), shrunk by
  ``(z / t(m-1))²`` for the few clusters its variance is estimated from, and held between the
  number of clusters (every case all-or-nothing: the least a case can tell) and the
  ``ceiling`` the caller gives (every sample independent). At an estimate of 0 or 1 the
  spread between cases is unknown and ``n_eff`` is the number of clusters. With one sample a
  case it is the Wilson interval of the cases.
- :func:`paired_difference` — B - A over shared cases: Newcombe's hybrid score interval for
  paired proportions (Newcombe 1998, "Improved confidence intervals for the difference
  between binomial proportions based on paired data", method 10: each side's Wilson interval
  combined with the correlation of the pairs), phi continuity-corrected as in R's
  ``MKinfer::binomDiffCI(paired = TRUE)``, so that two models agreeing on every case keep a
  width; each side's interval is :func:`clustered_proportion`'s and the correlation that of
  the case means. With one sample a case it is that 2 x 2 table interval exactly (the
  correlation of two 0/1 columns is their phi coefficient).
- :func:`t_mean` — the t interval of a mean of unbounded values (scores outside [0, 1]):
  nothing bounds them, so nothing better is known without assumptions.
- :func:`holm` — Holm's step-down adjustment of p-values for multiplicity (Holm 1979).

``method`` strings name each in ``--format json``; :data:`METHOD_TEXT` spells them out.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from batch.stop_when.confidence_sequence import METHOD as CS_METHOD
from batch.stop_when.confidence_sequence import METHOD_TEXT as CS_METHOD_TEXT

#: Two-sided 95%.
CONFIDENCE = 0.95
#: z for a two-sided 95% interval (the 97.5th percentile of the standard normal).
Z_95 = 1.959963984540054

WILSON = "wilson"
WILSON_CLUSTERED = "wilson-effective-n"
NEWCOMBE = "newcombe-paired"
NEWCOMBE_CLUSTERED = "newcombe-paired-effective-n"
T = "t"
#: Each method as the table footer and the report's methods note name it.
METHOD_TEXT = {
    WILSON: "Wilson score interval",
    WILSON_CLUSTERED: "Wilson interval on the effective number of samples (from the spread "
    "between cases; a case's repeats are one cluster)",
    NEWCOMBE: "Newcombe's paired score interval, method 10 with a continuity-corrected phi",
    NEWCOMBE_CLUSTERED: "Newcombe's paired score interval on the case means, each side's "
    "Wilson interval on its effective number of samples",
    T: "t interval of the case means (scores outside [0, 1]: unbounded)",
    CS_METHOD: CS_METHOD_TEXT,
}


@attrs.frozen
class Interval:
    """An estimate with its 95% interval (``low``/``high`` None when there is none: a t
    interval of one case, or of values all equal) and the method that made it."""

    estimate: float
    low: float | None
    high: float | None
    clusters: int
    method: str

    def to_json(self, digits: int = 6) -> dict[str, Any]:
        """``{"estimate", "low", "high", "cases", "method"}``, rounded to ``digits``."""
        return {
            "estimate": round(self.estimate, digits),
            "low": None if self.low is None else round(self.low, digits),
            "high": None if self.high is None else round(self.high, digits),
            "cases": self.clusters,
            "method": self.method,
        }


def wilson(successes: float, trials: float, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of ``successes`` of ``trials`` (> 0; either may be a
    fraction: an effective count)."""
    p = successes / trials
    z2 = z * z
    denominator = 1 + z2 / trials
    centre = (p + z2 / (2 * trials)) / denominator
    half = z * math.sqrt(max(0.0, p * (1 - p)) / trials + z2 / (4 * trials * trials)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


#: A cluster: (the sum of its values, its weight). A pass rate's cluster is (passed,
#: samples); a per-case figure's (the case's value, 1).
Cluster = tuple[float, float]


def effective_size(clusters: Mapping[Cluster, int], ceiling: float) -> tuple[float, float, int]:
    """``(estimate, n_eff, m)`` of the clusters ``clusters`` counts (each key as many times
    as its count): the ratio estimate ``Σ sum / Σ weight``, its effective sample size (the
    module's docstring) and the number of clusters."""
    m = sum(clusters.values())
    total = math.fsum(w * count for (_, w), count in clusters.items())
    p = math.fsum(s * count for (s, _), count in clusters.items()) / total
    p = min(1.0, max(0.0, p))
    floor = float(m)
    ceiling = max(ceiling, floor)
    if m == 1:  # one cluster: its samples are all there is to go on
        return p, ceiling, m
    if p <= 0.0 or p >= 1.0:  # every case at the bound: its spread is unknown
        return p, floor, m
    residuals = math.fsum(count * (s - p * w) ** 2 for (s, w), count in clusters.items())
    variance = m / (m - 1) * residuals / (total * total)
    if variance <= 0.0:
        return p, ceiling, m
    few = (Z_95 / t_quantile(0.5 + CONFIDENCE / 2, m - 1)) ** 2
    return p, min(ceiling, max(floor, p * (1 - p) / variance * few)), m


def clustered_proportion(clusters: Mapping[Cluster, int], ceiling: float) -> Interval | None:
    """The mean of values in [0, 1] over ``clusters`` with the Wilson interval on its
    effective sample size; ``ceiling``: the most samples the clusters can be worth (a pass
    rate: all its samples; pass@k: all its samples / k). None with no cluster."""
    if not clusters or sum(clusters.values()) == 0:
        return None
    p, n_eff, m = effective_size(clusters, ceiling)
    low, high = wilson(p * n_eff, n_eff)
    single = all(w == 1 and s in (0, 1) for s, w in clusters) and ceiling <= m
    return Interval(p, low, high, m, WILSON if single else WILSON_CLUSTERED)


def unit_clusters(values: Iterable[float]) -> dict[Cluster, int]:
    """Per-case values as clusters of weight 1, counted."""
    counts: dict[Cluster, int] = {}
    for value in values:
        key = (value, 1.0)
        counts[key] = counts.get(key, 0) + 1
    return counts


def in_unit_range(values: Iterable[float]) -> bool:
    """Whether every value lies in [0, 1] (min and max in C: a group may hold 500,000)."""
    values = list(values)
    return not values or (min(values) >= 0.0 and max(values) <= 1.0)


def t_mean(values: Sequence[float]) -> Interval | None:
    """The mean of unbounded values with its t interval (``mean ± t(0.975, m-1)·s/√m``); no
    interval with one value or when they are all equal (nothing bounds such values, so a
    zero spread gives no width to report). None for no values."""
    m = len(values)
    if m == 0:
        return None
    mean = math.fsum(values) / m
    if m == 1:
        return Interval(mean, None, None, 1, T)
    variance = math.fsum((x - mean) ** 2 for x in values) / (m - 1)
    if variance <= 0.0:
        return Interval(mean, None, None, m, T)
    half = t_quantile(0.5 + CONFIDENCE / 2, m - 1) * math.sqrt(variance / m)
    return Interval(mean, mean - half, mean + half, m, T)


def correlation(a: Sequence[float], b: Sequence[float]) -> float:
    """The correlation of two columns as Newcombe's interval takes it: Pearson's, a
    positive one lessened by ``m / 2`` in the numerator of phi (his continuity correction,
    ``max(ad - bc - m/2, 0)``: without it two models that agree on every case get an
    interval of zero width); 0 when either column is constant (a margin of the 2 x 2 table
    empty)."""
    m = len(a)
    mean_a, mean_b = math.fsum(a) / m, math.fsum(b) / m
    sxy = math.fsum((x - mean_a) * (y - mean_b) for x, y in zip(a, b, strict=True))
    sxx = math.fsum((x - mean_a) ** 2 for x in a)
    syy = math.fsum((y - mean_b) ** 2 for y in b)
    if sxx <= 0.0 or syy <= 0.0:
        return 0.0
    # For 0/1 columns sxy * m is ad - bc and sxx * syy * m² the product of the margins.
    if sxy > 0:
        sxy = max(0.0, sxy - 0.5)
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def paired_difference(
    a: Sequence[float], b: Sequence[float], ceilings: tuple[float, float]
) -> Interval | None:
    """B - A of per-case values in [0, 1] paired by position (case ``i`` is ``a[i]`` and
    ``b[i]``), with Newcombe's hybrid score interval: each side's
    :func:`clustered_proportion` interval ``(l, u)`` around its mean ``p``, and the
    correlation ``r`` of the two columns, give

        low  = d - √((p_b - l_b)² - 2r(p_b - l_b)(u_a - p_a) + (u_a - p_a)²)
        high = d + √((u_b - p_b)² - 2r(u_b - p_b)(p_a - l_a) + (p_a - l_a)²)

    ``ceilings``: each side's for :func:`clustered_proportion`. None with no shared case.
    """
    if not a:
        return None
    side_a = clustered_proportion(unit_clusters(a), ceilings[0])
    side_b = clustered_proportion(unit_clusters(b), ceilings[1])
    assert side_a is not None and side_b is not None and side_a.low is not None
    assert side_a.high is not None and side_b.low is not None and side_b.high is not None
    r = correlation(a, b)
    pa, pb = side_a.estimate, side_b.estimate
    down_b, up_a = pb - side_b.low, side_a.high - pa
    up_b, down_a = side_b.high - pb, pa - side_a.low
    d = pb - pa
    low = d - math.sqrt(max(0.0, down_b**2 - 2 * r * down_b * up_a + up_a**2))
    high = d + math.sqrt(max(0.0, up_b**2 - 2 * r * up_b * down_a + down_a**2))
    single = side_a.method == WILSON and side_b.method == WILSON
    return Interval(
        d, max(-1.0, low), min(1.0, high), len(a), NEWCOMBE if single else NEWCOMBE_CLUSTERED
    )


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: the i-th smallest of m times
    ``m - i + 1``, made non-decreasing in that order, at most 1 (Holm 1979)."""
    order = sorted(range(len(pvalues)), key=pvalues.__getitem__)
    adjusted = [0.0] * len(pvalues)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[index]))
        adjusted[index] = running
    return adjusted


# --- Student's t ----------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (``p`` > 0.5), by
    bisection on its CDF (the regularized incomplete beta; Numerical Recipes 6.4). Kept
    per (p, df): a batch asks for the same few, each some 50 evaluations of the CDF."""
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
    return 1.0 - 0.5 * incomplete_beta(x, df / 2.0, 0.5)


def incomplete_beta(x: float, a: float, b: float) -> float:
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
