"""Pass-rate statistics over ``batch-summary.json`` documents: pure functions over dicts.

``batch stats`` and ``batch report`` read the summary (``batch.summary.read.read_summary``)
and hand it here; nothing in this module touches files. Job rows are
``batch.summary.write.SummaryRow``, taken from a summary by ``summary_rows``. The shape of
what this module returns is the ``--format json`` output, documented in ``docs/stats.md``:
adding keys is fine, renaming or removing one needs ``STATS_SCHEMA`` to go up and a
CHANGELOG entry.

Rates count only finished jobs. ``pass_rate`` is passed / (passed + failed + error);
``adjusted_pass_rate`` leaves out ``error`` (a failure that says nothing about the model),
so it is passed / (passed + failed). Pending, running and skipped jobs are counted as jobs
but are in neither denominator. A rate whose denominator is zero is ``None``.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import compress, repeat
from operator import eq, is_not, itemgetter
from typing import Any, TypeGuard

from batch.plan.jobs import FINAL_STATUSES, STATUSES
from batch.policies.shared_reason import shared_reasons, warning_line
from batch.stats.intervals import Z_95, wilson
from batch.stats.rate_intervals import rate_intervals
from batch.stats.repeats import CaseSamples, repeat_stats
from batch.stats.repeats_rows import (
    cluster_samples,
    clusters_by,
    figure_samples,
    has_repeats,
    model_pairs,
    pair_plan,
    paired,
    row_repeat,
    score_value,
    with_holm,
)
from batch.stats.stopped import apply_stops
from batch.stats.usage import cost_diff, usage_group
from batch.summary.read import column, summary_rows
from batch.summary.row import SummaryRow
from run_support.usage import usage_of

STATS_SCHEMA = 1

GROUPINGS = {"model": "models", "case": "cases"}
#: Failure category shown for a failed or error job whose summary row names none.
UNCATEGORIZED = "uncategorized"


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float] | None:
    """Wilson score interval for ``successes`` out of ``trials``; ``None`` when no trials.

    Wilson rather than the normal approximation because sweeps are small per model and
    rates sit near 0 or 1, where ``p ± z·sqrt(p(1-p)/n)`` collapses to zero width.
    """
    return wilson(successes, trials, z) if trials > 0 else None


def is_finished(row: SummaryRow) -> bool:
    # Only a finished job has an outcome; a pending or skipped one says nothing yet.
    return row["status"] in FINAL_STATUSES


#: A longer duration is read as missing: no run takes 31 years, and a mean of such numbers
#: (a hand-edited 1e308) would overflow.
MAX_DURATION_SECONDS = 1e9


def finished_duration(row: SummaryRow) -> float | None:
    """A finished job's duration; ``None`` for unfinished jobs, whose time is not a result,
    and for one that is not a number from 0 to :data:`MAX_DURATION_SECONDS`."""
    value = row.get("duration_seconds")
    return float(value) if is_finished(row) and _is_duration(value) else None


def _rate(successes: int, trials: int) -> float | None:
    return successes / trials if trials else None


def _rounded(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)


def group_stats(
    rows: Iterable[SummaryRow], clusters: Sequence[CaseSamples] | None = None
) -> dict[str, Any]:
    """Counts, rates with their 95% intervals, failure categories and durations for rows;
    ``clusters``: the rows' samples per case x model when the caller has them already
    (:func:`batch.stats.repeats_rows.cluster_samples`), else they are counted here."""
    # A column at a time (map and compress run in C): a group of 500,000 rows is one of
    # the sizes ``batch stats`` is held to (bench/README.md, ``repeats_scale.py``).
    rows = list(rows)
    statuses = list(map(_STATUS, rows))
    counts = Counter(statuses)
    passed = counts["passed"]
    failing = map(_FAILING.__contains__, statuses)
    categories = failure_categories(list(compress(column(rows, "failure_category"), failing)))
    finished = map(FINAL_STATUSES.__contains__, statuses)
    durations = finished_durations(list(compress(column(rows, "duration_seconds"), finished)))
    stats: dict[str, Any] = {"jobs": len(rows)}
    stats.update({status: counts[status] for status in STATUSES})
    judged = {"pass_rate": passed + counts["failed"] + counts["error"]}
    judged["adjusted_pass_rate"] = passed + counts["failed"]
    for name, interval in rate_intervals(rows, statuses, passed, judged, clusters).items():
        stats[name] = _rounded(_rate(passed, judged[name]))
        stats[f"{name}_low"] = _rounded(interval.low) if interval else None
        stats[f"{name}_high"] = _rounded(interval.high) if interval else None
        stats[f"{name}_method"] = interval.method if interval else None
    # A pass that took more than one attempt: 100 % that hides 12 rate-limited attempts is
    # not the figure a reader takes it for.
    passes = map(eq, statuses, repeat("passed"))
    attempts = list(compress(column(rows, "attempts"), passes))
    if not set(map(type, attempts)) <= {int}:  # a hand-edited row: what _attempts reads
        attempts = list(map(_attempt_count, attempts))
    retried = [count - 1 for count in attempts if count > 1]
    stats["passed_after_retry"] = len(retried)
    stats["retried_pass_extra_attempts"] = sum(retried)
    stats["failure_categories"] = dict(
        sorted(categories.items(), key=lambda item: (-item[1], item[0]))
    )
    stats["mean_duration_seconds"] = _rounded(statistics.fmean(durations), 3) if durations else None
    stats["median_duration_seconds"] = (
        _rounded(statistics.median(durations), 3) if durations else None
    )
    return stats


def finished_durations(values: list[Any]) -> list[float]:
    """The finished jobs' ``duration_seconds`` values that are durations, as floats."""
    given = list(compress(values, map(is_not, values, repeat(None))))
    # As the driver writes them (floats within range): taken as they are, no call per value.
    plain = set(map(type, given)) <= {float} and all(map(math.isfinite, given))
    if plain and (not given or (min(given) >= 0 and max(given) <= MAX_DURATION_SECONDS)):
        return given
    return [float(value) for value in given if _is_duration(value)]


