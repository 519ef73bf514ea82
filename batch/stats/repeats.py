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
- Each mean over cases gets a 95% interval that treats a case's samples as one cluster
  (:mod:`batch.stats.intervals`): a Wilson interval on the effective number of samples,
  or a t interval for scores outside [0, 1].
- Paired comparisons over the cases both sides have: per-case differences ``d_i`` of the
  case means and their mean, with Newcombe's paired score interval
  (:func:`batch.stats.intervals.paired_difference`); with one sample per case also
  McNemar's exact test on the discordant cases.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain, compress, repeat
from operator import and_, itemgetter, lt, sub, truediv
from typing import Any, NamedTuple

from batch.stats.intervals import (
    Interval,
    clustered_proportion,
    in_unit_range,
    incomplete_beta,
    t_mean,
    unit_clusters,
)


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


#: The largest k reported. pass@k is published up to 100 (HumanEval: k = 1, 10, 100 of
#: n = 200); past it the curve is flat for any case that ever passed, and bounding it
#: bounds the work whatever a summary holds (a hostile one: a million rows of one case).
MAX_K = 100


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
        # k of a case's n samples are n / k independent draws at most.
        at = clustered_proportion(_per_value(pass_at_k, outcomes, k), sum(sizes) / k)
        hat = clustered_proportion(_per_value(pass_hat_k, outcomes, k), sum(sizes) / k)
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
    score = score_mean(scored)
    stats["score"] = None if score is None else score.to_json()
    return stats


def score_mean(scored: Sequence[Sequence[float]]) -> Interval | None:
    """The mean over cases of their mean scores (``scored``: each case's scores): as a
    proportion when every score lies in [0, 1] (partial credit, a grade), else with the t
    interval. None for no case."""
    means = list(map(truediv, map(math.fsum, scored), map(len, scored)))
    if in_unit_range(chain.from_iterable(scored)):
        return clustered_proportion(unit_clusters(means), sum(map(len, scored)))
    return t_mean(means)


def _per_value(
    figure: Callable[[int, int, int], float], outcomes: Mapping[tuple[int, int], int], k: int
) -> dict[tuple[float, float], int]:
    """How many cases have each value of ``figure(n, c, k)``, from the cases per (n, c), as
    clusters of weight 1 (:func:`batch.stats.intervals.clustered_proportion`)."""
    counts: dict[tuple[float, float], int] = {}
    for (n, c), cases in outcomes.items():
        key = (figure(n, c, k), 1.0)
        counts[key] = counts.get(key, 0) + cases
    return counts


# --- paired comparisons ---------------------------------------------------------------------


def shared_differences(a: Mapping[str, float], b: Mapping[str, float]) -> list[float]:
    """``b[case] - a[case]`` for every case both have, in no particular order."""
    if list(a) == list(b):  # nearly always: two models of one sweep, the same cases in order
        return list(map(sub, b.values(), a.values()))
    shared = a.keys() & b.keys()
    return list(map(sub, map(b.__getitem__, shared), map(a.__getitem__, shared)))


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
        return min(1.0, 2 * incomplete_beta(0.5, discordant - fewer, fewer + 1))
    # C(n, 0) + ... + C(n, m), each term exactly from the one before.
    term = tail = 1
    for i in range(fewer):
        term = term * (discordant - i) // (i + 1)
        tail += term
    # One integer quotient, rounded once (correctly) to a float.
    return min(1.0, 2 * tail / (1 << discordant))
