"""Adaptive concurrency: halve on a rate limit, add one after a run of good finishes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batch.policies.aimd import NEAR_LIMIT_FACTOR, Adaptive, AimdConfig, Change


def rate_limited(adaptive: Adaptive, model: str = "m", **clock: float) -> Change | None:
    return adaptive.record(model, "error", "api_or_credit", **clock)


class TestAimd:
    def test_starts_at_max_and_halves_on_a_rate_limit(self) -> None:
        adaptive = Adaptive({"m": AimdConfig(max_concurrent=8)})
        assert adaptive.limit("m") == 8
        assert rate_limited(adaptive) == Change("m", 8, 4, "api_or_credit: halved")
        assert adaptive.limit("m") == 4

    def test_never_below_one(self) -> None:
        adaptive = Adaptive({"m": AimdConfig(max_concurrent=2)})
        rate_limited(adaptive)
        assert rate_limited(adaptive) is None
        assert adaptive.limit("m") == 1

    def test_a_run_of_current_limit_good_finishes_adds_one(self) -> None:
        adaptive = Adaptive({"m": AimdConfig(max_concurrent=8, initial=2)})
        assert adaptive.record("m", "passed", None) is None
        change = adaptive.record("m", "failed", "model_failure")
        assert change == Change("m", 2, 3, "2 finishes not rate-limited")
        for _ in range(2):
            assert adaptive.record("m", "passed", None) is None
        assert adaptive.record("m", "passed", None) == Change(
            "m", 3, 4, "3 finishes not rate-limited"
        )

    def test_a_rate_limit_restarts_the_run(self) -> None:
        adaptive = Adaptive({"m": AimdConfig(max_concurrent=8, initial=4, raise_after=2)})
        adaptive.record("m", "passed", None)
        rate_limited(adaptive)
        assert adaptive.record("m", "passed", None) is None
        assert adaptive.record("m", "passed", None) == Change(
            "m", 2, 3, "2 finishes not rate-limited"
        )

    def test_other_non_model_failures_neither_count_nor_break_the_run(self) -> None:
        adaptive = Adaptive({"m": AimdConfig(max_concurrent=4, initial=1, raise_after=2)})
        adaptive.record("m", "passed", None)
        assert adaptive.record("m", "error", "infra_failure") is None
        assert adaptive.record("m", "passed", None) is not None

    def test_the_level_last_halved_from_takes_a_longer_run_to_reach_again(self) -> None:
        adaptive = Adaptive({"m": AimdConfig(max_concurrent=8, initial=4, raise_after=1)})
        rate_limited(adaptive)  # 4 -> 2: 4 was refused
        assert adaptive.record("m", "passed", None) == Change(
            "m", 2, 3, "1 finish not rate-limited"
        )
        runs = [adaptive.record("m", "passed", None) for _ in range(NEAR_LIMIT_FACTOR)]
        assert runs == [None] * (NEAR_LIMIT_FACTOR - 1) + [
            Change("m", 3, 4, f"{NEAR_LIMIT_FACTOR} finishes not rate-limited")
        ]
        # Past it too: the provider refused 4, so 5 is probed as slowly.
        runs = [adaptive.record("m", "passed", None) for _ in range(NEAR_LIMIT_FACTOR)]
        assert runs[-1] == Change("m", 4, 5, f"{NEAR_LIMIT_FACTOR} finishes not rate-limited")

    def test_never_above_max(self) -> None:
        adaptive = Adaptive({"m": AimdConfig(max_concurrent=2, raise_after=1)})
        assert [adaptive.record("m", "passed", None) for _ in range(5)] == [None] * 5
        assert adaptive.limit("m") == 2

    def test_a_burst_of_one_window_halves_once(self) -> None:
        adaptive = Adaptive({"m": AimdConfig(max_concurrent=8)})
        # Eight attempts started at t=0; the provider answers 429 to all of them.
        assert rate_limited(adaptive, started=0.0, now=1.0) is not None
        for _ in range(7):
            assert rate_limited(adaptive, started=0.0, now=1.5) is None
        assert adaptive.limit("m") == 4
        # An attempt started after the halving that is still limited halves again.
        assert rate_limited(adaptive, started=2.0, now=3.0) == Change(
            "m", 4, 2, "api_or_credit: halved"
        )

    def test_models_that_are_not_adaptive_are_not_tracked(self) -> None:
        adaptive = Adaptive({"m": AimdConfig(max_concurrent=2)})
        assert adaptive.limit("other") is None
        assert rate_limited(adaptive, "other") is None

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"max_concurrent": 0}, "max_concurrent must be at least 1"),
            ({"max_concurrent": 2, "raise_after": 0}, "raise_after must be at least 1"),
            ({"max_concurrent": 2, "initial": 3}, "initial must be between 1 and max_concurrent"),
            ({"max_concurrent": 2, "initial": 0}, "initial must be between 1 and max_concurrent"),
        ],
    )
    def test_bad_config(self, kwargs: dict[str, int], message: str) -> None:
        with pytest.raises(ValueError) as caught:
            AimdConfig(**kwargs)
        assert str(caught.value) == message

    def test_initial_may_be_the_ceiling_itself(self) -> None:
        assert Adaptive({"m": AimdConfig(max_concurrent=2, initial=2)}).limit("m") == 2

    def test_the_level_refused_takes_a_run_four_times_as_long(self) -> None:
        # docs/policies.md: reaching the level last halved from takes a run 4 times as long.
        adaptive = Adaptive({"m": AimdConfig(max_concurrent=8, initial=4, raise_after=1)})
        rate_limited(adaptive)  # 4 -> 2
        adaptive.record("m", "passed", None)  # 2 -> 3
        runs = [adaptive.record("m", "passed", None) for _ in range(4)]
        assert runs == [None, None, None, Change("m", 3, 4, "4 finishes not rate-limited")]

    def test_a_pass_never_halves_whatever_its_category(self) -> None:
        adaptive = Adaptive({"m": AimdConfig(max_concurrent=8)})
        assert adaptive.record("m", "passed", "api_or_credit") is None
        assert adaptive.limit("m") == 8

    def test_an_attempt_started_at_the_halving_itself_halves_again(self) -> None:
        adaptive = Adaptive({"m": AimdConfig(max_concurrent=8)})
        rate_limited(adaptive, started=0.0, now=1.0)
        # Started when the limit was already halved: its 429 answers the new limit.
        assert rate_limited(adaptive, started=1.0, now=2.0) == Change(
            "m", 4, 2, "api_or_credit: halved"
        )


finishes = st.lists(
    st.tuples(
        st.sampled_from(
            [
                ("passed", None),
                ("failed", "model_failure"),
                ("error", "api_or_credit"),
                ("error", "infra_failure"),
            ]
        ),
        st.floats(0, 10),
        st.floats(0, 10),
    ),
    max_size=80,
)


@settings(max_examples=100, deadline=None)
@given(
    finishes=finishes,
    max_concurrent=st.integers(1, 16),
    raise_after=st.one_of(st.none(), st.integers(1, 5)),
    clocked=st.booleans(),
)
def test_the_limit_stays_between_one_and_max_and_every_change_is_reported(
    finishes: list[tuple[tuple[str, str | None], float, float]],
    max_concurrent: int,
    raise_after: int | None,
    clocked: bool,
) -> None:
    adaptive = Adaptive({"m": AimdConfig(max_concurrent=max_concurrent, raise_after=raise_after)})
    now = 0.0
    for (status, category), started_ago, step in finishes:
        now += step
        before = adaptive.limit("m")
        clock = {"started": now - started_ago, "now": now} if clocked else {}
        change = adaptive.record("m", status, category, **clock)
        after = adaptive.limit("m")
        assert after is not None and 1 <= after <= max_concurrent
        if change is None:
            assert after == before
        else:
            assert (change.old, change.new) == (before, after) and before != after
            if category == "api_or_credit":
                assert after == max(1, before // 2)  # type: ignore[operator]
            else:
                assert after == before + 1  # type: ignore[operator]
