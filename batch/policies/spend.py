"""Budgets: once a scope has spent its budget, no new job of that scope starts.

A sweep sets ``budget: {cost_usd: 50, tokens: 2_000_000}`` for the whole sweep and/or per
model (``models: [{id: m, budget: {...}}]``). What counts is what the batch dir has recorded:
every pair's total across all its attempts (carried jobs included) plus what this
invocation's finishes add — the driver keeps that as ``{model: Usage}``. A scope is
*exhausted* when one of its limits is reached or passed; a job may start only while neither
the sweep nor its model is exhausted. Tokens are input plus output tokens.

Jobs that reported no usage never count against a budget: a budget can only stop what the
jobs say they spent. Jobs already running when a budget is reached run to their end and
their spend counts, so a sweep can pass its budget by what its running jobs spend.

Pure: parsing the sweep key's value (:func:`parse_budget`, for ``checked`` in the sweep
loader) and deciding (:func:`exhausted_scopes`, :func:`skip_reason`); no clock, no files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from run_support.usage import NO_USAGE, Usage, total

#: The keys of a ``budget`` mapping, in the order a reason names them.
LIMITS = ("cost_usd", "tokens")
#: The largest budget in dollars: past it a value is a typo, and converting it would
#: overflow a float (``cost_usd: 9…9`` of 400 digits).
MAX_COST_USD = 1e12
SWEEP_SCOPE = None


@attrs.frozen
class Budget:
    """The limits of one scope; ``None``: no limit of that kind."""

    cost_usd: float | None = None
    tokens: int | None = None


@attrs.frozen
class Budgets:
    """The sweep's budget and each model's (models without one are absent)."""

    sweep: Budget | None = None
    models: Mapping[str, Budget] = attrs.field(factory=dict)

    @property
    def any(self) -> bool:
        return self.sweep is not None or bool(self.models)


@attrs.frozen
class Exhaustion:
    """One limit of one scope that has been reached: ``spent`` is at least ``limit``."""

    #: The model id, or None for the sweep-wide budget.
    model: str | None
    kind: str
    spent: float
    limit: float

    @property
    def reason(self) -> str:
        """``budget reached: cost_usd 50.12 of 50 (model gpt-x)`` — a skipped job's reason."""
        scope = "sweep" if self.model is None else f"model {self.model}"
        spent, limit = _number(self.spent), _number(self.limit)
        return f"budget reached: {self.kind} {spent} of {limit} ({scope})"


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    # Four decimals: enough to see that 50.0001 passed 50, without float noise.
    return f"{value:.4f}".rstrip("0").rstrip(".")


def parse_budget(raw: Any) -> Budget:
    """The :class:`Budget` a sweep's ``budget`` value states; ``ValueError`` saying what is
    wrong (the sweep loader adds file, line and key: ``checked(node, parse_budget)``).

    A mapping with ``cost_usd`` (a number) and/or ``tokens`` (a whole number), each more
    than 0; at least one of them. YAML's ``2_000_000`` is read as the integer it is.
    """
    if not isinstance(raw, Mapping):
        raise ValueError(f"expected a mapping with {' and/or '.join(LIMITS)}")
    unknown = [str(key) for key in raw if key not in LIMITS]
    if unknown:
        raise ValueError(f"unknown key '{unknown[0]}' (known keys: {', '.join(LIMITS)})")
    if not raw:
        raise ValueError(f"names no limit (give {' and/or '.join(LIMITS)})")
    cost, tokens = raw.get("cost_usd"), raw.get("tokens")
    if cost is not None and (not _is_number(cost) or not cost > 0):
        raise ValueError(f"cost_usd must be a number more than 0, got {cost!r}")
    if cost is not None and not cost <= MAX_COST_USD:  # infinity, 400 digits
        shown = repr(cost) if len(repr(cost)) <= 40 else repr(cost)[:37] + "..."
        raise ValueError(f"cost_usd must be at most {MAX_COST_USD:.0e}, got {shown}")
    if tokens is not None and (not _is_number(tokens) or not _is_whole(tokens) or tokens <= 0):
        raise ValueError(f"tokens must be a whole number more than 0, got {tokens!r}")
    return Budget(
        cost_usd=None if cost is None else float(cost),
        tokens=None if tokens is None else int(tokens),
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_whole(value: int | float) -> bool:
    return isinstance(value, int) or value.is_integer()


def spend_by_model(spends: Iterable[tuple[str, Usage]]) -> dict[str, Usage]:
    """``{model: total}`` of ``(model, usage)`` pairs: each pair's total across its attempts,
    one per (case, model), as the driver collects them from the ledger and its finishes."""
    grouped: dict[str, list[Usage]] = {}
    for model, usage in spends:
        grouped.setdefault(model, []).append(usage)
    return {model: total(usages) for model, usages in grouped.items()}


def _spent(usage: Usage, kind: str) -> float | None:
    return usage.cost_usd if kind == "cost_usd" else usage.tokens


def _exhausted(budget: Budget, usage: Usage, model: str | None) -> list[Exhaustion]:
    found = []
    for kind in LIMITS:
        limit, spent = getattr(budget, kind), _spent(usage, kind)
        # Unreported spend is None, never 0: it cannot reach a limit.
        if limit is not None and spent is not None and spent >= limit:
            found.append(Exhaustion(model, kind, spent, limit))
    return found


def exhausted_scopes(budgets: Budgets, spent: Mapping[str, Usage]) -> list[Exhaustion]:
    """Every limit reached, the sweep's first, then the models' in ``budgets`` order.

    ``spent`` is ``{model: what the batch has recorded for it}`` (:func:`spend_by_model`);
    a model with no entry has spent nothing that was reported.
    """
    found = []
    if budgets.sweep is not None:
        found += _exhausted(budgets.sweep, total(spent.values()), SWEEP_SCOPE)
    for model, budget in budgets.models.items():
        found += _exhausted(budget, spent.get(model, NO_USAGE), model)
    return found


def skip_reason(model: str, budgets: Budgets, spent: Mapping[str, Usage]) -> str | None:
    """Why a job of ``model`` may not start (the first exhausted scope it is in), or None.

    The sweep's budget is checked first: when both are reached, raising the model's alone
    would not let the job start, and the reason should say what to raise.
    """
    for exhaustion in exhausted_scopes(budgets, spent):
        if exhaustion.model is None or exhaustion.model == model:
            return exhaustion.reason
    return None


__all__ = [
    "Budget",
    "Budgets",
    "Exhaustion",
    "exhausted_scopes",
    "parse_budget",
    "skip_reason",
    "spend_by_model",
]
