"""The intervals of a group's ``pass_rate`` and ``adjusted_pass_rate``
(:func:`batch.stats.rates.group_stats`): Wilson's when every case x model has one sample,
else the clustered interval of :func:`batch.stats.intervals.clustered_proportion` with a
case x model's samples as one cluster, so that a rate with repeats has the interval its
pass@1 has (docs/stats.md, "The intervals"). Pure: rows or clusters in, intervals out."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from itertools import compress, repeat
from operator import add, eq, itemgetter

from batch.stats.intervals import WILSON, Interval, clustered_proportion, wilson
from batch.stats.repeats import CaseSamples
from batch.summary.read import column
from batch.summary.row import SummaryRow

_CLUSTER_FINISHED = itemgetter(1)
_CLUSTER_PASSED = itemgetter(2)
_CLUSTER_ERRORS = itemgetter(3)
_FINAL = frozenset({"passed", "failed", "error"})
_OUTCOMES = frozenset({"passed", "failed"})


def rate_interval(
    passes: Mapping[Hashable, int], trials: Mapping[Hashable, int]
) -> Interval | None:
    """The rate of the passes of ``trials`` with its 95% interval, both counted per cluster
    (a case x model): the repeats of a case are one cluster
    (:func:`batch.stats.intervals.clustered_proportion`); with one sample a cluster, the
    Wilson interval. None when there is no trial."""
    if not trials:
        return None
    clusters = Counter(zip(map(passes.get, trials, repeat(0)), trials.values(), strict=True))
    return clustered_proportion(
        {(float(s), float(w)): count for (s, w), count in clusters.items()},
        sum(trials.values()),
    )


def rate_intervals(
    rows: Sequence[SummaryRow],
    statuses: list[str],
    passed: int,
    judged: Mapping[str, int],
    clusters: Sequence[CaseSamples] | None,
) -> dict[str, Interval | None]:
    """The intervals of ``pass_rate`` and ``adjusted_pass_rate``: Wilson's when every case x
    model has one sample (a batch without repeats), else over the clusters of each."""
    if clusters is None and not _repeated(rows):
        return {
            name: None
            if not trials
            else Interval(passed / trials, *wilson(passed, trials), trials, WILSON)
            for name, trials in judged.items()
        }
    if clusters is not None:
        # (passed, samples) per cluster, counted: the error samples are trials of pass_rate.
        with_errors = Counter(
            zip(
                map(_CLUSTER_PASSED, clusters),
                map(add, map(_CLUSTER_FINISHED, clusters), map(_CLUSTER_ERRORS, clusters)),
                strict=True,
            )
        )
        outcomes = Counter(
            zip(map(_CLUSTER_PASSED, clusters), map(_CLUSTER_FINISHED, clusters), strict=True)
        )
        return {
            "pass_rate": _clustered(with_errors, judged["pass_rate"]),
            "adjusted_pass_rate": _clustered(outcomes, judged["adjusted_pass_rate"]),
        }
    keys = _cluster_column(rows)
    passing = Counter(compress(keys, map(eq, statuses, repeat("passed"))))
    found = {}
    for name, counted in (("pass_rate", _FINAL), ("adjusted_pass_rate", _OUTCOMES)):
        trials = Counter(compress(keys, map(counted.__contains__, statuses)))
        found[name] = rate_interval(passing, trials)
    return found


def _clustered(clusters: Mapping[tuple[int, int], int], trials: int) -> Interval | None:
    """:func:`clustered_proportion` of ``(passed, samples)`` clusters, those of no sample
    left out."""
    given = {(float(s), float(w)): n for (s, w), n in clusters.items() if w}
    return clustered_proportion(given, trials) if given else None


def _repeated(rows: Sequence[SummaryRow]) -> bool:
    """Whether some row is a repeat past the first (as ``has_repeats``, a column at a time)."""
    return any(type(v) is int and v > 1 for v in set(column(rows, "repeat")))


def _cluster_column(rows: Sequence[SummaryRow]) -> list[Hashable]:
    """Each row's cluster: its case when the rows hold one model (a string hashes once, a
    tuple on every lookup: a group of 50,000 rows is counted three times), else its (case,
    model)."""
    models = column(rows, "model")
    if len(set(models)) <= 1:
        return column(rows, "case")
    return list(zip(column(rows, "case"), models, strict=True))
