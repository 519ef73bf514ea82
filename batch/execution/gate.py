"""The scheduler's gate: whether a job whose turn it is starts, is skipped, or waits.

A policy (breaker, deadline, budget) answers for one job at a time with a
:class:`GateDecision`; the scheduler asks only when the job could start otherwise (its turn,
a free slot), so a policy sees exactly the jobs it decides about.

- ``GateDecision.start()``: the job starts now. A gate may count on it: the scheduler starts
  the job (or, only while the sweep stops, starts nothing more).
- ``GateDecision.skip(reason)``: the job does not run in this invocation; the scheduler
  hands it to ``on_skip(job, reason)`` and goes on with the next.
- ``GateDecision.wait(reason, until=...)``: not now; ask again when something finishes, or
  at ``until`` (the scheduler's clock) if given. When nothing runs and nothing else can
  wake it, a waiting job is skipped with ``reason``, so the run always ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import attrs

from batch.plan.jobs import Job

GateAction = Literal["start", "skip", "wait"]


@attrs.frozen
class GateDecision:
    action: GateAction
    #: Why a job is skipped or waits (``breaker open: 5 consecutive api_or_credit``).
    reason: str = ""
    #: ``wait`` only: when asking again may give another answer; None: when a job finishes.
    until: float | None = None

    @classmethod
    def start(cls) -> GateDecision:
        return _START

    @classmethod
    def skip(cls, reason: str) -> GateDecision:
        return cls("skip", reason)

    @classmethod
    def wait(cls, reason: str = "", until: float | None = None) -> GateDecision:
        return cls("wait", reason, until)


_START = GateDecision("start")

Gate = Callable[[Job], GateDecision]
OnSkip = Callable[[Job, str], None]


def combine(*gates: Gate) -> Gate:
    """One gate asking each of ``gates`` in turn: the first that does not say start decides."""

    def gate(job: Job) -> GateDecision:
        for each in gates:
            decision = each(job)
            if decision.action != "start":
                return decision
        return _START

    return gate
