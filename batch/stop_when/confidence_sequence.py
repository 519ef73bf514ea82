"""Anytime-valid confidence sequences for a mean in [0, 1]: intervals that hold however
often they are looked at, so a sweep may stop on the first one narrow enough.

A fixed-n interval (Wilson's, ``batch.stats.intervals``) checked after every case is
another chance to stop on noise each time: its error grows with every look. A confidence
sequence ``C_1, C_2, ...`` holds at every ``t`` at once: P(the mean is outside some
``C_t``) <= alpha, so the interval at any stop — however the stop was chosen — covers.

The method is the predictable plug-in empirical Bernstein confidence sequence (PrPl-EB) of
Waudby-Smith & Ramdas 2024 ("Estimating means of bounded random variables by betting",
JRSS-B, Theorem 2), as the reference code computes it (``confseq.predmix``:
``predmix_empbern_twosided_cs`` with ``truncation=1/2`` and ``lambda_predmix_eb``'s
regularised bets): for a lower bound at level ``a`` after ``t`` values,

    lambda_i = min(1/2, sqrt(2 log(1/a) / (i log(1 + i) s2_{i-1})))
    v_i      = (x_i - m_{i-1})^2,   psi(l) = -log(1 - l) - l
    lower_t  = [sum lambda_i (x_i + Z_i) - log(1/a) - sum v_i psi(lambda_i)]
               / sum lambda_i (1 + W_i)

with ``m_{i-1}`` the plain mean of the earlier values (0 before any), ``s2`` the variance
around the regularised mean ``(1/2 + S_i) / (i + 1)`` with one fake value of variance 1/4,
and ``Z_i = W_i = 0`` for draws from a population. The upper bound is ``1 - lower`` of
``1 - x``; each side at ``alpha / 2``; each bound the running best over ``t`` (the running
intersection keeps the guarantee). Closed form, O(1) a value: a driver can keep it up to
date after every finished job in plain Python.

**Bets for a target.** The guarantee holds for any bets ``lambda_i`` in [0, 1) fixed before
``x_i`` is seen (the process is a nonnegative supermartingale whatever they are). The bets
above spread the sequence's power over every ``t`` (its width shrinks like
``sqrt(log t / t)``); a sweep that stops at a half-width ``h`` wants it where the width
reaches ``h``. After ``n`` values of variance ``s2`` a constant bet ``lambda`` gives a
half-width of about ``log(1/a) / (n lambda) + s2 psi(lambda) / lambda``, and the bet that
reaches ``h`` soonest maximises ``lambda h - s2 psi(lambda)``: ``lambda = h / (s2 + h)``.
With a ``target`` the sequence bets ``min(1/2, h / (s2_{i-1} + h))``, the variance estimated
from the earlier values as above; it reaches ``±h`` after roughly half the values the
default bets need at rates near 1/2 (``bench/stop_when.py`` measures both).

**Two quantities, one interval.** The target of ``batch stats`` is the mean over the
*population* the cases were drawn from (docs/stats.md, "The intervals"); cases run in a
uniformly random order are i.i.d. draws from it, so the sequence above holds for it. The
pass rate over the sweep's own ``N`` cases is a different number, and the cases in random
order are draws *without replacement* from them: the same sequence with
``Z_i = S_{i-1} / (N - i + 1)`` and ``W_i = (i - 1) / (N - i + 1)`` (Waudby-Smith & Ramdas
2020, "Confidence sequences for sampling without replacement", NeurIPS; ``N=`` in
``confseq``) holds for that one. :class:`ConfidenceSequence` reports the *hull* of the two,
each at ``alpha``: it covers the population mean with probability >= 1 - alpha and the case
set's mean with probability >= 1 - alpha (each of the two intervals does, and the hull holds
both). The without-replacement one alone is narrower late in a case set, but it answers only
"these N cases", so it is never reported alone.

A paired difference B - A of two values in [0, 1] lies in [-1, 1]: :func:`to_unit` maps it
to ``(d + 1) / 2`` and :meth:`Bounds.as_difference` maps the interval back.
"""

from __future__ import annotations

import math

import attrs

#: ``method`` in ``batch stats --format json`` for an interval from this module.
METHOD = "eb-confidence-sequence"
METHOD_TEXT = (
    "anytime-valid empirical Bernstein confidence sequence (Waudby-Smith & Ramdas 2024), "
    "holding for the population and for the case set sampled without replacement"
)
#: The largest bet (``confseq``'s default truncation for the empirical Bernstein sequence).
TRUNCATION = 0.5


