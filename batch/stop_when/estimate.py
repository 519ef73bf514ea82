"""How many cases a ``stop_when`` target will likely take, before a run (``batch plan``) and
after one that missed it (the closing lines): the width of the confidence sequence of
:mod:`batch.stop_when.confidence_sequence` with every random term replaced by its expectation.

For values of mean ``p`` and variance ``s2`` the sequence's half-width after ``t`` values is
about ``(log(2/alpha) + sum v_i psi(lambda_i)) / sum lambda_i`` with ``E v_i = s2 (1 +
1/(i-1))`` (``s2 + p²`` for the first) and the bets from the variance estimate ``(1/4 +
(i - 1) s2) / i``; each side's margin at most the distance from ``p`` to its bound.
``bench/stop_when.py`` checks the figure against the median stop of simulated sweeps:
within a few percent at rates near 1/2, up to a quarter above it near 0 or 1, where a run
with fewer failures than expected has a smaller variance estimate and stops sooner. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from batch.stop_when.confidence_sequence import TRUNCATION

#: Past this many cases the estimate gives up (None): a target that far is not a plan.
LIMIT = 1_000_000


def expected_half_width_path(
    mean: float, variance: float, confidence: float, target: float | None = None
) -> Iterator[tuple[int, float]]:
    """Yield ``(t, half_width)`` for t = 1, 2, ... (the module's docstring), with the bets
    :class:`~batch.stop_when.confidence_sequence.ConfidenceSequence` makes for ``target``."""
    log_alpha = math.log(2 / (1 - confidence))
    penalties = [0.0, 0.0]
    weights = 0.0
    t = 0
    while True:
        t += 1
        s2 = (0.25 + (t - 1) * variance) / t
        if target is None:
            bet = min(TRUNCATION, math.sqrt(2 * log_alpha / (t * math.log1p(t) * s2)))
        else:
            bet = min(TRUNCATION, target / (s2 + target))
        psi = -math.log1p(-bet) - bet
        for side, centre in enumerate((mean, 1 - mean)):
            v = variance + centre**2 if t == 1 else variance * (1 + 1 / (t - 1))
            penalties[side] += v * psi
        weights += bet
        # Each side's margin, the interval clipped to [0, 1] as the sequence's is.
        below = min(mean, (log_alpha + penalties[0]) / weights)
        above = min(1 - mean, (log_alpha + penalties[1]) / weights)
        yield t, (below + above) / 2


def cases_needed(
    mean: float, variance: float, half_width: float, confidence: float, *, aimed: bool = True
) -> int | None:
    """About how many cases (values of ``mean`` and ``variance``, in [0, 1]) the interval
    takes to reach ``±half_width``; None past :data:`LIMIT` or for a target of 0.
    ``aimed``: the sequence's bets aim at ``half_width`` (``stop_when: {half_width}``);
    else they are the default ones (a compare's)."""
    if half_width <= 0:
        return None
    target = half_width if aimed else None
    for t, width in expected_half_width_path(mean, variance, confidence, target):
        if width <= half_width:
            return t
        if t >= LIMIT:
            return None
    raise AssertionError("unreachable")


def rate_cases_needed(rate: float, half_width: float, confidence: float) -> int | None:
    """:func:`cases_needed` for a pass rate of one sample a case (variance ``p(1 - p)``;
    with repeats a case's mean varies less, so this is an upper estimate)."""
    return cases_needed(rate, rate * (1 - rate), half_width, confidence)


def compare_cases_needed(
    difference: float, variance: float, margin: float, confidence: float
) -> int | None:
    """About how many paired cases a compare takes when B - A is ``difference`` with
    per-case variance ``variance`` (at most 1): it stops once the half-width of B - A is
    below ``|difference|`` (the sign known) or ``margin - |difference|`` (within the
    margin), whichever comes first."""
    target = max(abs(difference), margin - abs(difference))
    if target <= 0:
        return None
    # On the unit scale (d + 1) / 2 the mean halves its distance and the variance quarters.
    return cases_needed((difference + 1) / 2, variance / 4, target / 2, confidence, aimed=False)


def worst_case_compare_cases(margin: float, confidence: float) -> int | None:
    """A compare's estimate with nothing known of the models: the largest per-case variance
    (1) and the difference that stops last for the margin (``margin / 2``)."""
    return compare_cases_needed(margin / 2, 1.0, margin, confidence)
