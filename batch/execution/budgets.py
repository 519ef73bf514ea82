"""Budgets at work: what this batch has spent per model, and which starts that refuses.

The decision is :mod:`batch.policies.spend` (pure); :class:`Spend` keeps the spend of one
invocation: every job's recorded total when the sweep starts (carried and retried jobs alike:
the newest record's ``usage_total``, which the plan put in ``Job.usage``), plus each attempt's
``usage`` as it finishes. Per model, so a check is a sum over the models, not over the jobs.
Jobs that report no usage add nothing. :class:`BudgetRuntime` is the scheduler's gate over
it, and says once per budget that it was reached. docs/policies.md, "Budgets".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from batch.execution.gate import GateDecision
from batch.plan.jobs import Job
from batch.policies.halt import Halt
from batch.policies.spend import Budgets, Exhaustion, exhausted_scopes, skip_reason
from batch.sweep.load import Sweep
from run_support.usage import Usage, usage_of


def sweep_budgets(sweep: Sweep) -> Budgets:
    """The sweep's ``budget`` and each model's."""
    models = {m.id: m.budget for m in sweep.models if m.budget is not None}
    return Budgets(sweep=sweep.budget, models=models)


class Spend:
    """What the batch has spent per model, against its budgets."""

    def __init__(self, budgets: Budgets, jobs: Iterable[Job]) -> None:
        self.budgets = budgets
        self._by_model: dict[str, Usage] = {}
        if not budgets.any:
            # Nothing to check the spend against: a resume of 200,000 carried jobs need not
            # read back each one's usage (bench/README.md, "ledger_side.py").
            return
        for job in jobs:
            if job.usage:
                self.add(job.model, usage_of(job.usage))

    def add(self, model: str, usage: Usage) -> None:
        """``usage`` more spent on ``model``'s jobs (one attempt's)."""
        if usage.reported and self.budgets.any:
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


class BudgetRuntime:
    """The budgets of one invocation at work: no job of a scope whose budget is reached
    starts, and each budget reached is announced once (an event, a line); the first one
    halts the batch (soon: the other scopes' jobs go on).

    ``decide`` is the policies' (``PolicyRuntime.decide``): it keeps the first halt and says
    it. ``resume_command`` is the user's own command that continues the batch.
    """

    def __init__(
        self,
        sweep: Sweep,
        jobs: Iterable[Job],
        *,
        decide: Callable[[Halt], Halt | None],
        emit: Callable[..., None],
        message: Callable[[str], None],
        resume_command: str,
    ) -> None:
        self.spend = Spend(sweep_budgets(sweep), jobs)
        self._decide = decide
        self._emit = emit
        self._message = message
        self._resume_command = resume_command
        #: The budgets reached so far, each announced once: (model or None, kind).
        self._announced: set[tuple[str | None, str]] = set()

    def add(self, model: str, usage: Usage) -> None:
        """An attempt of ``model`` spent ``usage``."""
        self.spend.add(model, usage)

    def gate(self, job: Job) -> GateDecision:
        """Start ``job``, or skip it with the reason its scope's budget gives
        (docs/policies.md, "Budgets")."""
        refused = self.spend.refusal(job.model)
        if refused is None:
            return GateDecision.start()
        self._announce()
        return GateDecision.skip(refused)

    def retry_refusal(self, job: Job) -> str | None:
        """Why a budget this attempt reached holds back ``job``'s in-run retry (said once,
        as its gate would say it), or None: a retry that would not start is none to print."""
        refused = self.spend.refusal(job.model)
        if refused is not None:
            self._announce()
        return refused

    def _announce(self) -> None:
        """Say once per budget that it was reached; the first one halts the batch."""
        for reached in self.spend.reached():
            if (reached.model, reached.kind) in self._announced:
                continue
            self._announced.add((reached.model, reached.kind))
            scope = "sweep" if reached.model is None else reached.model
            self._emit(
                "budget", scope=scope, kind=reached.kind, spent=reached.spent, limit=reached.limit
            )
            message = (
                f"{reached.reason}: starting no more of its jobs (raise the budget, "
                f"then {self._resume_command})"
            )
            if self._decide(Halt("soon", message, "budget")) is None:
                self._message(message)  # the first one's halt said it already
