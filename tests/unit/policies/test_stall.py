"""The stall policy (batch/policy_stall.py): once per stall, re-armed by a finish."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from batch.policies.stall import StallWatch


class TestStallWatch:
    def test_not_due_before_the_stall_duration(self) -> None:
        watch = StallWatch(stall=60.0, since=100.0)
        assert not watch.is_due(running=2, now=159.9)
        assert watch.is_due(running=2, now=160.0)
        assert watch.due_at(running=2) == 160.0

    def test_nothing_running_is_waiting_not_stalling(self) -> None:
        watch = StallWatch(stall=60.0, since=0.0)
        assert watch.due_at(running=0) is None
        assert not watch.is_due(running=0, now=10_000.0)

    def test_fires_once_per_stall(self) -> None:
        watch = StallWatch(stall=60.0, since=0.0)
        assert watch.is_due(running=1, now=61.0)
        watch = watch.fire()
        assert not watch.is_due(running=1, now=500.0)
        assert watch.due_at(running=1) is None

    def test_a_finish_rearms_and_reports_the_recovery(self) -> None:
        watch = StallWatch(stall=60.0, since=0.0).fire()
        watch, recovered = watch.job_finished(now=300.0)
        assert recovered
        assert not watch.is_due(running=1, now=359.0)
        assert watch.is_due(running=1, now=360.0)

    def test_a_finish_without_a_stall_is_no_recovery(self) -> None:
        watch, recovered = StallWatch(stall=60.0, since=0.0).job_finished(now=30.0)
        assert not recovered
        assert watch.due_at(running=1) == 90.0

    def test_a_start_after_an_idle_spell_restarts_the_quiet(self) -> None:
        # Nothing ran from 10 s (the last finish) to 1000 s (a retry's backoff, say).
        watch, _ = StallWatch(stall=60.0, since=0.0).job_finished(now=10.0)
        watch = watch.job_started(running_before=0, now=1000.0)
        assert not watch.is_due(running=1, now=1059.0)
        assert watch.is_due(running=1, now=1060.0)

    def test_a_start_beside_running_jobs_does_not_hide_a_stall(self) -> None:
        watch = StallWatch(stall=60.0, since=0.0).job_started(running_before=3, now=50.0)
        assert watch.is_due(running=4, now=60.0)
        # One other job running is enough: the quiet still counts from before.
        watch = StallWatch(stall=60.0, since=0.0).job_started(running_before=1, now=50.0)
        assert watch.is_due(running=2, now=60.0)


# --- properties over any sequence of starts, finishes and timer checks ----------------------

_steps = st.lists(
    st.tuples(
        st.floats(min_value=0.0, max_value=50.0, allow_nan=False),
        st.sampled_from(["start", "finish", "check"]),
    ),
    max_size=60,
)


def _simulate(stall: float, steps: list[tuple[float, str]]) -> list[tuple[float, str]]:
    """Drive a watch as the driver would; the events it sends, with their times."""
    now, running = 0.0, 0
    watch = StallWatch(stall=stall, since=now)
    sent: list[tuple[float, str]] = []
    for gap, kind in steps:
        now += gap
        if kind == "start":
            watch = watch.job_started(running, now)
            running += 1
        elif kind == "finish" and running:
            running -= 1
            watch, recovered = watch.job_finished(now)
            sent.append((now, "finish"))
            if recovered:
                sent.append((now, "recovered"))
        elif kind == "check" and watch.is_due(running, now):
            watch = watch.fire()
            sent.append((now, "stall"))
    return sent


@given(st.floats(min_value=1.0, max_value=100.0), _steps)
def test_at_most_one_stall_between_finishes(stall: float, steps: list[tuple[float, str]]) -> None:
    kinds = [kind for _, kind in _simulate(stall, steps) if kind != "recovered"]
    assert "stall, stall" not in ", ".join(kinds)


@given(st.floats(min_value=1.0, max_value=100.0), _steps)
def test_a_recovery_follows_a_stall_only(stall: float, steps: list[tuple[float, str]]) -> None:
    sent = _simulate(stall, steps)
    stalled = False
    for _, kind in sent:
        if kind == "recovered":
            assert stalled
            stalled = False
        elif kind == "stall":
            stalled = True


@given(st.floats(min_value=1.0, max_value=100.0), _steps)
def test_a_stall_fires_only_after_quiet_of_the_full_duration(
    stall: float, steps: list[tuple[float, str]]
) -> None:
    sent = _simulate(stall, steps)
    last_finish = 0.0
    for at, kind in sent:
        if kind == "finish":
            last_finish = at
        elif kind == "stall":
            # As the watch adds it (due at last + stall): the difference can be an ulp short.
            assert at >= last_finish + stall


@given(st.floats(min_value=1.0, max_value=100.0), st.integers(min_value=1, max_value=5))
def test_a_busy_sweep_without_finishes_stalls_exactly_once(stall: float, jobs: int) -> None:
    steps = [(0.0, "start")] * jobs + [(stall / 3, "check")] * 30
    assert [kind for _, kind in _simulate(stall, steps)] == ["stall"]