def failure_categories(categories: list[Any]) -> Counter[str]:
    """The failed and error jobs per failure category (a row naming none: uncategorized)."""
    try:
        counted = Counter(categories)
    except TypeError:  # an unhashable value in a hand-edited row names no category either
        counted = Counter(value if isinstance(value, str) else None for value in categories)
    merged: Counter[str] = Counter()
    for category, count in counted.items():
        merged[category or UNCATEGORIZED] += count
    return merged


_STATUS = itemgetter("status")
_MODEL = itemgetter("model")
_FAILING = frozenset({"failed", "error"})


def _is_duration(value: Any) -> TypeGuard[float]:
    """:func:`finished_duration`'s test of a finished job's value."""
    return (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and 0 <= value <= MAX_DURATION_SECONDS
    )


def _attempt_count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def grouped(rows: Iterable[SummaryRow], by: str) -> dict[str, list[SummaryRow]]:
    """Rows per case or model, groups in order of first appearance (the sweep's order)."""
    if by not in GROUPINGS:
        raise ValueError(f"cannot group by {by!r}; use one of {', '.join(GROUPINGS)}")
    groups: dict[str, list[SummaryRow]] = {}
    for row in rows:
        groups.setdefault(row["case"] if by == "case" else row["model"], []).append(row)
    return groups


def batch_identity(summary: Mapping[str, Any], batch_dir: str) -> dict[str, Any]:
    return {
        "batch_dir": batch_dir,
        "batch_id": summary.get("batch_id"),
        "state": summary.get("state"),
    }


def any_usage(rows: Iterable[SummaryRow]) -> bool:
    """Whether some job reported usage: only then do stats and report show spend at all."""
    # Only a row with a usage value can have reported one: the rest are passed over in C.
    given = filter(None, column(rows, "usage"))
    return any(usage_of(value).reported for value in given)


