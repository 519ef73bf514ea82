"""One job of a sweep: a (case, model, repeat), what was decided for it, and where it stands.

The job list is the driver's single source of truth: the resume plan fills in decisions,
the scheduler moves jobs through their statuses, and the summary is a view of the list.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

from run_support.results import RecordOutcome

#: Every status a job can have; ``batch-summary.json`` counts each in ``totals``.
STATUSES = ("passed", "failed", "error", "skipped", "pending", "running")
FINAL_STATUSES = frozenset({"passed", "failed", "error"})

Decision = Literal["run", "carry", "retry"]

#: The reason of a ``skipped`` job that ``--cases``/``--models`` left out and that has no
#: recorded result to carry.
NOT_SELECTED = "not selected by --cases/--models"


# No __weakref__ slot: nothing holds a job weakly, and a million jobs would pay for it.
@attrs.define(weakref_slot=False)
class Job:
    case: str
    model: str
    #: The case's params, shared by all its jobs (read only).
    params: Mapping[str, Any] = attrs.Factory(dict)
    #: Per-job timeout in seconds (a case may override the sweep's); None means no limit.
    timeout: float | None = None
    status: str = "pending"
    decision: Decision = "run"
    #: Why the plan decided as it did ("no recorded outcome"); None for a job carried as
    #: its record says, whose reason is told from it (:attr:`decision_reason`).
    decision_note: str | None = "not started"
    #: True when the result was carried over from an earlier invocation's record.
    resumed: bool = False
    duration_seconds: float | None = None
    failure_category: str | None = None
    attempts: int = 0
    run_dir: str | None = None
    #: Multi-step jobs: the newest record's step entries (name, status, duration, ...).
    steps: list[Any] | None = None
    #: Step-level retry: the next attempt reuses this many leading steps of ``reuse_run_dir``.
    resume_from_step: int = 0
    reuse_run_dir: str | None = None
    #: Why a policy (halt, breaker, deadline, budget) did not start it in this invocation;
    #: such a job is ``skipped`` and has no record, so ``--resume`` runs it.
    skip_reason: str | None = None
    #: One line: why the job's deciding run did not pass (its record's ``reason``); None
    #: while it has not finished, when it passed, or when its record predates reasons.
    reason: str | None = None
    #: What the job has spent in this batch dir across its attempts (the newest record's
    #: ``usage_total``, docs/usage.md); None when no attempt reported usage.
    usage: dict[str, int | float] | None = None
    #: A dataset case's row (``cases: {jsonl: ...}``), written to the run dir as ``case.json``.
    case_row: bytes | None = None
    #: False when ``--cases``/``--models`` left it out: a recorded result is carried, and a
    #: hint that retries it must not repeat the selection (batch.display.next_steps).
    selected: bool = True
    #: Which of the sweep's ``repeats`` samples of (case, model) this job is, from 1.
    repeat: int = 1
    #: The score the deciding run reported (``result.json`` ``score``), when a finite number.
    score: float | None = None

    @property
    def key(self) -> tuple[str, str, int]:
        """What the ledger keys this job by: (case, model, repeat)."""
        return (self.case, self.model, self.repeat)

    def event_fields(self) -> dict[str, str | int]:
        """The job as ``events.jsonl`` names it: its case and model, and its repeat when it
        is not the first (additive, as in the summary)."""
        if self.repeat == 1:
            return {"case": self.case, "model": self.model}
        return {"case": self.case, "model": self.model, "repeat": self.repeat}

    def take_outcome(self, outcome: RecordOutcome, *, resumed: bool, place: bool = True) -> Job:
        """This job at what its newest record says of it (``run_support.results.
        record_outcome``, the one mapping from a record to a job's outcome), attribute by
        attribute: a resume does it 100,000 times. ``resumed``: the record is an earlier
        invocation's. ``place=False``: the driver, which has just written the record, keeps
        the attempt count and run dir it holds for the job (they are the record's)."""
        self.resumed = resumed
        self.status = outcome.status
        self.duration_seconds = outcome.duration_seconds
        self.failure_category = outcome.category
        if place:
            self.attempts = outcome.attempts
            self.run_dir = outcome.run_dir
        self.steps = outcome.steps
        self.reason = outcome.reason
        self.usage = outcome.usage
        self.score = outcome.score
        return self

    @property
    def decision_reason(self) -> str:
        """Why the plan decided as it did: "no recorded outcome", "recorded passed in
        m/run-dir", "recorded error (api_or_credit) is retried"...

        A carried job's is told from what it carries when no other was given: a resume of
        a million carried jobs need not hold a million such lines."""
        if self.decision_note is not None:
            return self.decision_note
        what = self.status
        if self.status != "passed":
            what = f"{self.status} ({self.failure_category})"
        return f"recorded {what} in {self.run_dir}"

    @decision_reason.setter
    def decision_reason(self, reason: str) -> None:
        self.decision_note = reason

    @property
    def needs_run(self) -> bool:
        return self.decision != "carry"

    @property
    def not_selected(self) -> bool:
        """Skipped only because the selection left it out (it never ran in this batch)."""
        return self.status == "skipped" and self.decision_reason == NOT_SELECTED
