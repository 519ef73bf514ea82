"""When a model, or a comparison of two, has its answer: the pure stopping rules of
``stop_when`` (docs/sweep-file.md, "stop_when") over the confidence sequence of
:mod:`batch.stop_when.confidence_sequence`.

The sequence is fed the cases in the sweep's random order, each case one value in [0, 1]
(its repeats averaged; for a compare, B's minus A's, rescaled), and only the cases of an
unbroken prefix of that order: a case that finishes early is held back until every case
before it has finished. That keeps the values a uniform sample however long each case
takes (cases that fail fast would otherwise come first), and makes the stop a function of
the ledger alone: the same records give the same stop, through a crash and a resume.

- :func:`half_width_reached` — the interval is at most ``±target``.
- :func:`compare_decided` — the sign of B - A is known (the interval excludes 0), or the
  difference is known to lie within ``±margin``.
- :func:`first_stop` — the first prefix length at which a rule holds, and its interval.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import attrs

from batch.stop_when.confidence_sequence import Bounds, ConfidenceSequence, to_unit

#: How every ``skip_reason`` of a job a stop left begins.
STOPPED = "stopped by stop_when"
#: Why a model stopped: the words ``skip_reason`` and the closing lines use.
REACHED_HALF_WIDTH = "half_width"
B_BETTER = "b_better"
A_BETTER = "a_better"
WITHIN_MARGIN = "within_margin"


def half_width_reached(bounds: Bounds, target: float) -> str | None:
    """``REACHED_HALF_WIDTH`` once the interval is at most ``±target``, else None."""
    if bounds.n > 0 and bounds.half_width <= target:
        return REACHED_HALF_WIDTH
    return None


def compare_decided(difference: Bounds, margin: float) -> str | None:
    """Which answer the interval of B - A gives, or None while it gives none: B better
    (the interval above 0), A better (below 0), or within ``±margin`` of each other."""
    if difference.n == 0:
        return None
    if difference.low > 0:
        return B_BETTER
    if difference.high < 0:
        return A_BETTER
    if margin > 0 and difference.low >= -margin and difference.high <= margin:
        return WITHIN_MARGIN
    return None


@attrs.frozen
class Stop:
    """A rule held after the first ``bounds.n`` values of the order: why, and the interval
    it held on (for a compare, of B - A)."""

    reason: str
    bounds: Bounds


def first_stop(
    values: Iterable[float],
    rule: Callable[[Bounds], str | None],
    confidence: float,
    cases: int | None = None,
    difference: bool = False,
    target: float | None = None,
) -> tuple[Stop | None, Bounds]:
    """The first prefix of ``values`` (in the random order) on which ``rule`` holds, and the
    interval after all of them. ``difference``: the values are B - A in [-1, 1] and the
    intervals are of the difference. ``cases``: the size of the case set sampled;
    ``target``: the half-width the bets aim at (``ConfidenceSequence``), on the values'
    [0, 1] scale."""
    sequence = ConfidenceSequence(confidence, cases, target)
    stop = None
    for value in values:
        sequence.add(to_unit(value) if difference else value)
        if stop is None:
            bounds = _scaled(sequence.bounds(), difference)
            reason = rule(bounds)
            if reason is not None:
                stop = Stop(reason, bounds)
    return stop, _scaled(sequence.bounds(), difference)


def _scaled(bounds: Bounds, difference: bool) -> Bounds:
    return bounds.as_difference() if difference else bounds


def case_unit(outcomes: Iterable[bool]) -> float | None:
    """A case's value: the share of its samples with a model outcome that passed (its
    repeats are one unit); None when none has one."""
    outcomes = list(outcomes)
    if not outcomes:
        return None
    return sum(outcomes) / len(outcomes)
