"""``stop_when`` while a sweep runs: the stop decided from the ledger after every finished
job, and the jobs a stop leaves skipped with the reason (docs/sweep-file.md, "stop_when").

:class:`StopRuntime` feeds :class:`batch.stop_when.tracking.StopTracker` the batch's
recorded outcomes first (a resume's carried jobs, and the newest record of a job
``--retry-failed`` reruns), then every final finish. Its :meth:`gate` skips a stopped
model's jobs that never ran; a job run before (a retry) still runs, and when its new
outcome changes a case the sequence had read, the tracker is rebuilt from every outcome,
so the stop stays the one the ledger gives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any

from batch.execution.gate import GateDecision
from batch.plan.case_order import shuffled
from batch.plan.jobs import Job
from batch.plan.matrix import model_repeats
from batch.stop_when.confidence_sequence import METHOD
from batch.stop_when.estimate import (
    cases_needed,
    compare_cases_needed,
    rate_cases_needed,
)
from batch.stop_when.rules import A_BETTER, B_BETTER, REACHED_HALF_WIDTH, STOPPED, Stop
from batch.stop_when.tracking import Standing, StopTracker
from batch.sweep.features.stop_when import StopWhen, model_rule, percent
from batch.sweep.load import Sweep
from run_support.results import RunMeta, record_status

_FINAL = frozenset({"passed", "failed", "error"})


class StopRuntime:
    """The ``stop_when`` of one invocation (inert when the sweep has none)."""

    def __init__(
        self,
        sweep: Sweep,
        jobs: Sequence[Job],
        retried: dict[tuple[str, str, int], RunMeta],
        *,
        emit: Callable[..., None],
        message: Callable[[str], None],
    ) -> None:
        self.rule = sweep.stop_when
        self._emit, self._message = emit, message
        self._statuses: dict[tuple[str, str, int], str] = {}
        #: Jobs run again in this invocation (--retry-failed) with no new outcome yet: a
        #: stop is not final while a case it read may still change.
        self._retrying: set[tuple[str, str, int]] = set()
        self.tracker: StopTracker | None = None
        if self.rule is None:
            return
        assert self.rule.seed is not None
        self._order = [c.id for c in shuffled(sweep.cases, self.rule.seed, attrgetter("id"))]
        self._models = [model.id for model in sweep.models]
        #: Each model's own rule (its stop_when over the sweep's; None: off).
        self._own = {m.id: model_rule(self.rule, m.stop_when) for m in sweep.models}
        self._repeats = {model: model_repeats(sweep, model) for model in self._models}
        # The repeats of this invocation's jobs (--repeats) over the sweep's own.
        for job in jobs:
            self._repeats[job.model] = max(self._repeats[job.model], job.repeat)
        for job in jobs:
            if job.decision == "carry" and job.status in _FINAL:
                self._statuses[job.key] = job.status
            elif job.key in retried:
                self._statuses[job.key] = record_status(
                    retried[job.key], sweep.non_model_categories
                )[0]
                self._retrying.add(job.key)
        self._rebuild(announce=False)

    def _rebuild(self, *, announce: bool) -> None:
        assert self.rule is not None
        before = {} if self.tracker is None else self._stops()
        self.tracker = StopTracker(self.rule, self._order, self._models, self._repeats, self._own)
        self.tracker.record_all((*key, status) for key, status in self._statuses.items())
        if announce:
            for model in self._models:
                if before.get(model) is None and self.tracker.stop_of(model) is not None:
                    self._announce(model)

    def _stops(self) -> dict[str, Stop | None]:
        assert self.tracker is not None
        return {model: self.tracker.stop_of(model) for model in self._models}

    def gate(self, job: Job) -> GateDecision:
        """Skip a stopped model's job that never ran; anything else starts. While a job of
        the model is being run again (``--retry-failed``), its new outcome may move the
        stop: the job waits for it."""
        if self.tracker is None or job.decision != "run":
            return GateDecision.start()
        stop = self.tracker.stop_of(job.model)
        if stop is None:
            return GateDecision.start()
        if any(model == job.model for _, model, _ in self._retrying):
            return GateDecision.wait(f"stop_when: {job.model}'s retries may move its stop")
        return GateDecision.skip(self.skip_reason(job.model, stop))

    def finished(self, job: Job) -> None:
        """``job`` ended with a final status (no in-run retry to come)."""
        if self.tracker is None or job.status not in _FINAL:
            return
        self._retrying.discard(job.key)
        earlier = self._statuses.get(job.key)
        self._statuses[job.key] = job.status
        if earlier is not None and earlier != job.status:
            self._rebuild(announce=True)  # a case the sequence read has changed
            return
        for model in self.tracker.record(job.case, job.model, job.repeat, job.status):
            self._announce(model)

    def _announce(self, model: str) -> None:
        assert self.tracker is not None
        stop = self.tracker.stop_of(model)
        assert stop is not None
        self._message(f"{model}: {self.skip_reason(model, stop)}")
        bounds = stop.bounds
        self._emit(
            "stop_when",
            model=model,
            reason=stop.reason,
            cases_used=bounds.n,
            estimate=round(bounds.estimate, 6),
            low=round(bounds.low, 6),
            high=round(bounds.high, 6),
        )

    def skip_reason(self, model: str, stop: Stop) -> str:
        """Why ``model``'s jobs left by ``stop`` are skipped: the ``skip_reason``."""
        assert self.rule is not None
        b = stop.bounds
        of = f"after {b.n:,} of {len(self._order):,} cases"
        if stop.reason == REACHED_HALF_WIDTH:
            return (
                f"{STOPPED}: pass rate {b.estimate * 100:.1f}% "
                f"({b.low * 100:.1f} to {b.high * 100:.1f}%, ±{percent(b.half_width)}) {of}, "
                f"target ±{percent(self._rule_of(model).half_width or 0)}"
            )
        assert self.rule.compare is not None
        a, b_model = self.rule.compare
        answer = {
            B_BETTER: f"{b_model} is better",
            A_BETTER: f"{a} is better",
        }.get(stop.reason, f"within ±{percent(self.rule.margin)} of each other")
        return (
            f"{STOPPED}: {b_model} - {a} {_signed(b.estimate)} "
            f"({_signed(b.low)} to {_signed(b.high)}) {of}: {answer}"
        )

    def closing_lines(self) -> list[str]:
        """A line per model (per pair) for the closing lines: where it stopped, or how far
        from its target it ended and about how many cases would reach it."""
        if self.tracker is None or self.rule is None:
            return []
        lines = []
        for group in self._groups():
            model = group[-1]
            standing = self.tracker.standing(model)
            if standing.stop is not None:
                lines.append(f"{' and '.join(group)}: {self.skip_reason(model, standing.stop)}")
                continue
            lines.append(f"{' and '.join(group)}: {self._short_line(model, standing)}")
        return lines

    def _groups(self) -> list[tuple[str, ...]]:
        """The pair, or every model a rule stops."""
        assert self.rule is not None and self.tracker is not None
        if self.rule.compare:
            return [self.rule.compare]
        return [(m,) for m in self._models if self.tracker.governs(m)]

    def _rule_of(self, model: str) -> StopWhen:
        assert self.tracker is not None
        return self.tracker.rule_of(model)

    def _short_line(self, model: str, standing: Standing) -> str:
        """A model that did not reach its stop: where it is, and what would get it there."""
        rule = self._rule_of(model)
        b = standing.bounds
        where = f"after {b.n:,} of {standing.cases:,} cases"
        if rule.half_width is not None:
            now = f"±{percent(b.half_width)} {where}, short of ±{percent(rule.half_width)}"
            need = cases_needed(b.estimate, standing.variance, rule.half_width, rule.confidence)
        else:
            now = f"{_signed(b.estimate)} ({_signed(b.low)} to {_signed(b.high)}) {where}"
            need = compare_cases_needed(
                b.estimate, 4 * standing.variance, rule.margin, rule.confidence
            )
        if b.n < standing.cases:
            return f"not stopped yet: {now}"
        if need is None:
            return f"not stopped: {now}; no number of cases is likely to reach it"
        more = max(1, need - b.n)
        return (
            f"not stopped: {now}; about {more:,} more cases would reach it (more cases, "
            "not more repeats: repeats narrow it only as far as the cases agree)"
        )

    def plan_lines(self, *, seed_drawn: bool) -> list[str]:
        """What ``batch plan`` says of the rule: the order's seed, and per model (per pair)
        where it stands or, before anything ran, about how many cases it will take."""
        if self.tracker is None or self.rule is None:
            return []
        seed = (
            "a seed drawn when the batch is made"
            if seed_drawn
            else f"seed {self.rule.seed}, kept in the batch"
        )
        lines = [
            f"stop_when: {self.rule.describe()} at {self.rule.confidence:.0%}; cases run in a "
            f"random order ({seed}), the same for every model"
        ]
        for group in self._groups():
            standing = self.tracker.standing(group[-1])
            name = " and ".join(group)
            rule = self._rule_of(group[-1])
            own = "" if rule == self.rule else f" (its own: {rule.describe()})"
            if standing.stop is not None:
                lines.append(f"  {name}{own}: {self.skip_reason(group[-1], standing.stop)}")
            elif standing.bounds.n:
                lines.append(f"  {name}{own}: {self._short_line(group[-1], standing)}")
            else:
                lines.append(f"  {name}{own}: {self._first_estimate(rule, standing.cases)}")
        return lines

    def _first_estimate(self, rule: StopWhen, cases: int) -> str:
        """Before any case: the cases the target likely takes, with nothing known of the
        models (a pass rate of 50 %, the slowest to pin down; for a compare, two models 10
        and 5 pp apart whose cases disagree as much as they can)."""
        if rule.half_width is not None:
            need = rate_cases_needed(0.5, rule.half_width, rule.confidence)
            return (
                f"likely stops within about {_of(need, cases)} (at a pass rate of 50%; "
                "fewer nearer 0% or 100%)"
            )
        apart = [
            compare_cases_needed(d, 1 - d * d, rule.margin, rule.confidence) for d in (0.10, 0.05)
        ]
        return (
            f"likely stops within about {_of(apart[0], cases)} for models 10 pp apart, "
            f"{_of(apart[1], cases)} for 5 pp (fewer when their cases agree more)"
        )

    def summary(self) -> dict[str, Any] | None:
        """The summary's ``stop_when`` (docs/summary.md): the rule and every model's stand."""
        if self.tracker is None or self.rule is None:
            return None
        models = {}
        for model in self._models:
            if not self.tracker.governs(model):
                continue
            standing = self.tracker.standing(model)
            stop = standing.stop
            bounds = standing.bounds if stop is None else stop.bounds
            rule = self._rule_of(model)
            models[model] = {
                "half_width": rule.half_width,
                "confidence": rule.confidence,
                "stopped": stop is not None,
                "reason": None if stop is None else stop.reason,
                "cases_used": bounds.n,
                "cases": standing.cases,
                "estimate": round(bounds.estimate, 6),
                "low": round(bounds.low, 6),
                "high": round(bounds.high, 6),
            }
        return {**rule_json(self.rule), "method": METHOD, "models": models}


def rule_json(rule: StopWhen) -> dict[str, Any]:
    """The rule as the summary and ``batch plan --format json`` give it."""
    data: dict[str, Any] = {"confidence": rule.confidence, "seed": rule.seed}
    if rule.half_width is not None:
        data["half_width"] = rule.half_width
    else:
        assert rule.compare is not None
        data["compare"], data["margin"] = list(rule.compare), rule.margin
    return data


def _of(need: int | None, cases: int) -> str:
    if need is None:
        return "more than a million cases"
    if need > cases:
        return f"{need:,} cases, more than the {cases:,} there are"
    return f"{need:,} of {cases:,} cases"


def _signed(share: float) -> str:
    return f"{share * 100:+.1f} pp"
