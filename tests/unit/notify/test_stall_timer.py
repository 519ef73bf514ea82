"""The driver's stall timer (batch/notify/stall_timer.py), on a fake clock: nothing here
waits."""

from __future__ import annotations

import asyncio

import pytest
from helpers.builders import FakeTime

from batch.notify.stall_timer import POLL, StallTimer


def make(stall: float = 60.0) -> tuple[StallTimer, FakeTime, list[tuple[str, float]]]:
    fake = FakeTime()
    seen: list[tuple[str, float]] = []
    timer = StallTimer(
        stall,
        on_stall=lambda quiet, running: seen.append(("stall", quiet)),
        on_recovered=lambda quiet: seen.append(("recovered", quiet)),
        clock=fake.clock,
        sleep=fake.sleep,
    )
    return timer, fake, seen


def run_for(timer: StallTimer, fake: FakeTime, seconds: float) -> None:
    """Run the timer's loop until the fake clock has moved ``seconds`` on."""
    end = fake.now + seconds

    async def sleep_until_end(wait: float) -> None:
        fake.sleeps.append(wait)
        fake.now += wait
        if fake.now >= end:
            raise asyncio.CancelledError

    timer._sleep = sleep_until_end
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(timer.run())


def test_a_busy_quiet_sweep_stalls_once_on_time() -> None:
    timer, fake, seen = make(stall=60.0)
    timer.job_started()
    run_for(timer, fake, 300.0)
    assert seen == [("stall", pytest.approx(60.0))]
    assert max(fake.sleeps) <= POLL


def test_a_finish_recovers_and_a_second_stall_fires_again() -> None:
    timer, fake, seen = make(stall=60.0)
    timer.job_started()
    timer.job_started()
    run_for(timer, fake, 100.0)
    timer.job_ended(finished=True)  # at 100 s: quiet since 0
    run_for(timer, fake, 100.0)
    assert seen == [
        ("stall", pytest.approx(60.0)),
        ("recovered", pytest.approx(100.0)),
        ("stall", pytest.approx(60.0)),
    ]


def test_nothing_running_never_stalls() -> None:
    timer, fake, seen = make(stall=60.0)
    run_for(timer, fake, 600.0)
    timer.job_started()
    timer.job_ended(finished=True)
    run_for(timer, fake, 600.0)
    assert seen == []


def test_a_lost_attempt_is_no_progress() -> None:
    timer, fake, seen = make(stall=60.0)
    timer.job_started()
    timer.job_started()
    fake.now = 50.0
    timer.job_ended(finished=False)  # lost with its worker: no record, no finish
    fake.now = 60.0
    assert timer.check()
    assert seen == [("stall", 60.0)]


def test_the_quiet_restarts_when_work_resumes_after_an_idle_spell() -> None:
    timer, fake, _ = make(stall=60.0)
    timer.job_started()
    fake.now = 10.0
    timer.job_ended(finished=True)
    fake.now = 1000.0  # a long retry backoff with nothing running
    timer.job_started()
    fake.now = 1059.0
    assert not timer.check()
    fake.now = 1060.0
    assert timer.check()
