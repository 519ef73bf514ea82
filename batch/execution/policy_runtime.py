"""The policies applied while a sweep runs: halt, the per-model breaker and the deadline.

The decisions are pure (:mod:`batch.policies`); this module holds their state for one
invocation, answers the scheduler's gate (:mod:`batch.execution.gate`) and turns every
finished attempt into the breaker's and the halt rule's evidence. It says what happened
through ``emit`` (``events.jsonl``), ``message`` (the display) and ``on_halt`` (the
``notify`` commands: every halt kept, the deadline's and a budget's soft ones too), and
returns a :class:`~batch.policies.halt.Halt` for the execution to act on. docs/policies.md.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from batch.execution.gate import GateDecision
from batch.plan.jobs import FINAL_STATUSES, Job
from batch.policies.breaker import Breakers, Transition
from batch.policies.deadline import Deadline, expected_duration, start_refusal
from batch.policies.halt import FinalTally, Finish, Halt, HaltConfig, KeptFinishes, decide_halt
from batch.sweep.features.policies import resolve_breaker
from batch.sweep.load import Sweep

Emit = Callable[..., None]


@attrs.frozen
class DeadlineAt:
    """A deadline on the driver's monotonic clock: fixed once, so a wall-clock jump in the
    night cannot move it."""

    deadline: Deadline
    at: float


class PolicyRuntime:
    def __init__(
        self,
        sweep: Sweep,
        jobs: Sequence[Job],
        *,
        halt: HaltConfig,
        deadline: DeadlineAt | None,
        clock: Callable[[], float],
        emit: Emit,
        message: Callable[[str], None],
        resume_command: str,
        on_halt: Callable[[Halt], None] = lambda halt: None,
    ) -> None:
        self.halt_config = halt
        self.max_concurrent = sweep.max_concurrent
        self.deadline = deadline
        self._clock = clock
        self._emit = emit
        self._say = message
        #: Lines held back by ``messages_held``; None: said at once.
        self._held: list[str] | None = None
        self._resume_command = resume_command
        self._on_halt = on_halt
        self.breakers = Breakers(
            resolve_breaker(sweep.breaker, None),
            {m.id: resolve_breaker(sweep.breaker, m.breaker) for m in sweep.models},
        )
        #: Half-open trials running: the job's key -> its trial number (Breakers.trial).
        self._trials: dict[tuple[str, str, int], int] = {}
        self._opened_because: dict[str, str] = {}
        #: The models with a job to run in this invocation.
        self._models = sorted({job.model for job in jobs if job.needs_run})
        #: What the halt rules can still read of the finishes (most are only counted).
        self._finishes = KeptFinishes(halt.window(sweep.max_concurrent))
        self._tally = FinalTally()
        #: Every finished duration per model, carried jobs' too: the deadline's estimate.
        self._durations: dict[str, list[float]] = {}
        #: Per model: (how many durations it was computed from, the model's p90).
        self._expected: dict[str, tuple[int, float | None]] = {}
        for job in jobs:
            if job.status in FINAL_STATUSES and job.duration_seconds is not None:
                self._durations.setdefault(job.model, []).append(job.duration_seconds)
        #: What stopped the sweep (or, for the deadline, what it refused), once decided.
        self.halt: Halt | None = None

    # --- the gate ---------------------------------------------------------------------------

    def gate(self, job: Job) -> GateDecision:
        """The deadline first, then the breaker: a breaker's ``start`` may claim the one
        half-open trial, so it must be the last word."""
        refused = self._deadline_refusal(job)
        if refused is not None:
            return GateDecision.skip(refused)
        return self._breaker_gate(job)

    def _deadline_refusal(self, job: Job) -> str | None:
        if self.deadline is None:
            return None
        left = self.deadline.at - self._clock()
        expected = self._expected_duration(job)
        refused = start_refusal(self.deadline.deadline, expected, left)
        if refused is not None and self.halt is None:
            self.decide(
                Halt(
                    "soon",
                    f"deadline {self.deadline.deadline.label}: starting no job that would end "
                    f"after it ({self._resume_command} runs them later)",
                    "deadline",
                )
            )
        return refused

    def _expected_duration(self, job: Job) -> float | None:
        durations = self._durations.get(job.model, [])
        counted, typical = self._expected.get(job.model, (-1, None))
        # Sorting every duration after every finish would make a long sweep quadratic:
        # recomputed once the history has grown by 1 % (always while it is short).
        if len(durations) != counted and (len(durations) < 1000 or len(durations) > counted * 1.01):
            typical = expected_duration(durations, None)
            self._expected[job.model] = (len(durations), typical)
        if typical is None:
            return job.timeout
        return typical if job.timeout is None else min(typical, job.timeout)

    def _breaker_gate(self, job: Job) -> GateDecision:
        now = self._clock()
        if self.breakers.may_start(job.model, now):
            transition = self.breakers.started(job.model, now)
            if self.breakers.state(job.model, now) == "half_open":
                self._trials[job.key] = self.breakers.trial(job.model)
            if transition is not None:
                self._breaker_changed(transition)
            return GateDecision.start()
        # Why it opened, as said when it did (a late failure adds to the count, not to it).
        reason = f"breaker open: {self._opened_because.get(job.model, '')}"
        if self.breakers.config(job.model).cooldown is None:
            return GateDecision.skip(reason)
        # Open until the cooldown passes, or half-open while its one trial runs.
        return GateDecision.wait(reason, until=self.breakers.half_opens_at(job.model))

    def _breaker_changed(self, transition: Transition) -> None:
        if transition.new == "open":
            self._opened_because[transition.model] = transition.reason
        self._emit(
            "breaker", model=transition.model, state=transition.new, reason=transition.reason
        )
        what = {
            "open": "breaker open, starting none of its jobs",
            "half_open": "breaker half-open",
            "closed": "breaker closed",
        }[transition.new]
        self._message(f"{transition.model}: {what} ({transition.reason})")

    # --- finishes ---------------------------------------------------------------------------

    def finished(
        self, job: Job, *, status: str, category: str | None, reason: str, final: bool
    ) -> Halt | None:
        """An attempt of ``job`` ended (``final``: no in-run retry follows); a halt the
        sweep must act on, the first time one is decided."""
        if job.duration_seconds is not None:
            self._durations.setdefault(job.model, []).append(job.duration_seconds)
        trial = self._trials.pop(job.key, 0)
        now = self._clock()
        transition = self.breakers.record(job.model, status, category, now, trial=trial)
        # A retry the breaker this finish opened will refuse never runs: the finish is final.
        final = final or self.retry_refusal(job) is not None
        finish = Finish(status, category, reason.strip(), final, model=job.model)
        self._finishes.add(finish)
        self._tally.add(finish)
        config = self.halt_config
        if transition is not None:
            self._breaker_changed(transition)
            if transition.new == "open" and self._every_breaker_open(now):
                # Nothing can run any more: judge the setup by the finishes seen so far
                # (a typo'd command opens a one-model sweep's breaker before the window).
                config = attrs.evolve(config, setup_window=self._finishes.count)
        decided = decide_halt(
            config,
            self._finishes.kept,
            max_concurrent=self.max_concurrent,
            resume_command=self._resume_command,
            tally=self._tally,
        )
        return None if decided is None else self.decide(decided)

    def retry_refusal(self, job: Job) -> str | None:
        """Why the gate would never start an in-run retry of ``job`` now (its model's
        breaker open for good), or None: no ``RETRY`` line is said for a retry that never
        runs. A breaker with a cooldown only delays it (the retry waits to half-open it)."""
        now = self._clock()
        if self.breakers.may_start(job.model, now) or self.breakers.config(job.model).cooldown:
            return None
        return f"breaker open: {self._opened_because.get(job.model, '')}"

    def _every_breaker_open(self, now: float) -> bool:
        return all(self.breakers.state(model, now) != "closed" for model in self._models)

    def deadline_reached(self, running: int) -> Halt | None:
        """The deadline passed: stop the running jobs too (or, with none, start nothing)."""
        assert self.deadline is not None
        label = self.deadline.deadline.label
        if running:
            text = f"deadline {label} reached: stopping {running} running job(s)"
        else:
            text = f"deadline {label} reached: starting no new jobs"
        return self.decide(
            Halt(
                "now" if running else "soon",
                f"{text} ({self._resume_command} runs them later)",
                "deadline",
            )
        )

    def decide(self, halt: Halt) -> Halt | None:
        """Keep ``halt`` unless one as strong is kept already (:func:`_strength`). Returns it
        when kept, after saying so once in the events, on the display and to ``on_halt``."""
        if self.halt is not None and _strength(halt) <= _strength(self.halt):
            return None
        self.halt = halt
        self._emit("halt", rule=halt.rule, mode=halt.mode, message=halt.message)
        self._message(halt.message)
        self._on_halt(halt)
        return halt

    def _message(self, text: str) -> None:
        if self._held is None:
            self._say(text)
        else:
            self._held.append(text)

    @contextlib.contextmanager
    def messages_held(self) -> Iterator[None]:
        """Say the lines the policies decide inside (a breaker opened, a halt) only at its
        end, after the finish's own line."""
        self._held = []
        try:
            yield
        finally:
            held, self._held = self._held, None
            for text in held:
                self._say(text)

    def summary_halt(self) -> Mapping[str, Any] | None:
        """The summary's top-level ``halt``, once the sweep halted."""
        if self.halt is None:
            return None
        return {"rule": self.halt.rule, "mode": self.halt.mode, "message": self.halt.message}


def _strength(halt: Halt) -> int:
    """A deadline's or a budget's refusals stop nothing else; any other halt stops starting
    jobs; ``now`` stops the running ones too. A stronger halt replaces a weaker one."""
    if halt.mode == "now":
        return 2
    return 0 if halt.rule in ("deadline", "budget") else 1


def stops_starting(halt: Halt | None) -> bool:
    """Whether ``halt`` stops the sweep starting jobs: every halt but a deadline's ``soon``,
    which refuses only the starts that would end after it."""
    return halt is not None and not (halt.rule == "deadline" and halt.mode == "soon")
