"""Summary rows as repeated samples: per-case samples, the repeats figures of a group, and
paired comparisons of two models (or of one model in two batches) over shared cases.

Pure over summary rows (``batch.results.summary.SummaryRow``); the estimators themselves
are :mod:`batch.results.repeats_stats` (docs/stats.md, "Repeats"). A row without ``repeat``
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
from itertools import combinations, compress, count, repeat
from operator import and_, eq, is_not, itemgetter, lt
from typing import Any

import attrs

from batch.results.repeats_stats import (
    CaseSamples,
    difference_estimate,
    mcnemar_exact,
    paired_difference,
    repeat_stats,
    shared_differences,
)
from batch.results.summary import SummaryRow
from batch.results.summary_read import column
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
    """The clusters for :func:`~batch.results.repeats_stats.repeat_stats`: as they are when
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

    @classmethod
    def of(cls, cases: Iterable[CaseSamples]) -> CaseMeans:
        """From one model's clusters, each named by its case; cases with no model outcome
        (or no score) are left out of the rates (or the scores)."""
        cases = list(cases)
        return cls(
            rates={c.case: c.passed / c.finished for c in cases if c.finished},
            scores={c.case: math.fsum(c.scores) / len(c.scores) for c in cases if c.scores},
            single=frozenset(c.case for c in cases if c.finished == 1),
        )


def paired_means(a: CaseMeans, b: CaseMeans) -> dict[str, Any]:
    """B - A over the cases both have a model outcome for: the pass rate's paired
    difference with its interval, McNemar's exact p when every shared case has one sample
    on each side, and the score's paired difference when both sides report scores."""
    differences = shared_differences(a.rates, b.rates)
    result: dict[str, Any] = {"pass_rate_diff": difference_estimate(differences)}
    shared = a.rates.keys() & b.rates.keys()
    if shared and shared <= a.single and shared <= b.single:
        # One sample a side: a rate is 0 or 1, so a difference of -1 is a case only A
        # passed, +1 one only B passed.
        a_only, b_only = differences.count(-1.0), differences.count(1.0)
        result["mcnemar"] = {"a_only": a_only, "b_only": b_only, "p": mcnemar_exact(a_only, b_only)}
    scores = paired_difference(a.scores, b.scores, bounded=False)
    if scores is not None:
        result["score_diff"] = scores
    return result


def paired(rows_a: Sequence[SummaryRow], rows_b: Sequence[SummaryRow]) -> dict[str, Any]:
    """:func:`paired_means` of one model's rows in two batches (or two models' rows)."""
    return paired_means(CaseMeans.of(case_samples(rows_a)), CaseMeans.of(case_samples(rows_b)))


def model_pairs(
    models: Mapping[str, Iterable[CaseSamples]], only: tuple[str, str] | None = None
) -> list[dict[str, Any]]:
    """Every pair of models of one batch (or just ``only``), each B - A, paired over the
    cases both have; ``models``: each model's clusters, named by their case."""
    pairs = [only] if only is not None else list(combinations(models, 2))
    names = dict.fromkeys(name for pair in pairs for name in pair)
    means = {name: CaseMeans.of(models[name]) for name in names}
    return [{"a": a, "b": b, **paired_means(means[a], means[b])} for a, b in pairs]
