"""Summary rows as repeated samples: per-case samples, the repeats figures of a group, and
paired comparisons of two models (or of one model in two batches) over shared cases.

Pure over summary rows (``batch.summary.write.SummaryRow``); the estimators themselves
are :mod:`batch.stats.repeats` (docs/stats.md, "Repeats"). A row without ``repeat``
is repeat 1. A sample is a model outcome when its status is ``passed`` or ``failed``; an
``error`` is a non-model failure, counted and left out; pending, running and skipped rows
are no sample yet.

A batch of 10 models x 10,000 cases x 5 repeats has 500,000 rows: they are tallied once,
a column at a time (``map``, ``compress`` and ``Counter`` run in C), into one
:class:`CaseSamples` per (case, model), and every group and every pair of models is
computed from those (bench/README.md, ``repeats_scale.py``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, combinations, compress, count, repeat
from operator import and_, eq, is_not, itemgetter, lt, sub
from typing import Any

import attrs

from batch.stats.intervals import holm, in_unit_range, paired_difference, t_mean
from batch.stats.repeats import CaseSamples, mcnemar_exact, repeat_stats
from batch.summary.read import column
from batch.summary.row import SummaryRow
from run_support.numbers import all_in_range, finite_number

#: A cluster of samples: (case, model).
Cluster = tuple[str, str]

_CASE = itemgetter("case")
_MODEL = itemgetter("model")
_STATUS = itemgetter("status")
_OUTCOMES = frozenset({"passed", "failed"})
_NONE = repeat(None)
_FINISHED = itemgetter(1)
_PASSED = itemgetter(2)
_SCORES = itemgetter(4)


def row_repeat(row: SummaryRow) -> int:
    value = row.get("repeat")
    return value if type(value) is int and value >= 1 else 1


def row_score(row: SummaryRow) -> float | None:
    return score_value(row.get("score"))


def score_value(value: Any) -> float | None:
    """A row's ``score`` as a float; None when it is not a number within ±1e15 (NaN, 1e300,
    a boolean: ``run_support.numbers.finite_number``), as if the row had none."""
    return finite_number(value)


def cluster_keys(rows: Sequence[SummaryRow]) -> list[Cluster]:
    """Each row's (case, model), in row order."""
    return list(zip(map(_CASE, rows), map(_MODEL, rows), strict=True))


def has_repeats(rows: Sequence[SummaryRow]) -> bool:
    """Whether some row is a repeat past the first: the batch sampled repeats. (Rows that
    merely repeat a (case, model), in a summary no driver wrote, are not samples.)"""
    return any(row_repeat(row) > 1 for row in rows)


def cluster_samples(rows: Sequence[SummaryRow]) -> dict[Cluster, CaseSamples]:
    """Each (case, model) of ``rows`` as one cluster of samples, in first-seen order; each
    :class:`CaseSamples` is named by its case."""
    keys = cluster_keys(rows)
    statuses = list(map(_STATUS, rows))
    outcome = list(map(_OUTCOMES.__contains__, statuses))
    finished = Counter(compress(keys, outcome))
    passed = Counter(compress(keys, map(eq, statuses, repeat("passed"))))
    errors = Counter(compress(keys, map(eq, statuses, repeat("error"))))
    scores: dict[Cluster, list[float]] = {}
    raw = column(rows, "score")
    given = map(and_, outcome, map(is_not, raw, _NONE))
    scored = list(compress(zip(keys, raw, strict=True), given))
    values = list(map(itemgetter(1), scored))
    # As the driver writes them (finite numbers): no call per value.
    if _finite_numbers(values):
        for key, score in scored:
            scores.setdefault(key, []).append(float(score))
    else:
        for key, value in scored:
            score = score_value(value)
            if score is not None:
                scores.setdefault(key, []).append(score)
    order = list(dict.fromkeys(keys))
    return dict(
        zip(
            order,
            map(
                CaseSamples._make,
                zip(
                    map(itemgetter(0), order),
                    map(finished.get, order, repeat(0)),
                    map(passed.get, order, repeat(0)),
                    map(errors.get, order, repeat(0)),
                    (tuple(scores.get(key, ())) for key in order),
                    strict=True,
                ),
            ),
            strict=True,
        )
    )


def _finite_numbers(values: list[Any]) -> bool:
    """Whether every value is an int or float (not a boolean) that :func:`score_value`
    keeps, checked in C."""
    return set(map(type, values)) <= {int, float} and all_in_range(values)


