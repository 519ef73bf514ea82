"""The scheduler's gate: a policy starts, skips or holds back the job whose turn it is."""

from __future__ import annotations

import asyncio

from helpers.builders import FakeTime

from batch.execution.gate import GateDecision, combine
from batch.execution.scheduler import Scheduler
from batch.plan.jobs import Job


def jobs(cases: int, models: list[str]) -> list[Job]:
    return [Job(case=f"c{c}", model=m) for c in range(cases) for m in models]


class Runs:
    """A run_job that records the order of starts and finishes each job at once."""

    def __init__(self) -> None:
        self.started: list[tuple[str, str]] = []

    async def __call__(self, job: Job) -> float | None:
        self.started.append(job.key)
        await asyncio.sleep(0)
        return None


def run(scheduler: Scheduler, work: list[Job], runs: Runs) -> None:
    asyncio.run(scheduler.run([work], runs))


def test_skipped_jobs_go_to_on_skip_and_the_other_models_run() -> None:
    skipped: list[tuple[str, str, str]] = []
    runs = Runs()
    scheduler = Scheduler(
        max_concurrent=2,
        clock=FakeTime().clock,
        gate=lambda job: (
            GateDecision.skip("model down") if job.model == "b" else GateDecision.start()
        ),
        on_skip=lambda job, reason: skipped.append((job.case, job.model, reason)),
    )
    run(scheduler, jobs(3, ["a", "b"]), runs)
    assert runs.started == [("c0", "a", 1), ("c1", "a", 1), ("c2", "a", 1)]
    assert skipped == [(f"c{i}", "b", "model down") for i in range(3)]


def test_a_waiting_model_holds_up_no_other_and_runs_once_the_gate_opens() -> None:
    runs = Runs()
    # Model "b" may start only after two jobs of "a" have started.
    scheduler = Scheduler(
        max_concurrent=1,
        clock=FakeTime().clock,
        gate=lambda job: (
            GateDecision.wait("not yet")
            if job.model == "b" and len(runs.started) < 2
            else GateDecision.start()
        ),
    )
    run(scheduler, jobs(2, ["b", "a"]), runs)
    assert runs.started == [("c0", "a", 1), ("c1", "a", 1), ("c0", "b", 1), ("c1", "b", 1)]


def test_the_run_ends_when_only_waiting_jobs_remain_and_they_are_skipped_with_the_reason() -> None:
    skipped: list[tuple[str, str]] = []
    runs = Runs()
    scheduler = Scheduler(
        max_concurrent=2,
        clock=FakeTime().clock,
        gate=lambda job: (
            GateDecision.wait("budget spent") if job.model == "b" else GateDecision.start()
        ),
        on_skip=lambda job, reason: skipped.append((job.key[0], reason)),
    )
    asyncio.run(asyncio.wait_for(scheduler.run([jobs(2, ["a", "b"])], runs), timeout=5))
    assert runs.started == [("c0", "a", 1), ("c1", "a", 1)]
    assert skipped == [("c0", "budget spent"), ("c1", "budget spent")]


def test_a_wait_until_a_time_is_asked_again_then_on_the_injected_clock() -> None:
    fake = FakeTime()
    runs = Runs()
    scheduler = Scheduler(
        max_concurrent=1,
        clock=fake.clock,
        sleep=fake.sleep,
        gate=lambda job: (
            GateDecision.wait("cooling down", until=60.0)
            if fake.now < 60.0
            else GateDecision.start()
        ),
    )
    run(scheduler, jobs(2, ["a"]), runs)
    assert runs.started == [("c0", "a", 1), ("c1", "a", 1)]
    assert fake.now == 60.0


def test_combined_gates_ask_in_turn_and_the_first_refusal_decides() -> None:
    asked: list[str] = []

    def first(job: Job) -> GateDecision:
        asked.append("first")
        return GateDecision.skip("first says no") if job.case == "c0" else GateDecision.start()

    def second(job: Job) -> GateDecision:
        asked.append("second")
        return GateDecision.start()

    gate = combine(first, second)
    assert gate(Job(case="c0", model="a")) == GateDecision.skip("first says no")
    assert asked == ["first"]
    assert gate(Job(case="c1", model="a")) == GateDecision.start()
    assert asked == ["first", "first", "second"]


def test_a_retry_the_gate_skips_when_it_comes_back_ends_the_run() -> None:
    skipped: list[str] = []
    attempts: list[str] = []

    async def fails_once(job: Job) -> float | None:
        attempts.append(job.case)
        await asyncio.sleep(0)
        return 0.01 if len(attempts) == 1 else None  # the first asks for a retry

    scheduler = Scheduler(
        max_concurrent=1,
        clock=FakeTime().clock,
        gate=lambda job: GateDecision.skip("no") if attempts else GateDecision.start(),
        on_skip=lambda job, reason: skipped.append(job.case),
    )
    work = [Job(case="c0", model="a")]
    asyncio.run(asyncio.wait_for(scheduler.run([work], fails_once), timeout=5))
    assert attempts == ["c0"]
    assert skipped == ["c0"]
