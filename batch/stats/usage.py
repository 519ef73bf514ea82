"""Spend statistics for ``batch stats`` and ``batch report``: pure functions over summary rows.

A summary row's ``usage`` is the job's total across all its attempts (``docs/usage.md``), so
a model's spend is the sum of its rows' — every status counts, since a failed or still
running job's spend is spent. Rows that reported nothing add nothing; a total is ``None``
(not 0) when no row of the group reported that field, so "cost unknown" never reads as
"free". A row's ``usage`` comes from a file a person may have edited: values that are not
valid are read as not reported (``run_support.usage.usage_of``), never an error.

The keys returned here are meant to be merged into ``batch.stats.group_stats``' per-group
dict (additive keys of ``batch stats --format json``, ``STATS_SCHEMA`` stays 1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from run_support.usage import Usage, total, usage_of

# As run_support.usage writes costs: no float noise, nothing a price list resolves.
_COST_DIGITS = 8


def row_usage(row: Mapping[str, Any]) -> Usage:
    """The job total a summary row holds; nothing reported when it has none."""
    return usage_of(row.get("usage"))


def _cost(value: float | None) -> float | None:
    return None if value is None else round(value, _COST_DIGITS)


def usage_group(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Spend of a group of rows: tokens (in, out, both), requests, cost, cost per pass.

    ``cost_per_passed_case`` is the group's whole cost (failures' included) over its passed
    jobs: what one pass cost. ``None`` when nothing passed or no row reported a cost.
    ``jobs_with_usage`` counts the rows that reported anything, so a reader can see how
    much of a total is known.
    """
    rows = list(rows)
    usages = [row_usage(row) for row in rows]
    spent = total(usages)
    passed = sum(1 for row in rows if row.get("status") == "passed")
    return {
        "input_tokens": spent.input_tokens,
        "output_tokens": spent.output_tokens,
        "tokens": spent.tokens,
        "requests": spent.requests,
        "cost_usd": _cost(spent.cost_usd),
        "cost_per_passed_case": _cost(
            None if spent.cost_usd is None or not passed else spent.cost_usd / passed
        ),
        "jobs_with_usage": sum(1 for usage in usages if usage.reported),
    }


def _groups(rows: Iterable[Mapping[str, Any]], by: str) -> dict[str, list[Mapping[str, Any]]]:
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row[by], []).append(row)
    return groups


def usage_stats(rows: Iterable[Mapping[str, Any]], *, by: str = "model") -> dict[str, Any]:
    """``{"groups": {name: usage_group}, "overall": usage_group}``, groups in row order.

    ``overall`` is the batch total: every row, whichever group it is in.
    """
    rows = list(rows)
    return {
        "groups": {name: usage_group(members) for name, members in _groups(rows, by).items()},
        "overall": usage_group(rows),
    }


def cost_diff(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> float | None:
    """B's cost minus A's for two :func:`usage_group` results; ``None`` when a side is
    missing or reported no cost (an unknown cost has no difference)."""
    if not a or not b or a.get("cost_usd") is None or b.get("cost_usd") is None:
        return None
    return _cost(b["cost_usd"] - a["cost_usd"])


def compare_usage(
    rows_a: Iterable[Mapping[str, Any]],
    rows_b: Iterable[Mapping[str, Any]],
    *,
    by: str = "model",
) -> dict[str, Any]:
    """Two batches' spend per group and overall, each with ``cost_usd_diff`` (B - A).

    Groups in A's order, then those only B has; a group missing on one side has ``None``
    there and no difference.
    """
    stats_a, stats_b = usage_stats(rows_a, by=by), usage_stats(rows_b, by=by)
    groups_a, groups_b = stats_a["groups"], stats_b["groups"]
    names = list(groups_a) + [name for name in groups_b if name not in groups_a]
    groups = {}
    for name in names:
        a, b = groups_a.get(name), groups_b.get(name)
        groups[name] = {"a": a, "b": b, "cost_usd_diff": cost_diff(a, b)}
    overall_a, overall_b = stats_a["overall"], stats_b["overall"]
    return {
        "groups": groups,
        "overall": {
            "a": overall_a,
            "b": overall_b,
            "cost_usd_diff": cost_diff(overall_a, overall_b),
        },
    }


# --- cells, for the table, Markdown and the report ---------------------------------------------

#: What a cell shows for a total nobody reported (as the rates' undefined cells do).
UNKNOWN = "—"


def cost_text(value: float | None, *, signed: bool = False) -> str:
    """``$12.35``, ``$0.0042`` (small costs keep two significant digits), ``+$1.50`` for a
    difference, ``—`` when not reported."""
    if value is None:
        return UNKNOWN
    sign = ("+" if value > 0 else "-" if value < 0 else "±") if signed else ""
    amount = abs(value) if signed else value
    if amount != 0 and amount < 0.01:
        return f"{sign}${amount:.2g}" if amount >= 1e-4 else f"{sign}<$0.0001"
    return f"{sign}${amount:,.2f}"


def tokens_text(value: int | None) -> str:
    """``1,234,567`` below ten million, then ``12.3M``; ``—`` when not reported."""
    if value is None:
        return UNKNOWN
    return f"{value:,}" if value < 10_000_000 else f"{value / 1e6:,.1f}M"


__all__ = [
    "UNKNOWN",
    "compare_usage",
    "cost_diff",
    "cost_text",
    "row_usage",
    "tokens_text",
    "usage_group",
    "usage_stats",
]