def case_samples(rows: Sequence[SummaryRow]) -> list[CaseSamples]:
    """Each (case, model) of ``rows`` as one cluster of samples, in first-seen order; its
    ``case`` field names the case (and the model, when the rows hold several)."""
    clusters = cluster_samples(rows)
    samples = list(clusters.values())
    if len({model for _, model in clusters}) <= 1:
        return samples
    labels = [f"{case} x {model}" for case, model in clusters]
    fields = (map(itemgetter(i), samples) for i in range(1, len(CaseSamples._fields)))
    return list(map(CaseSamples._make, zip(labels, *fields, strict=True)))


def figure_samples(clusters: Mapping[Cluster, CaseSamples]) -> list[CaseSamples]:
    """The clusters for :func:`~batch.stats.repeats.repeat_stats`: as they are when
    they hold one model; when they hold several, each flaky one named ``CASE x MODEL``, so
    that a flaky case says whose it is. (A case is shown by name only when it is flaky: a
    batch of 500,000 clusters need not name the rest.)"""
    samples = list(clusters.values())
    if len({model for _, model in clusters}) <= 1:
        return samples
    keys = list(clusters)
    passed = list(map(_PASSED, samples))
    some = map(lt, repeat(0), passed)
    flaky = compress(count(), map(and_, some, map(lt, passed, map(_FINISHED, samples))))
    for i in flaky:
        case, model = keys[i]
        samples[i] = samples[i]._replace(case=f"{case} x {model}")
    return samples


def clusters_by(
    clusters: Mapping[Cluster, CaseSamples], by: str
) -> dict[str, dict[Cluster, CaseSamples]]:
    """The clusters of each case (``by="case"``) or model, groups in first-seen order."""
    index = 0 if by == "case" else 1
    groups: dict[str, dict[Cluster, CaseSamples]] = {}
    for key, samples in clusters.items():
        groups.setdefault(key[index], {})[key] = samples
    return groups


def group_repeats(rows: Sequence[SummaryRow]) -> dict[str, Any]:
    """The repeats figures of a group (``repeat_stats``), its clusters the (case, model)s."""
    return repeat_stats(case_samples(rows))


@attrs.frozen
class CaseMeans:
    """One side of a paired comparison: per case, the share of its model outcomes that
    passed, the mean of its scores, and whether it has exactly one model outcome."""

    rates: dict[str, float]
    scores: dict[str, float]
    single: frozenset[str]
    #: Per case, its samples with a model outcome (and with a score).
    sizes: dict[str, int] = attrs.Factory(dict)
    scored: dict[str, int] = attrs.Factory(dict)
    #: Whether every score lies in [0, 1] (a proportion's interval holds it).
    unit_scores: bool = True

    @classmethod
    def of(cls, cases: Iterable[CaseSamples]) -> CaseMeans:
        """From one model's clusters, each named by its case; cases with no model outcome
        (or no score) are left out of the rates (or the scores)."""
        cases = list(cases)
        return cls(
            rates={c.case: c.passed / c.finished for c in cases if c.finished},
            scores={c.case: math.fsum(c.scores) / len(c.scores) for c in cases if c.scores},
            single=frozenset(c.case for c in cases if c.finished == 1),
            sizes={c.case: c.finished for c in cases if c.finished},
            scored={c.case: len(c.scores) for c in cases if c.scores},
            unit_scores=in_unit_range(chain.from_iterable(map(_SCORES, cases))),
        )


def _shared(a: Mapping[str, float], b: Mapping[str, float]) -> list[str]:
    """The cases both have, in ``a``'s order."""
    if a.keys() == b.keys():  # nearly always: two models of one sweep, the same cases
        return list(a)
    return [case for case in a if case in b]


def _paired(
    a: Mapping[str, float],
    b: Mapping[str, float],
    sizes: tuple[Mapping[str, int], Mapping[str, int]],
    bounded: bool = True,
) -> dict[str, Any] | None:
    """B - A of per-case values over the shared cases, with Newcombe's paired interval
    (``bounded``: values in [0, 1]) or the paired t interval of the differences."""
    shared = _shared(a, b)
    if not shared:
        return None
    column_a, column_b = [a[case] for case in shared], [b[case] for case in shared]
    if bounded:
        ceilings = (
            float(sum(sizes[0][case] for case in shared)),
            float(sum(sizes[1][case] for case in shared)),
        )
        found = paired_difference(column_a, column_b, ceilings)
    else:
        found = t_mean(list(map(sub, column_b, column_a)))
    return None if found is None else found.to_json()


