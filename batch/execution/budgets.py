"""Budgets at work: what this batch has spent per model, and which starts that refuses.

The decision is :mod:`batch.policies.spend` (pure); this module keeps the spend of one
invocation: every job's recorded total when the sweep starts (carried and retried jobs alike:
the newest record's ``usage_total``, which the plan put in ``Job.usage``), plus each attempt's
``usage`` as it finishes. Per model, so a check is a sum over the models, not over the jobs.
Jobs that report no usage add nothing. docs/policies.md, "Budgets".
"""

from __future__ import annotations

from collections.abc import Iterable

from batch.plan.jobs import Job
from batch.policies.spend import Budgets, Exhaustion, exhausted_scopes, skip_reason
from batch.sweep.load import Sweep
from run_support.usage import Usage, parse_usage


def sweep_budgets(sweep: Sweep) -> Budgets:
    """The sweep's ``budget`` and each model's."""
    models = {m.id: m.budget for m in sweep.models if m.budget is not None}
    return Budgets(sweep=sweep.budget, models=models)


class Spend:
    """What the batch has spent per model, against its budgets."""

    def __init__(self, budgets: Budgets, jobs: Iterable[Job]) -> None:
        self.budgets = budgets
        self._by_model: dict[str, Usage] = {}
        for job in jobs:
            if job.usage:
                self.add(job.model, parse_usage(job.usage).usage)

    def add(self, model: str, usage: Usage) -> None:
        """``usage`` more spent on ``model``'s jobs (one attempt's)."""
        if usage.reported:
            self._by_model[model] = self._by_model.get(model, Usage()) + usage

    def refusal(self, model: str) -> str | None:
        """Why no job of ``model`` may start (``budget reached: cost_usd 50.12 of 50
        (sweep)``), or None while neither the sweep's budget nor the model's is reached."""
        if not self.budgets.any:
            return None
        return skip_reason(model, self.budgets, self._by_model)

    def reached(self) -> list[Exhaustion]:
        """Every budget reached so far."""
        return exhausted_scopes(self.budgets, self._by_model)
