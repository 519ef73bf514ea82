"""The scheduler starts jobs in order within the limits, driven by a fake clock."""

from __future__ import annotations

import asyncio
import gc
import time
import tracemalloc

import pytest
from helpers.builders import FakeTime

from batch.execution.scheduler import Scheduler
from batch.plan.jobs import Job


def jobs(cases: int, models: list[str]) -> list[Job]:
    return [Job(case=f"c{c}", model=m) for c in range(cases) for m in models]


class Recorder:
    """A run_job that holds each job until the test releases it, and records concurrency."""

    def __init__(self, fake: FakeTime | None = None) -> None:
        self.started: list[tuple[str, str]] = []
        self.start_times: list[float] = []
        self.live: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.peak_total = 0
        self.fake = fake

    async def __call__(self, job: Job) -> float | None:
        self.started.append(job.key)
        if self.fake is not None:
            self.start_times.append(self.fake.now)
        self.live[job.model] = self.live.get(job.model, 0) + 1
        self.peak[job.model] = max(self.peak.get(job.model, 0), self.live[job.model])
        self.peak_total = max(self.peak_total, sum(self.live.values()))
        await asyncio.sleep(0.001)
        self.live[job.model] -= 1
        return None


def run(scheduler: Scheduler, blocks, run_job, **kwargs) -> None:
    asyncio.run(scheduler.run(blocks, run_job, **kwargs))


def test_every_job_runs_once_in_interleaved_order_with_one_slot() -> None:
    fake = FakeTime()
    recorder = Recorder()
    work = jobs(3, ["a", "b"])
    run(Scheduler(max_concurrent=1, clock=fake.clock, sleep=fake.sleep), [work], recorder)
    assert recorder.started == [job.key for job in work]


def test_global_limit_is_never_exceeded() -> None:
    fake = FakeTime()
    recorder = Recorder()
    run(Scheduler(max_concurrent=3, clock=fake.clock), [jobs(10, ["a", "b"])], recorder)
    assert recorder.peak_total == 3
    assert len(recorder.started) == 20


def test_per_model_limit_holds_while_other_models_fill_the_free_slots() -> None:
    fake = FakeTime()
    recorder = Recorder()
    scheduler = Scheduler(max_concurrent=4, model_limits={"slow": 1}, clock=fake.clock)
    run(scheduler, [jobs(8, ["slow", "fast"])], recorder)
    assert recorder.peak["slow"] == 1
    assert recorder.peak["fast"] == 3
    assert len(recorder.started) == 16


def test_stagger_keeps_a_minimum_gap_between_starts() -> None:
    fake = FakeTime()
    recorder = Recorder(fake)
    scheduler = Scheduler(max_concurrent=4, stagger=2.0, clock=fake.clock, sleep=fake.sleep)
    run(scheduler, [jobs(5, ["a"])], recorder)
    gaps = [b - a for a, b in zip(recorder.start_times, recorder.start_times[1:], strict=False)]
    assert gaps == [2.0, 2.0, 2.0, 2.0]


def test_stop_starts_nothing_new_and_lets_running_jobs_finish() -> None:
    fake = FakeTime()
    scheduler = Scheduler(max_concurrent=2, clock=fake.clock)
    started: list[str] = []
    finished: list[str] = []
    release = asyncio.Event()

    async def run_job(job: Job) -> None:
        started.append(job.case)
        await release.wait()
        finished.append(job.case)

    async def scenario() -> None:
        sweep = asyncio.create_task(scheduler.run([jobs(10, ["a"])], run_job))
        while len(started) < 2:
            await asyncio.sleep(0)
        scheduler.stop()
        release.set()
        await sweep

    asyncio.run(scenario())
    assert started == finished == ["c0", "c1"]
    assert [job.case for job in scheduler.queued()] == [f"c{i}" for i in range(2, 10)]


def test_a_retried_job_waits_its_delay_without_holding_a_slot() -> None:
    # Real (short) time: the retry timer must really wait while other jobs use the slot.
    starts: list[tuple[str, float]] = []

    async def run_job(job: Job) -> float | None:
        starts.append((job.case, time.monotonic()))
        await asyncio.sleep(0.01)
        first = sum(case == "c0" for case, _ in starts) == 1
        return 0.2 if job.case == "c0" and first else None

    scheduler = Scheduler(max_concurrent=1, clock=time.monotonic)
    run(scheduler, [jobs(3, ["a"])], run_job)
    assert [case for case, _ in starts] == ["c0", "c1", "c2", "c0"]
    assert starts[-1][1] - starts[0][1] >= 0.2


def test_blocks_run_one_after_another_with_the_hook_before_each() -> None:
    fake = FakeTime()
    events: list[str] = []

    async def before(block) -> None:
        events.append(f"switch to {block[0].model}")

    async def run_job(job: Job) -> None:
        events.append(job.key[0] + job.model)
        await asyncio.sleep(0)

    blocks = [jobs(2, ["a"]), jobs(2, ["b"])]
    run(Scheduler(max_concurrent=4, clock=fake.clock), blocks, run_job, before_block=before)
    assert events == ["switch to a", "c0a", "c1a", "switch to b", "c0b", "c1b"]


def test_an_unexpected_error_stops_starting_and_is_raised_after_running_jobs_end() -> None:
    fake = FakeTime()
    finished: list[str] = []

    async def run_job(job: Job) -> None:
        if job.case == "c1":
            raise RuntimeError("boom")
        await asyncio.sleep(0.01)
        finished.append(job.case)

    with pytest.raises(RuntimeError, match="boom"):
        run(Scheduler(max_concurrent=2, clock=fake.clock), [jobs(6, ["a"])], run_job)
    assert finished == ["c0"]


def test_a_block_keeps_nothing_per_job_once_its_jobs_have_started() -> None:
    # A sweep is one block (docs/design.md, "What the driver holds per job"): by its last
    # job's start, the block's jobs left nothing behind in the scheduler.
    work = jobs(4000, ["a"])
    held: list[int] = []

    async def run_job(job: Job) -> None:
        if job is work[-1]:
            gc.collect()  # the finished jobs' tasks, not yet collected, are not held
            held.append(tracemalloc.get_traced_memory()[0] - before)

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        run(Scheduler(max_concurrent=1, clock=time.monotonic), [work], run_job)
    finally:
        tracemalloc.stop()
    assert held and held[0] < 40 * 1000  # 10 bytes a job; a map of the jobs was 130
