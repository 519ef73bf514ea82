"""The per-model circuit breaker: opening, cooldown, the one half-open trial, closing."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from batch.policies.breaker import BreakerConfig, Breakers, Transition


def fail_times(breakers: Breakers, model: str, count: int, now: float = 0.0) -> list[Transition]:
    moves = [breakers.record(model, "error", "api_or_credit", now) for _ in range(count)]
    return [move for move in moves if move is not None]


class TestOpening:
    def test_five_consecutive_non_model_failures_open_it(self) -> None:
        breakers = Breakers()
        assert fail_times(breakers, "m", 4) == []
        assert breakers.may_start("m", 0.0)
        assert fail_times(breakers, "m", 1) == [
            Transition("m", "closed", "open", "5 consecutive api_or_credit")
        ]
        assert not breakers.may_start("m", 1e9)
        assert breakers.skip_reason("m") == "breaker open: 5 consecutive api_or_credit"

    def test_other_models_go_on(self) -> None:
        breakers = Breakers()
        fail_times(breakers, "down", 5)
        assert breakers.may_start("up", 0.0)

    def test_a_pass_or_model_failure_breaks_the_run(self) -> None:
        breakers = Breakers()
        fail_times(breakers, "m", 4)
        assert breakers.record("m", "failed", "model_failure", 0.0) is None
        assert fail_times(breakers, "m", 4) == []
        assert breakers.may_start("m", 0.0)

    def test_mixed_counted_categories_are_named_together(self) -> None:
        breakers = Breakers(BreakerConfig(threshold=2))
        breakers.record("m", "error", "infra_failure", 0.0)
        move = breakers.record("m", "error", "api_or_credit", 0.0)
        assert move is not None and move.reason == "2 consecutive api_or_credit or infra_failure"

    def test_uncounted_non_model_category_does_not_open_it(self) -> None:
        breakers = Breakers(BreakerConfig(threshold=1))
        assert breakers.record("m", "error", "task_data", 0.0) is None
        assert breakers.may_start("m", 0.0)

    def test_uncounted_non_model_category_does_not_reset_the_run(self) -> None:
        breakers = Breakers()
        fail_times(breakers, "m", 4)
        assert breakers.record("m", "error", "task_data", 0.0) is None
        assert len(fail_times(breakers, "m", 1)) == 1
        # Nor does it close an open breaker: it says nothing about the provider.
        assert breakers.record("m", "error", "task_data", 0.0) is None
        assert not breakers.may_start("m", 0.0)

    def test_a_pass_never_counts_whatever_its_category(self) -> None:
        breakers = Breakers(BreakerConfig(threshold=1))
        assert breakers.record("m", "passed", "api_or_credit", 0.0) is None
        assert breakers.may_start("m", 0.0)

    def test_a_reset_run_forgets_the_categories_it_had(self) -> None:
        breakers = Breakers(BreakerConfig(threshold=2))
        breakers.record("m", "error", "infra_failure", 0.0)
        breakers.record("m", "passed", None, 0.0)
        fail_times(breakers, "m", 2)
        assert breakers.skip_reason("m") == "breaker open: 2 consecutive api_or_credit"

    def test_a_model_never_opened_runs_no_trial(self) -> None:
        assert Breakers().trial("m") == 0

    def test_per_model_threshold_and_disabled(self) -> None:
        breakers = Breakers(
            BreakerConfig(threshold=5),
            {"flaky": BreakerConfig(threshold=2), "off": BreakerConfig(enabled=False)},
        )
        assert len(fail_times(breakers, "flaky", 2)) == 1
        assert fail_times(breakers, "off", 50) == []
        assert breakers.may_start("off", 0.0)


class TestCooldown:
    def test_without_cooldown_it_stays_open(self) -> None:
        breakers = Breakers(BreakerConfig(threshold=1))
        fail_times(breakers, "m", 1)
        assert breakers.state("m", 1e12) == "open"

    def test_half_opens_after_the_cooldown_for_one_job(self) -> None:
        breakers = Breakers(BreakerConfig(threshold=1, cooldown=60.0))
        fail_times(breakers, "m", 1, now=100.0)
        assert not breakers.may_start("m", 159.9)
        assert breakers.may_start("m", 160.0)
        move = breakers.started("m", 160.0)
        assert move == Transition("m", "open", "half_open", "cooldown passed: one job tries")
        assert not breakers.may_start("m", 161.0)

    def test_says_when_waiting_helps(self) -> None:
        breakers = Breakers(BreakerConfig(threshold=1, cooldown=60.0), {"x": BreakerConfig(1)})
        assert breakers.half_opens_at("m") is None
        fail_times(breakers, "m", 1, now=100.0)
        fail_times(breakers, "x", 1, now=100.0)
        assert breakers.half_opens_at("m") == 160.0
        assert breakers.half_opens_at("x") is None  # no cooldown: waiting cannot help

    def test_trial_pass_closes_it(self) -> None:
        breakers = Breakers(BreakerConfig(threshold=1, cooldown=60.0))
        fail_times(breakers, "m", 1)
        breakers.started("m", 60.0)
        move = breakers.record("m", "passed", None, 70.0, trial=breakers.trial("m"))
        assert move is not None and (move.old, move.new) == ("half_open", "closed")
        assert breakers.may_start("m", 70.0)

    def test_a_closed_breaker_lets_every_job_start_again(self) -> None:
        breakers = Breakers(BreakerConfig(threshold=1, cooldown=60.0))
        fail_times(breakers, "m", 1)
        breakers.started("m", 60.0)
        move = breakers.record("m", "passed", None, 70.0, trial=breakers.trial("m"))
        assert move == Transition(
            "m", "half_open", "closed", "a job passed: the model answers again"
        )
        assert breakers.state("m", 70.0) == "closed"
        assert breakers.started("m", 71.0) is None  # not a trial: jobs start freely
        assert breakers.may_start("m", 71.0)

    def test_a_late_job_ending_in_an_uncounted_category_leaves_the_trial_in_charge(self) -> None:
        breakers = Breakers(BreakerConfig(threshold=1, cooldown=60.0))
        fail_times(breakers, "m", 1)
        breakers.started("m", 60.0)
        trial = breakers.trial("m")
        assert breakers.record("m", "error", "task_data", 61.0) is None  # started before
        assert not breakers.may_start("m", 62.0)
        assert breakers.record("m", "error", "api_or_credit", 70.0, trial=trial) == Transition(
            "m", "half_open", "open", "2 consecutive api_or_credit"
        )

    def test_trial_model_failure_closes_it(self) -> None:
        breakers = Breakers(BreakerConfig(threshold=1, cooldown=60.0))
        fail_times(breakers, "m", 1)
        breakers.started("m", 60.0)
        move = breakers.record("m", "failed", "model_failure", 70.0, trial=breakers.trial("m"))
        assert move is not None and move.new == "closed"
        assert move.reason == "a job failed: the model answers again"

    def test_trial_failure_reopens_for_a_new_cooldown(self) -> None:
        breakers = Breakers(BreakerConfig(threshold=3, cooldown=60.0))
        fail_times(breakers, "m", 3)
        breakers.started("m", 60.0)
        move = breakers.record("m", "error", "infra_failure", 70.0, trial=breakers.trial("m"))
        assert move == Transition(
            "m", "half_open", "open", "4 consecutive api_or_credit or infra_failure"
        )
        assert not breakers.may_start("m", 129.0)
        assert breakers.may_start("m", 130.0)

    def test_a_trial_ending_in_an_uncounted_category_lets_another_job_try(self) -> None:
        # task_data says nothing about the provider: the breaker is as it was before the
        # trial (open, cooldown passed), so the next job is a new trial, not skipped.
        breakers = Breakers(BreakerConfig(threshold=1, cooldown=60.0))
        fail_times(breakers, "m", 1)
        breakers.started("m", 60.0)
        assert breakers.record("m", "error", "task_data", 70.0, trial=breakers.trial("m")) is None
        assert breakers.state("m", 70.0) == "half_open"
        assert breakers.may_start("m", 70.0)
        assert breakers.started("m", 70.0) == Transition(
            "m", "open", "half_open", "cooldown passed: one job tries"
        )
        assert not breakers.may_start("m", 71.0)
        move = breakers.record("m", "passed", None, 80.0, trial=breakers.trial("m"))
        assert move is not None and move.new == "closed"

    def test_a_late_failure_of_an_earlier_job_restarts_the_cooldown(self) -> None:
        breakers = Breakers(BreakerConfig(threshold=1, cooldown=60.0))
        fail_times(breakers, "m", 1, now=0.0)
        assert breakers.record("m", "error", "api_or_credit", 50.0) is None
        assert not breakers.may_start("m", 100.0)
        assert breakers.may_start("m", 110.0)

    def test_a_late_failure_during_the_trial_leaves_the_trial_alone(self) -> None:
        breakers = Breakers(BreakerConfig(threshold=1, cooldown=60.0))
        fail_times(breakers, "m", 1)
        breakers.started("m", 60.0)
        assert breakers.record("m", "error", "api_or_credit", 61.0) is None
        assert breakers.state("m", 62.0) == "half_open"
        assert not breakers.may_start("m", 1e9)


events = st.lists(
    st.one_of(
        st.tuples(st.just("start"), st.floats(0, 50)),
        st.tuples(
            st.sampled_from(["passed", "failed", "error"]),
            st.sampled_from([None, "model_failure", "api_or_credit", "infra_failure"]),
            st.floats(0, 50),
            st.integers(0, 100),
        ),
    ),
    max_size=60,
)


@settings(max_examples=100, deadline=None)
@given(events=events, threshold=st.integers(1, 4), cooldown=st.sampled_from([None, 5.0, 30.0]))
# The first trial outlives a close and a reopen, then ends in an error the breaker does not
# count, while the second trial runs: no third job may start beside that one.
@example(
    events=[
        ("start", 0.0), ("start", 0.0), ("start", 0.0), ("failed", "api_or_credit", 0.0, 0),
        ("start", 5.0), ("passed", None, 0.0, 0), ("failed", "api_or_credit", 0.0, 0),
        ("start", 5.0), ("error", None, 0.0, 0), ("start", 0.0),
    ],
    threshold=1,
    cooldown=5.0,
)  # fmt: skip
def test_never_a_start_while_the_half_open_trial_runs(
    events: list[tuple[object, ...]], threshold: int, cooldown: float | None
) -> None:
    """A model of the driver: jobs start only when allowed and finish in any order. From a
    start while half-open until that job ends or the breaker leaves half-open, no other
    job starts, whatever jobs of earlier periods (an earlier trial too) do meanwhile."""
    breakers = Breakers(BreakerConfig(threshold=threshold, cooldown=cooldown))
    now = 0.0
    running: list[tuple[int, int]] = []  # per running job: (its number, its trial number)
    trial_job: int | None = None  # the running job this half-open period's trial is
    for number, event in enumerate(events):
        if event[0] == "start":
            now += float(event[1])  # type: ignore[arg-type]
            if breakers.may_start("m", now):
                half_open = breakers.state("m", now) == "half_open"
                move = breakers.started("m", now)
                assert (move is not None) == half_open
                running.append((number, breakers.trial("m") if half_open else 0))
                if half_open:
                    trial_job = number
            if breakers.state("m", now) == "open":
                assert not breakers.may_start("m", now)
        elif running:
            status, category, step, which = event
            now += float(step)  # type: ignore[arg-type]
            job, trial = running.pop(int(which) % len(running))  # type: ignore[call-overload]
            breakers.record("m", str(status), category, now, trial=trial)  # type: ignore[arg-type]
            if job == trial_job or breakers.state("m", now) != "half_open":
                trial_job = None
        if trial_job is not None:
            assert not breakers.may_start("m", now)


@settings(max_examples=100, deadline=None)
@given(
    outcomes=st.lists(st.sampled_from(["passed", "failed", "api", "infra"]), max_size=40),
    threshold=st.integers(1, 6),
)
def test_opens_exactly_when_the_run_reaches_the_threshold(
    outcomes: list[str], threshold: int
) -> None:
    breakers = Breakers(BreakerConfig(threshold=threshold))
    run = 0
    for outcome in outcomes:
        category = {"api": "api_or_credit", "infra": "infra_failure"}.get(outcome)
        status = "error" if category else outcome
        breakers.record(
            "m", status, category or ("model_failure" if status == "failed" else None), 0.0
        )
        run = run + 1 if category else 0
        assert breakers.may_start("m", 0.0) == (run < threshold)
        if run >= threshold:
            break
