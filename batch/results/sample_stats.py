"""Summary rows as repeated samples: per-case samples, the repeats figures of a group, and
paired comparisons of two models (or of one model in two batches) over shared cases.

Pure over summary rows (``batch.results.summary.SummaryRow``); the estimators themselves
are :mod:`batch.results.repeats_stats` (docs/stats.md, "Repeats"). A row without ``repeat``
is repeat 1. A sample is a model outcome when its status is ``passed`` or ``failed``; an
``error`` is a non-model failure, counted and left out; pending, running and skipped rows
are no sample yet.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations
from typing import Any

from batch.results.repeats_stats import (
    CaseSamples,
    mcnemar_exact,
    paired_difference,
    repeat_stats,
)
from batch.results.summary import SummaryRow

#: A cluster of samples: (case, model).
Cluster = tuple[str, str]


def row_repeat(row: SummaryRow) -> int:
    value = row.get("repeat")
    return value if type(value) is int and value >= 1 else 1


def row_score(row: SummaryRow) -> float | None:
    value = row.get("score")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def has_repeats(rows: Iterable[SummaryRow]) -> bool:
    """Whether some row is a repeat past the first: the batch sampled repeats. (Rows that
    merely repeat a (case, model), in a summary no driver wrote, are not samples.)"""
    return any(row_repeat(row) > 1 for row in rows)


def case_samples(rows: Iterable[SummaryRow]) -> list[CaseSamples]:
    """Each (case, model) of ``rows`` as one cluster of samples, in first-seen order; its
    ``case`` field names the case (and the model, when the rows hold several)."""
    tallies: dict[Cluster, list[Any]] = {}
    for row in rows:
        tally = tallies.setdefault((row["case"], row["model"]), [0, 0, 0, []])
        status = row["status"]
        if status in ("passed", "failed"):
            tally[0] += 1
            tally[1] += status == "passed"
            score = row_score(row)
            if score is not None:
                tally[3].append(score)
        elif status == "error":
            tally[2] += 1
    models = {model for _, model in tallies}
    return [
        CaseSamples(
            case if len(models) == 1 else f"{case} x {model}",
            finished,
            passed,
            errors,
            tuple(scores),
        )
        for (case, model), (finished, passed, errors, scores) in tallies.items()
    ]


def group_repeats(rows: Sequence[SummaryRow]) -> dict[str, Any]:
    """The repeats figures of a group (``repeat_stats``), its clusters the (case, model)s."""
    return repeat_stats(case_samples(rows))


def case_means(rows: Iterable[SummaryRow], *, score: bool = False) -> dict[str, float]:
    """Per case, the share of its model outcomes that passed (``score``: the mean score of
    its scored samples); cases with none are left out."""
    sums: dict[str, list[float]] = {}
    for row in rows:
        if row["status"] not in ("passed", "failed"):
            continue
        value = row_score(row) if score else float(row["status"] == "passed")
        if value is not None:
            sums.setdefault(row["case"], []).append(value)
    return {case: math.fsum(values) / len(values) for case, values in sums.items()}


def paired(rows_a: Sequence[SummaryRow], rows_b: Sequence[SummaryRow]) -> dict[str, Any]:
    """B - A over the cases both have a model outcome for: the pass rate's paired
    difference with its interval, McNemar's exact p when every shared case has one sample
    on each side, and the score's paired difference when both sides report scores."""
    a, b = case_means(rows_a), case_means(rows_b)
    result: dict[str, Any] = {"pass_rate_diff": paired_difference(a, b)}
    shared = [case for case in a if case in b]
    single = Counter(row["case"] for row in (*rows_a, *rows_b) if _outcome(row))
    if shared and all(single[case] == 2 for case in shared):
        a_only = sum(1 for case in shared if a[case] == 1.0 and b[case] == 0.0)
        b_only = sum(1 for case in shared if a[case] == 0.0 and b[case] == 1.0)
        result["mcnemar"] = {"a_only": a_only, "b_only": b_only, "p": mcnemar_exact(a_only, b_only)}
    scores = paired_difference(
        case_means(rows_a, score=True), case_means(rows_b, score=True), bounded=False
    )
    if scores is not None:
        result["score_diff"] = scores
    return result


def _outcome(row: SummaryRow) -> bool:
    return row["status"] in ("passed", "failed")


def model_pairs(
    groups: Mapping[str, Sequence[SummaryRow]], only: tuple[str, str] | None = None
) -> list[dict[str, Any]]:
    """Every pair of models of one batch (or just ``only``), each B - A, paired over the
    cases both have."""
    pairs = [only] if only is not None else list(combinations(groups, 2))
    return [{"a": a, "b": b, **paired(groups[a], groups[b])} for a, b in pairs]