class _LowerBound:
    """One side of one sequence: the running lower bound on the mean of values in [0, 1]
    at level ``alpha`` (the module's docstring; ``population`` None: draws from a
    population, else without replacement from that many)."""

    __slots__ = (
        "_log_alpha",
        "_penalty",
        "_population",
        "_squares",
        "_sum",
        "_t",
        "_target",
        "_weighted",
        "_weights",
        "best",
    )

    def __init__(self, alpha: float, population: int | None, target: float | None) -> None:
        self._log_alpha = math.log(1 / alpha)
        self._target = target
        self._population = population
        self._t = 0
        self._sum = 0.0
        self._squares = 0.0
        self._penalty = 0.0
        self._weights = 0.0
        self._weighted = 0.0
        self.best = 0.0

    def add(self, x: float) -> None:
        t = self._t + 1
        variance = (0.25 + self._squares) / t  # s2_{t-1}: one fake value of variance 1/4
        if self._target is None:
            bet = min(TRUNCATION, math.sqrt(2 * self._log_alpha / (t * math.log1p(t) * variance)))
        else:
            bet = min(TRUNCATION, self._target / (variance + self._target))
        before = self._sum / (t - 1) if t > 1 else 0.0
        self._penalty += (x - before) ** 2 * (-math.log1p(-bet) - bet)
        if self._population is None:
            z = w = 0.0
        else:
            left = self._population - t + 1
            if left <= 0:
                raise ValueError(f"more values than the {self._population} there are")
            z, w = self._sum / left, (t - 1) / left
        self._weights += bet * (1 + w)
        self._weighted += bet * (x + z)
        self._sum += x
        self._t = t
        mean = min(1.0, (0.5 + self._sum) / (t + 1))
        self._squares += (x - mean) ** 2
        lower = (self._weighted - self._log_alpha - self._penalty) / self._weights
        self.best = max(self.best, lower)


@attrs.frozen
class Bounds:
    """An interval of a mean in [0, 1] after ``n`` values."""

    low: float
    high: float
    n: int
    estimate: float

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def as_difference(self) -> Bounds:
        """The interval of ``2y - 1``: back from :func:`to_unit`'s scale to B - A."""
        return Bounds(2 * self.low - 1, 2 * self.high - 1, self.n, 2 * self.estimate - 1)


def to_unit(difference: float) -> float:
    """A paired difference in [-1, 1] as a value in [0, 1]."""
    return (difference + 1) / 2


class ConfidenceSequence:
    """The running confidence sequence of the mean of values in [0, 1] added one at a time
    in a uniformly random order of ``cases`` cases (None: no finite set to cover): the hull
    of the population sequence and, with ``cases``, the without-replacement one (the
    module's docstring). Plain state, no clock or file: :meth:`add` and :meth:`bounds`."""

    __slots__ = ("_n", "_sides", "_squares", "_sum")

    def __init__(
        self, confidence: float, cases: int | None = None, target: float | None = None
    ) -> None:
        if not 0 < confidence < 1:
            raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
        if target is not None and not target > 0:
            raise ValueError(f"a target half-width must be above 0, got {target}")
        alpha = 1 - confidence
        populations: list[int | None] = [None] if cases is None else [None, cases]
        # (lower of x, lower of 1 - x) per sequence, each at alpha / 2.
        self._sides = [
            (
                _LowerBound(alpha / 2, population, target),
                _LowerBound(alpha / 2, population, target),
            )
            for population in populations
        ]
        self._n = 0
        self._sum = 0.0
        self._squares = 0.0

    def add(self, x: float) -> None:
        if not 0.0 <= x <= 1.0:
            raise ValueError(f"a value must lie in [0, 1], got {x}")
        for low, high in self._sides:
            low.add(x)
            high.add(1.0 - x)
        self._n += 1
        self._sum += x
        self._squares += x * x

    @property
    def n(self) -> int:
        return self._n

    @property
    def variance(self) -> float:
        """The values' sample variance (1/4, the most a value in [0, 1] can have, before
        two): what an estimate of the values still needed goes on."""
        if self._n < 2:
            return 0.25
        mean = self._sum / self._n
        return max(0.0, (self._squares - self._n * mean * mean) / (self._n - 1))

    def bounds(self) -> Bounds:
        """The interval after the values so far ([0, 1] before any)."""
        low = min(max(0.0, side[0].best) for side in self._sides)
        high = max(1.0 - max(0.0, side[1].best) for side in self._sides)
        estimate = self._sum / self._n if self._n else 0.5
        return Bounds(low, max(low, high), self._n, estimate)


def sequence_bounds(
    values: list[float], confidence: float, cases: int | None = None, target: float | None = None
) -> list[Bounds]:
    """The interval after each of ``values`` in turn (for tests and the bench)."""
    sequence = ConfidenceSequence(confidence, cases, target)
    out = []
    for x in values:
        sequence.add(x)
        out.append(sequence.bounds())
    return out
