"""The attempt budget: how many attempts one job may spend, across every invocation.

A job's spent attempts are its newest record's ``attempt`` number: the driver numbers every
attempt one more than the last, in-run retries and earlier ``--retry-failed`` invocations
alike, so the count survives restarts without a counter of its own. Once a job has spent
``max_attempts`` it is not retried again — neither by ``--retry-failed`` (it is carried with
its last status, ``batch plan`` says ``attempt budget spent (3/3)``) nor by an in-run retry.
docs/policies.md, "Attempt budget".
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

DEFAULT_MAX_ATTEMPTS = 3


@attrs.frozen
class AttemptBudget:
    """``max_attempts``: the sweep's, per-model overrides, and ``--max-attempts``."""

    default: int = DEFAULT_MAX_ATTEMPTS
    per_model: Mapping[str, int] = attrs.field(factory=dict)
    #: ``--max-attempts`` for this invocation only: it replaces every other value.
    override: int | None = None

    def limit(self, model: str) -> int:
        if self.override is not None:
            return self.override
        return self.per_model.get(model, self.default)


def may_attempt(spent: int, limit: int) -> bool:
    """Whether one more attempt fits: ``spent`` attempts recorded, ``limit`` allowed."""
    return spent < limit


def spent_reason(spent: int, limit: int) -> str:
    return f"attempt budget spent ({spent}/{limit})"


def retry_refusal(budget: AttemptBudget, model: str, spent: int) -> str | None:
    """None when a job of ``model`` with ``spent`` attempts may run again; else the reason
    it may not (``attempt budget spent (3/3)``), for the plan and the summary row."""
    limit = budget.limit(model)
    return None if may_attempt(spent, limit) else spent_reason(spent, limit)