def paired_means(a: CaseMeans, b: CaseMeans) -> dict[str, Any]:
    """B - A over the cases both have a model outcome for: the pass rate's paired
    difference with its interval, McNemar's exact p when every shared case has one sample
    on each side, and the score's paired difference when both sides report scores."""
    result: dict[str, Any] = {"pass_rate_diff": _paired(a.rates, b.rates, (a.sizes, b.sizes))}
    shared = a.rates.keys() & b.rates.keys()
    if shared and shared <= a.single and shared <= b.single:
        # One sample a side: a rate is 0 or 1; a case only A passed is 1 then 0.
        a_only = sum(1 for case in shared if a.rates[case] > b.rates[case])
        b_only = sum(1 for case in shared if a.rates[case] < b.rates[case])
        result["mcnemar"] = {"a_only": a_only, "b_only": b_only, "p": mcnemar_exact(a_only, b_only)}
    bounded = a.unit_scores and b.unit_scores
    scores = _paired(a.scores, b.scores, (a.scored, b.scored), bounded)
    if scores is not None:
        result["score_diff"] = scores
    return result


def paired(rows_a: Sequence[SummaryRow], rows_b: Sequence[SummaryRow]) -> dict[str, Any]:
    """:func:`paired_means` of one model's rows in two batches (or two models' rows)."""
    return paired_means(CaseMeans.of(case_samples(rows_a)), CaseMeans.of(case_samples(rows_b)))


def model_pairs(
    models: Mapping[str, Iterable[CaseSamples]],
    only: tuple[str, str] | None = None,
    *,
    pairs: Sequence[tuple[str, str]] | None = None,
) -> list[dict[str, Any]]:
    """The pairs of models of one batch asked for (``pairs``; else just ``only``, else
    every pair), each B - A, paired over the cases both have; ``models``: each model's
    clusters, named by their case. McNemar's p-values get their Holm adjustment over the
    pairs returned (:func:`with_holm`)."""
    if pairs is None:
        pairs = [only] if only is not None else list(combinations(models, 2))
    names = dict.fromkeys(name for pair in pairs for name in pair)
    means = {name: CaseMeans.of(models[name]) for name in names}
    return with_holm([{"a": a, "b": b, **paired_means(means[a], means[b])} for a, b in pairs])


def with_holm(comparisons: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``comparisons`` with ``p_holm`` beside each McNemar ``p``: Holm's adjustment over
    every McNemar test among them, so that a table of many pairs does not read as many
    discoveries by chance (Holm 1979). Returns the same list, changed in place."""
    tests = [found["mcnemar"] for found in comparisons if found and found.get("mcnemar")]
    for test, adjusted in zip(tests, holm([test["p"] for test in tests]), strict=True):
        test["p_holm"] = adjusted
    return comparisons


#: Up to this many models every pair is compared (28 pairs); past it, each model against
#: the best: 200 models would be 19,900 pairs, which no one reads.
ALL_PAIRS_UP_TO = 8


def best_model(rows: Sequence[SummaryRow]) -> str | None:
    """The model with the highest adjusted pass rate (the first in sweep order on a tie);
    None when no model has a passed or failed job."""
    models = list(map(_MODEL, rows))
    statuses = list(map(_STATUS, rows))
    passed = Counter(compress(models, map(eq, statuses, repeat("passed"))))
    judged = Counter(compress(models, map(_OUTCOMES.__contains__, statuses)))
    rated = [(passed[model] / count, model) for model, count in judged.items()]
    return max(rated, key=itemgetter(0))[1] if rated else None


def pair_plan(
    models: Sequence[str], rows: Sequence[SummaryRow], compare: tuple[str, str] | None
) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """Which pairs of models a batch compares, and how that is said in ``--format json``
    (``paired_scheme``): ``compare`` alone when given; every pair of up to
    :data:`ALL_PAIRS_UP_TO` models in sweep order; past that, the best model (A) against
    each other model (B)."""
    scheme: dict[str, Any] = {"best": None, "p_adjust": "holm"}
    if compare is not None:
        return [compare], {"pairs": "compare", **scheme}
    if len(models) <= ALL_PAIRS_UP_TO:
        return list(combinations(models, 2)), {"pairs": "all", **scheme}
    best = best_model(rows) or models[0]
    pairs = [(best, model) for model in models if model != best]
    return pairs, {"pairs": "best", **scheme, "best": best}