def row_reason(row: SummaryRow) -> str | None:
    """Why a job did not pass, as its row says: ``reason`` for a failed or error job,
    ``skip_reason`` for a skipped one; ``None`` when the row says nothing (an older summary).
    A hand-edited row's non-text value is read as nothing."""
    key = "skip_reason" if row["status"] == "skipped" else "reason"
    value = row.get(key)
    return value if isinstance(value, str) and value else None


def not_passed(rows: Iterable[SummaryRow]) -> list[dict[str, Any]]:
    """The finished jobs that did not pass, and skipped jobs with a reason, in row order."""
    return [
        {
            "model": row["model"],
            "status": row["status"],
            "failure_category": row.get("failure_category"),
            "reason": row_reason(row),
        }
        for row in rows
        if row["status"] in ("failed", "error") or (row["status"] == "skipped" and row_reason(row))
    ]


def _with_usage(stats: dict[str, Any], rows: Sequence[SummaryRow], usage: bool) -> dict[str, Any]:
    if usage:
        stats.update(usage_group(rows))
    return stats


def batch_stats(
    summary: Mapping[str, Any],
    *,
    by: str = "model",
    batch_dir: str = "",
    compare: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """The ``batch stats`` document for one summary: one row per model (or case) and overall.

    When some job reported usage, every group and ``overall`` carry the spend keys of
    ``batch.stats.usage.usage_group``; per case, each group lists the jobs that
    did not pass with their ``reason`` (``not_passed``). With repeats (some case x model
    sampled more than once) or scores, every group and ``overall`` carry the keys of
    ``batch.stats.repeats.repeat_stats`` (``pass_at_k``, ``pass_hat_k`` keyed by k,
    ``flaky_cases``, the score's mean). With two models or more, ``paired`` compares
    every pair of models (``compare``: just that pair) over the cases both have.
    """
    rows = summary_rows(summary)
    groups = grouped(rows, by)
    usage = any_usage(rows)
    scores = column(rows, "score")
    given = compress(scores, map(is_not, scores, repeat(None)))
    sampled = has_repeats(rows) or any(score_value(v) is not None for v in given)
    clusters = cluster_samples(rows) if sampled else {}
    grouped_clusters = clusters_by(clusters, by)
    listed = []
    for name, members in groups.items():
        own = list(grouped_clusters[name].values()) if sampled else None
        group = _with_usage({by: name, **group_stats(members, own)}, members, usage)
        if by == "case":
            group["not_passed"] = not_passed(members)
        if sampled:
            group.update(repeat_stats(figure_samples(grouped_clusters[name])))
        listed.append(group)
    overall = _with_usage(
        group_stats(rows, list(clusters.values()) if sampled else None), rows, usage
    )
    if sampled:
        overall.update(repeat_stats(figure_samples(clusters)))
    document = {
        "schema": STATS_SCHEMA,
        **batch_identity(summary, batch_dir),
        "by": by,
        GROUPINGS[by]: listed,
        "overall": overall,
    }
    if isinstance(summary.get("stop_when"), dict):  # additive: a stop_when sweep's
        document["stop_when"] = summary["stop_when"]
        apply_stops(document, listed, by)
    models = dict.fromkeys(map(_MODEL, rows))
    if compare is not None:
        missing = [name for name in compare if name not in models]
        if missing:
            raise ValueError(f"--compare: no model {missing[0]!r} in this batch")
        document["compare"] = list(compare)
    if compare is not None or len(models) > 1:
        # Two models measured on the same cases: the difference paired over the cases, not
        # two independent intervals side by side (docs/stats.md, "Paired comparisons").
        per_model = clusters_by(clusters or cluster_samples(rows), "model")
        pairs, scheme = pair_plan(list(models), rows, compare)
        document["paired"] = model_pairs(
            {model: per_model[model].values() for model in models}, pairs=pairs
        )
        document["paired_scheme"] = scheme
    failures = compress(rows, map(eq, map(_STATUS, rows), repeat("failed")))
    shared = shared_reasons((row["model"], "failed", row.get("reason")) for row in failures)
    if shared:  # additive: a model whose failures look like a crashed harness
        document["warnings"] = [warning_line(found) for found in shared]
    return document


def _diff(after: Mapping[str, Any] | None, before: Mapping[str, Any] | None) -> float | None:
    if not after or not before:
        return None
    a, b = before["adjusted_pass_rate"], after["adjusted_pass_rate"]
    return None if a is None or b is None else round(b - a, 6)


def status_changes(
    before: Sequence[SummaryRow], after: Sequence[SummaryRow]
) -> list[dict[str, Any]]:
    """Jobs whose status differs between two summaries, a job missing on one side included.

    Order: the second summary's job order, then jobs only the first one has.
    """
    old = {(row["case"], row["model"], row_repeat(row)): row["status"] for row in before}
    new = {(row["case"], row["model"], row_repeat(row)): row["status"] for row in after}
    keys = list(new) + [key for key in old if key not in new]
    changes = []
    for key in keys:
        a, b = old.get(key), new.get(key)
        if a != b:
            change: dict[str, Any] = {"case": key[0], "model": key[1], "a": a, "b": b}
            if key[2] != 1:  # additive, as in the summary
                change["repeat"] = key[2]
            changes.append(change)
    return changes


def compare_stats(
    summary_a: Mapping[str, Any],
    summary_b: Mapping[str, Any],
    *,
    by: str = "model",
    batch_dirs: tuple[str, str] = ("", ""),
) -> dict[str, Any]:
    """Two batches side by side per model (or case): both sides' stats, B - A, changed jobs.

    ``adjusted_pass_rate_diff`` is B's adjusted pass rate minus A's, ``None`` when either
    is undefined or the group is missing on one side.
    """
    rows_a, rows_b = summary_rows(summary_a), summary_rows(summary_b)
    groups_a, groups_b = grouped(rows_a, by), grouped(rows_b, by)
    changed = status_changes(rows_a, rows_b)
    changed_per_group = Counter(change[by] for change in changed)
    names = list(groups_a) + [name for name in groups_b if name not in groups_a]
    usage = any_usage(rows_a) or any_usage(rows_b)
    comparisons = []
    for name in names:
        a = _side(groups_a.get(name), usage)
        b = _side(groups_b.get(name), usage)
        comparison = {
            by: name,
            "a": a,
            "b": b,
            "adjusted_pass_rate_diff": _diff(b, a),
            "changed": changed_per_group[name],
            **_cost_diff(a, b, usage),
        }
        if name in groups_a and name in groups_b and by == "model":
            # One model measured twice on the same cases: the difference over the cases both
            # batches have, paired (docs/stats.md, "Paired comparisons").
            comparison["paired"] = paired(groups_a[name], groups_b[name])
        comparisons.append(comparison)
    # One test per model: Holm over the models' McNemar tests.
    with_holm([comparison.get("paired") or {} for comparison in comparisons])
    overall_a = _with_usage(group_stats(rows_a), rows_a, usage)
    overall_b = _with_usage(group_stats(rows_b), rows_b, usage)
    return {
        "schema": STATS_SCHEMA,
        "by": by,
        "a": batch_identity(summary_a, batch_dirs[0]),
        "b": batch_identity(summary_b, batch_dirs[1]),
        GROUPINGS[by]: comparisons,
        "overall": {
            "a": overall_a,
            "b": overall_b,
            "adjusted_pass_rate_diff": _diff(overall_b, overall_a),
            "changed": len(changed),
            **_cost_diff(overall_a, overall_b, usage),
        },
        "changed": changed,
    }


def _side(rows: Sequence[SummaryRow] | None, usage: bool) -> dict[str, Any] | None:
    return None if rows is None else _with_usage(group_stats(rows), rows, usage)


def _cost_diff(
    a: Mapping[str, Any] | None, b: Mapping[str, Any] | None, usage: bool
) -> dict[str, Any]:
    """``{"cost_usd_diff": B - A}`` when either batch reported usage, else nothing."""
    if not usage:
        return {}
    return {"cost_usd_diff": cost_diff(a, b)}
