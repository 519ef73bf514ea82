"""The policies while a sweep runs: what the gate answers and what each finish decides,
driven by a fake clock, with the events and display lines they produce."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from helpers.builders import make_job, make_jobs
from helpers.fake_jobs import make_sweep

from batch.execution.gate import GateDecision
from batch.execution.policy_runtime import DeadlineAt, PolicyRuntime
from batch.plan.jobs import Job
from batch.policies.deadline import parse_deadline
from batch.policies.halt import Halt, HaltConfig, parse_halt
from batch.sweep.load import ModelSpec

NOW = datetime(2026, 11, 30, 5, 0, tzinfo=timezone(timedelta(hours=1)))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Harness:
    def __init__(
        self,
        tmp_path: Path,
        jobs: list[Job],
        *,
        models: tuple[str | ModelSpec, ...] = ("m",),
        halt: HaltConfig | None = None,
        deadline: DeadlineAt | None = None,
        **sweep_fields: Any,
    ) -> None:
        self.clock = Clock()
        self.events: list[dict[str, Any]] = []
        self.lines: list[str] = []
        #: What ``on_halt`` (the notify commands) was handed.
        self.notified: list[tuple[str, str]] = []
        sweep = make_sweep(tmp_path, ["true"], models=models, **sweep_fields)
        self.runtime = PolicyRuntime(
            sweep,
            jobs,
            halt=halt or sweep.halt,
            deadline=deadline,
            clock=self.clock,
            emit=lambda event, **fields: self.events.append({"event": event, **fields}),
            message=self.lines.append,
            resume_command="batch sweep.yaml --resume",
            on_halt=lambda halt: self.notified.append((halt.rule, halt.mode)),
        )

    def finish(self, job: Job, status: str, category: str | None = None, reason: str = "") -> Any:
        return self.runtime.finished(
            job, status=status, category=category, reason=reason, final=True
        )


def test_a_one_model_typo_opens_the_breaker_and_then_halts_with_the_setup_line(
    tmp_path: Path,
) -> None:
    jobs = make_jobs([f"c{n}" for n in range(20)], ["m"])
    harness = Harness(tmp_path, jobs, max_concurrent=2)
    halts = [
        harness.finish(job, "error", "infra_failure", "cannot start 'nonexistent-binary'")
        for job in jobs[:5]
    ]
    assert halts[:4] == [None] * 4
    assert halts[4] is not None
    assert (halts[4].rule, halts[4].mode) == ("setup", "soon")
    assert harness.lines == [
        "m: breaker open, starting none of its jobs (5 consecutive infra_failure)",
        "first 5 jobs all ended in infra_failure (cannot start 'nonexistent-binary'): "
        "stopping; fix the setup, then batch sweep.yaml --resume",
    ]
    assert [event["event"] for event in harness.events] == ["breaker", "halt"]
    assert harness.runtime.summary_halt() == {
        "rule": "setup",
        "mode": "soon",
        "message": harness.lines[1],
    }


def test_an_open_breaker_of_one_model_halts_nothing_while_another_model_runs(
    tmp_path: Path,
) -> None:
    jobs = make_jobs([f"c{n}" for n in range(20)], ["dead", "live"])
    harness = Harness(tmp_path, jobs, models=("dead", "live"))
    dead = [job for job in jobs if job.model == "dead"]
    assert [harness.finish(job, "error", "api_or_credit") for job in dead[:5]] == [None] * 5
    assert harness.runtime.gate(dead[5]) == GateDecision.skip(
        "breaker open: 5 consecutive api_or_credit"
    )
    live = next(job for job in jobs if job.model == "live")
    assert harness.runtime.gate(live) == GateDecision.start()
    assert harness.runtime.halt is None
    # A job started before it opened fails late: the reason stays the one it opened with.
    harness.finish(dead[5], "error", "api_or_credit")
    assert harness.runtime.gate(dead[6]) == GateDecision.skip(
        "breaker open: 5 consecutive api_or_credit"
    )


def test_a_cooldown_holds_the_model_then_lets_one_trial_job_try(tmp_path: Path) -> None:
    model = ModelSpec(id="m", breaker={"threshold": 2, "cooldown": 60.0})
    jobs = make_jobs(["c0", "c1", "c2", "c3"], ["m"])
    harness = Harness(tmp_path, jobs, models=(model,), halt=HaltConfig(setup_rule=False))
    runtime = harness.runtime
    harness.clock.now = 10.0
    harness.finish(jobs[0], "error", "api_or_credit")
    harness.finish(jobs[1], "error", "api_or_credit")
    reason = "breaker open: 2 consecutive api_or_credit"
    assert runtime.gate(jobs[2]) == GateDecision.wait(reason, until=70.0)
    harness.clock.now = 70.0
    assert runtime.gate(jobs[2]) == GateDecision.start()  # the one trial
    assert runtime.gate(jobs[3]) == GateDecision.wait(reason, until=None)
    harness.finish(jobs[2], "failed", "model_failure")  # the model answers again
    assert runtime.gate(jobs[3]) == GateDecision.start()
    assert [(e["state"], e["reason"]) for e in harness.events] == [
        ("open", "2 consecutive api_or_credit"),
        ("half_open", "cooldown passed: one job tries"),
        ("closed", "a job failed: the model answers again"),
    ]


def test_a_failed_trial_reopens_the_breaker_for_another_cooldown(tmp_path: Path) -> None:
    model = ModelSpec(id="m", breaker={"threshold": 1, "cooldown": 60.0})
    jobs = make_jobs(["c0", "c1", "c2"], ["m"])
    harness = Harness(tmp_path, jobs, models=(model,), halt=HaltConfig(setup_rule=False))
    harness.finish(jobs[0], "error", "infra_failure")
    harness.clock.now = 60.0
    assert harness.runtime.gate(jobs[1]) == GateDecision.start()
    harness.clock.now = 65.0
    harness.finish(jobs[1], "error", "infra_failure")
    decision = harness.runtime.gate(jobs[2])
    assert (decision.action, decision.until) == ("wait", 125.0)
    assert [e["state"] for e in harness.events] == ["open", "half_open", "open"]


def test_a_threshold_rule_counts_final_failures_only(tmp_path: Path) -> None:
    jobs = make_jobs(["c0", "c1", "c2"], ["m"])
    harness = Harness(tmp_path, jobs, halt=parse_halt("now,fail=2"))
    runtime = harness.runtime
    assert runtime.finished(jobs[0], status="failed", category=None, reason="", final=True) is None
    # An attempt retried in-run is not a finished job.
    assert runtime.finished(jobs[1], status="error", category="x", reason="", final=False) is None
    halt = runtime.finished(jobs[2], status="failed", category=None, reason="", final=True)
    assert halt is not None
    assert (halt.rule, halt.mode) == ("threshold", "now")
    assert harness.events[-1] == {
        "event": "halt",
        "rule": "threshold",
        "mode": "now",
        "message": halt.message,
    }


def test_the_deadline_skips_a_job_whose_model_history_says_it_would_not_end_in_time(
    tmp_path: Path,
) -> None:
    deadline = DeadlineAt(parse_deadline("06:00", NOW), at=100.0)
    carried = make_job(case="done", model="slow", status="passed", duration_seconds=150.0)
    jobs = [carried, make_job(case="c1", model="slow"), make_job(case="c2", model="fast")]
    jobs[2].timeout = 30.0
    harness = Harness(tmp_path, jobs, models=("slow", "fast"), deadline=deadline)
    assert harness.runtime.gate(jobs[1]) == GateDecision.skip(
        "deadline 06:00: expected 2m30s, 1m40s left"
    )
    # The fast model has no history: its timeout is what it may take.
    assert harness.runtime.gate(jobs[2]) == GateDecision.start()
    harness.clock.now = 80.0
    assert harness.runtime.gate(jobs[2]).action == "skip"
    # One halt event for every refusal, and the sweep goes on with what still fits.
    assert [(e["event"], e["rule"], e["mode"]) for e in harness.events] == [
        ("halt", "deadline", "soon")
    ]


def test_a_job_with_no_estimate_starts_while_time_is_left(tmp_path: Path) -> None:
    deadline = DeadlineAt(parse_deadline("06:00", NOW), at=100.0)
    job = make_job(case="c1", model="m")
    harness = Harness(tmp_path, [job], deadline=deadline)
    assert harness.runtime.gate(job) == GateDecision.start()
    harness.clock.now = 100.0
    assert harness.runtime.gate(job) == GateDecision.skip("deadline 06:00 passed")


def test_a_threshold_halts_the_sweep_even_after_the_deadline_refused_a_job(
    tmp_path: Path,
) -> None:
    deadline = DeadlineAt(parse_deadline("06:00", NOW), at=100.0)
    jobs = [make_job(case="long", model="m"), make_job(case="c1", model="m")]
    jobs[0].timeout = 3600.0
    harness = Harness(tmp_path, jobs, halt=parse_halt("soon,fail=1"), deadline=deadline)
    assert harness.runtime.gate(jobs[0]).action == "skip"
    halt = harness.finish(jobs[1], "failed", "model_failure")
    assert halt is not None
    assert (halt.rule, halt.mode) == ("threshold", "soon")
    assert [(e["rule"], e["mode"]) for e in harness.events] == [
        ("deadline", "soon"),
        ("threshold", "soon"),
    ]


def test_every_halt_kept_is_notified_the_deadlines_soft_one_too(tmp_path: Path) -> None:
    deadline = DeadlineAt(parse_deadline("06:00", NOW), at=100.0)
    jobs = [make_job(case=f"long{n}", model="m") for n in (1, 2)] + [make_job(case="c", model="m")]
    for job in jobs[:2]:
        job.timeout = 3600.0
    harness = Harness(tmp_path, jobs, halt=parse_halt("soon,fail=1"), deadline=deadline)
    assert harness.runtime.gate(jobs[0]).action == "skip"
    assert harness.runtime.gate(jobs[1]).action == "skip"  # the same halt: said once
    assert harness.notified == [("deadline", "soon")]
    harness.finish(jobs[2], "failed", "model_failure")
    # A budget's soft halt after a stronger one is not kept, so not notified.
    assert harness.runtime.decide(Halt("soon", "budget reached", "budget")) is None
    assert harness.notified == [("deadline", "soon"), ("threshold", "soon")]
