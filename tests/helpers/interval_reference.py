"""Reference computations of ``batch.stats.intervals``'s estimators, written from the
papers with statsmodels and scipy doing the arithmetic, for the tests to compare against."""

from __future__ import annotations

import math
from collections.abc import Sequence

from scipy import stats as scipy_stats
from statsmodels.regression.linear_model import OLS
from statsmodels.stats.proportion import proportion_confint

Z_95 = float(scipy_stats.norm.ppf(0.975))


def wilson(count: float, nobs: float) -> tuple[float, float]:
    """statsmodels' Wilson score interval (95%)."""
    low, high = proportion_confint(count, nobs, alpha=0.05, method="wilson")
    return float(low), float(high)


def effective_interval(per_case: Sequence[tuple[int, int]]) -> tuple[float, float, float]:
    """``(estimate, low, high)``: Wilson on ``p(1-p) / v``, ``v`` statsmodels' cluster-robust
    variance of an intercept-only regression on the samples (CR1: G / (G - 1)), shrunk by
    (z / t(G-1))² and held between the number of cases and the number of samples; at an
    estimate of 0 or 1, the number of cases (Korn & Graubard 1998, with the design effect
    at its largest where the data cannot say)."""
    y: list[float] = []
    groups: list[int] = []
    for case, (passed, samples) in enumerate(per_case):
        y += [1.0] * passed + [0.0] * (samples - passed)
        groups += [case] * samples
    m = len(per_case)
    p = sum(y) / len(y)
    if p in (0.0, 1.0):
        return (p, *wilson(p * m, m))
    fit = OLS(y, [[1.0]] * len(y)).fit(cov_type="cluster", cov_kwds={"groups": groups})
    variance = float(fit.cov_params()[0][0])
    n_eff = p * (1 - p) / variance * (Z_95 / scipy_stats.t.ppf(0.975, m - 1)) ** 2
    n_eff = min(len(y), max(m, n_eff))
    return (p, *wilson(p * n_eff, n_eff))


def paired_newcombe(
    a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]]
) -> tuple[float, float, float]:
    """``(estimate, low, high)`` of B - A over cases given as (passed, samples) a side, each
    case with as many samples on both sides: Newcombe's hybrid score interval (1998, method
    10) from each side's :func:`effective_interval` and the correlation of the case shares,
    phi continuity-corrected (``ad - bc - n/2`` for 0/1 columns: half a case off the sum
    of cross products)."""
    pa, la, ua = effective_interval(a)
    pb, lb, ub = effective_interval(b)
    xa = [c / n for c, n in a]
    xb = [c / n for c, n in b]
    ma, mb = sum(xa) / len(xa), sum(xb) / len(xb)
    sxy = sum((x - ma) * (y - mb) for x, y in zip(xa, xb, strict=True))
    sxx = sum((x - ma) ** 2 for x in xa)
    syy = sum((y - mb) ** 2 for y in xb)
    r = (
        0.0
        if sxx == 0 or syy == 0
        else (max(0.0, sxy - 0.5) if sxy > 0 else sxy) / math.sqrt(sxx * syy)
    )
    d = pb - pa
    low = d - math.sqrt((pb - lb) ** 2 - 2 * r * (pb - lb) * (ua - pa) + (ua - pa) ** 2)
    high = d + math.sqrt((ub - pb) ** 2 - 2 * r * (ub - pb) * (pa - la) + (pa - la) ** 2)
    return d, max(-1.0, low), min(1.0, high)
