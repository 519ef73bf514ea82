"""Resume decisions: which jobs run, which keep their recorded outcome (docs/resume.md).

A pure function over the job list and the ledger's newest records. The only question it
answers from disk-derived data is "does this pair have a recorded outcome, and what kind";
a run dir without a ``run-meta.json`` (a run that was killed) is no outcome at all.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from operator import attrgetter
from typing import Any

import attrs

from batch.layout import safe_name
from batch.plan.jobs import Job
from batch.policies.attempts import AttemptBudget, retry_refusal
from batch.sweep.features.steps import Step
from batch.sweep.placeholders import expand_command
from run_support.results import (
    NON_MODEL_FAILURE_CATEGORIES,
    RecordOutcome,
    RunMeta,
    record_outcome,
    record_status,
)


@attrs.frozen
class ResumePlan:
    jobs: list[Job]

    @property
    def carried(self) -> int:
        return sum(job.decision == "carry" for job in self.jobs)

    @property
    def retried(self) -> int:
        return sum(job.decision == "retry" for job in self.jobs)

    @property
    def to_run(self) -> int:
        return len(self.jobs) - self.carried


def retry_set(
    retry_failed: bool,
    retry_categories: Iterable[str] | None,
    non_model_categories: Collection[str] = NON_MODEL_FAILURE_CATEGORIES,
) -> frozenset[str]:
    """The failure categories rerun on this invocation.

    ``--retry-category`` names the set exactly (so it can narrow the default or add
    ``model_failure``); plain ``--retry-failed`` retries the non-model categories.
    """
    if retry_categories:
        return frozenset(retry_categories)
    return frozenset(non_model_categories) if retry_failed else frozenset()


def step_retry_point(record: RunMeta, steps: Sequence[Step], job: Job) -> tuple[int, str | None]:
    """Where a retry of a multi-step job may start: (steps to reuse, run dir holding them).

    ``(0, None)`` when every step runs again: no steps, or the first step did not pass, or
    its command changed (docs/resume.md, step-level resume).
    """
    if not steps or not record.steps or not record.run_dir:
        return 0, None
    count = resume_point(record.steps, steps, job)
    return (count, record.run_dir) if count else (0, None)


#: Every field of a Job, in ``__init__`` order: ``Job(*_job_fields(job))`` is a shallow copy
#: at a fifth of the cost of ``attrs.evolve`` (which inspects the class on every call), and
#: a resume decides 100,000 jobs.
_job_fields = attrgetter(*(field.name for field in attrs.fields(Job)))


def _copy(job: Job) -> Job:
    """A shallow copy of ``job``, as ``attrs.evolve`` would make it (Job has no validators
    or converters)."""
    return Job(*_job_fields(job))


def _evolve(job: Job, **changes: Any) -> Job:
    """``attrs.evolve(job, **changes)``, fast; ``job`` itself changed when the given
    ``job`` is already a copy of the caller's own."""
    for name, value in changes.items():
        setattr(job, name, value)
    return job


def decide(
    job: Job,
    record: RunMeta | None,
    retry: Collection[str],
    non_model_categories: Collection[str] = NON_MODEL_FAILURE_CATEGORIES,
    steps: Sequence[Step] = (),
    budget: AttemptBudget | None = None,
    *,
    in_place: bool = False,
) -> Job:
    """A copy of ``job`` with its decision (run | carry | retry) and the reason for it;
    ``job`` itself, decided, with ``in_place`` (a caller that drops the undecided job).

    A retried multi-step job whose record shows leading steps passed starts from the first
    step that did not (``resume_from_step``, ``reuse_run_dir``). A job that would be retried
    but has spent its attempt ``budget`` is carried instead (docs/policies.md).
    """
    new = job if in_place else _copy(job)
    if record is None:
        new.decision, new.decision_reason, new.resumed = "run", "no recorded outcome", False
        return new
    status, category = record_status(record, non_model_categories)
    refusal = None
    if status != "passed" and category in retry and budget is not None:
        refusal = retry_refusal(budget, job.model, record.attempt_number)
    if status != "passed" and category in retry and refusal is None:
        reason = f"recorded {status} ({category}) is retried"
        reuse, reuse_dir = step_retry_point(record, steps, job)
        if reuse:
            reused = ", ".join(step.name for step in steps[:reuse])
            reason += f" from step {steps[reuse].name} ({reused} reused)"
        return _evolve(
            new,
            decision="retry",
            decision_note=reason,
            resumed=False,
            attempts=record.attempt_number,
            # What earlier attempts spent: the retry's record adds its own to this.
            usage=record_outcome(record, non_model_categories).usage,
            resume_from_step=reuse,
            reuse_run_dir=reuse_dir,
        )
    note = None
    if refusal is not None:
        what = status if status == "passed" else f"{status} ({category})"
        note = f"{refusal}: keeps its recorded {what} in {record.run_dir}"
    return _carry(new, record_outcome(record, non_model_categories), note)


def _carry(new: Job, outcome: RecordOutcome, reason: str | None) -> Job:
    """``new`` carrying its record's ``outcome`` for ``reason`` (None: that it is recorded,
    told from the outcome: ``Job.decision_reason``)."""
    new.decision = "carry"
    new.decision_note = reason
    return new.take_outcome(outcome, resumed=True)


def keep_recorded(
    job: Job,
    record: RunMeta,
    non_model_categories: Collection[str] = NON_MODEL_FAILURE_CATEGORIES,
    *,
    resumed: bool = True,
) -> Job:
    """``job``, which this invocation meant to run again but did not get to (halted,
    breaker, budget, deadline, stopped, interrupted, killed), back at ``record``, its newest
    record: the summary says what the ledger says, not ``skipped`` (docs/summary.md).
    ``resumed``: the record is an earlier invocation's."""
    return job.take_outcome(record_outcome(record, non_model_categories), resumed=resumed)


def apply_resume(
    jobs: Iterable[Job],
    recorded: Mapping[tuple[str, str, int], RunMeta],
    *,
    retry_failed: bool = False,
    retry_categories: Iterable[str] | None = None,
    non_model_categories: Collection[str] = NON_MODEL_FAILURE_CATEGORIES,
    steps: Sequence[Step] = (),
    budget: AttemptBudget | None = None,
    in_place: bool = False,
    retried: dict[tuple[str, str, int], RunMeta] | None = None,
) -> ResumePlan:
    """Decide every job against the newest record of its (case, model, repeat) (docs/resume.md).

    ``steps``: the sweep's steps, for step-level retries of multi-step jobs; ``budget``: the
    attempt budget a retry must fit in (None: no limit). The jobs given are left as they
    are, unless ``in_place``: then they are decided themselves, not copies (a caller that
    keeps no undecided job, saving a copy of each; bench/resume_scale.py). ``retried``:
    filled with the record of every job decided ``retry``, which the job keeps if this
    invocation does not get to it (:func:`keep_recorded`).
    """
    retry = retry_set(retry_failed, retry_categories, non_model_categories)
    get = recorded.get
    decided: list[Job] = []
    append = decided.append
    for job in jobs:
        record = get(job.key)
        if record is None:
            append(decide(job, None, retry, in_place=in_place))
            continue
        # decide() for a record it carries without a retry to refuse (nearly every record of
        # a resume), inline: 100,000 calls of it cost a large plan a tenth of its time.
        # tests/unit/plan/test_resume.py holds the two equal.
        if record.outcome != "passed" and record.failure_category in retry:
            decided_job = decide(
                job, record, retry, non_model_categories, steps, budget, in_place=in_place
            )
            if retried is not None and decided_job.decision == "retry":
                retried[job.key] = record
            append(decided_job)
            continue
        new = job if in_place else _copy(job)
        append(_carry(new, record_outcome(record, non_model_categories), None))
    return ResumePlan(jobs=decided)


#: Placeholders whose value changes with every attempt, kept as written in ``command``.
PER_ATTEMPT = ("run_dir", "batch_dir", "attempt", "container_label")
#: Statuses of a step that later attempts may build on.
DONE_STATUSES = ("passed", "reused")


# --- step-level resume ----------------------------------------------------------------


def command_text(step: Step, job: Job) -> list[str]:
    """The step's command for ``job`` as records keep it: equal for two attempts of one job
    unless the step's command (or a param it uses) changed."""
    values: dict[str, object] = {name: f"{{{name}}}" for name in PER_ATTEMPT}
    values.update(
        case=job.case, model=job.model, model_safe=safe_name(job.model), repeat=job.repeat
    )
    try:
        return expand_command(step.command, values, job.params)
    except (KeyError, ValueError):
        return list(step.command)


def resume_point(entries: Sequence[Any], steps: Sequence[Step], job: Job) -> int:
    """How many leading steps of a record a new attempt may reuse.

    A step is reusable when it and every step before it passed (or was reused) under the
    same name and the same command; a changed command makes it and all later steps run
    again. The last step always runs: a record whose steps all passed but whose job did not
    got its outcome from the last step's ``result.json``.
    """
    count = 0
    for entry, step in zip(entries, steps, strict=False):
        if not (
            isinstance(entry, dict)
            and entry.get("name") == step.name
            and entry.get("status") in DONE_STATUSES
            and entry.get("command") == command_text(step, job)
        ):
            break
        count += 1
    return max(0, min(count, len(steps) - 1))
