"""The halt policy: parsing ``halt``, thresholds, and the default broken-setup rule."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batch.policies.halt import (
    HALT_OFF,
    PERCENT_MIN_FINISHED,
    FinalTally,
    Finish,
    HaltConfig,
    HaltRule,
    KeptFinishes,
    decide_halt,
    parse_halt,
)

INFRA = Finish("error", "infra_failure", "cannot start 'nonexistent-binary'")
PASS = Finish("passed", None, "exit code 0")
MODEL = Finish("failed", "model_failure", "exit code 1")
RATE = Finish("error", "api_or_credit", "exit code 2; output.log matches '429'")
NO_SETUP_RULE = HaltConfig(rule=None, setup_rule=False)
HINT = "write off, or e.g. soon,fail=3, now,fail=10% or soon,error=5"


def with_rule(text: str) -> HaltConfig:
    """Only the explicit rule, so a test of it is not decided by the broken-setup rule."""
    return HaltConfig(rule=parse_halt(text).rule, setup_rule=False)


class TestParse:
    def test_count_of_failures(self) -> None:
        rule = parse_halt("soon,fail=3").rule
        assert rule == HaltRule("soon", frozenset({"error", "failed"}), count=3)

    def test_percentage_of_errors_now(self) -> None:
        rule = parse_halt("now,error=10%").rule
        assert rule == HaltRule("now", frozenset({"error"}), percent=10.0)

    def test_rule_text_round_trips(self) -> None:
        for text in ("soon,fail=3", "now,fail=10%", "soon,error=5", "now,error=12.5%"):
            rule = parse_halt(text).rule
            assert rule is not None and rule.text == text

    def test_spaces_and_case_in_a_rule_are_ignored(self) -> None:
        assert parse_halt(" Soon, fail = 3 ") == parse_halt("soon,fail=3")
        assert parse_halt("now , error=10 %").rule == HaltRule(
            "now", frozenset({"error"}), percent=10.0
        )

    def test_explicit_rule_keeps_the_setup_rule(self) -> None:
        assert parse_halt("soon,error=5").setup_rule

    def test_off_disables_everything(self) -> None:
        assert parse_halt(" OFF ") == HALT_OFF
        assert decide_halt(HALT_OFF, [INFRA] * 50, max_concurrent=4) is None

    @pytest.mark.parametrize(
        "text",
        ["", "soon", "later,fail=3", "soon,fail=0", "soon,fail=-1", "soon,fail=1.5",
         "now,fail=0%", "now,fail=101%", "soon,success=3", "soon;fail=3"],
    )  # fmt: skip
    def test_bad_values_say_how_to_write_one(self, text: str) -> None:
        with pytest.raises(ValueError, match="halt") as caught:
            parse_halt(text)
        assert "\n" not in str(caught.value)

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("soon", f"cannot read halt 'soon' ({HINT})"),
            ("now,fail=0%", "halt 'now,fail=0%': a percentage must be above 0 and at most 100"),
            ("now,fail=101%", "halt 'now,fail=101%': a percentage must be above 0 and at most 100"),
            ("soon,fail=0", "halt 'soon,fail=0': a count must be a whole number of at least 1"),
            ("soon,fail=1.5", "halt 'soon,fail=1.5': a count must be a whole number of at least 1"),
        ],
    )
    def test_bad_values_say_exactly_what_is_wrong(self, text: str, message: str) -> None:
        with pytest.raises(ValueError) as caught:
            parse_halt(text)
        assert str(caught.value) == message

    @pytest.mark.parametrize("text", ["now,fail=100%", "now,fail=0.5%", "soon,error=1"])
    def test_the_bounds_themselves_are_rules(self, text: str) -> None:
        rule = parse_halt(text).rule
        assert rule is not None and rule.text == text


class TestThreshold:
    def test_count_fires_at_the_count_and_not_before(self) -> None:
        config = with_rule("soon,fail=3")
        finishes = [PASS, MODEL, PASS, INFRA]
        assert decide_halt(config, finishes, max_concurrent=4) is None
        halt = decide_halt(config, [*finishes, MODEL], max_concurrent=4)
        assert halt is not None
        assert halt.mode == "soon"
        assert halt.rule == "threshold"
        assert halt.message == (
            "halt soon,fail=3: 3 of 5 finished jobs ended in error or failed; "
            "starting no new jobs (batch SWEEP --resume continues)"
        )

    def test_a_now_rule_says_it_stops_all_jobs(self) -> None:
        halt = decide_halt(
            with_rule("now,error=1"), [INFRA], max_concurrent=1, resume_command="batch s.yaml -r"
        )
        assert halt is not None and halt.message == (
            "halt now,error=1: 1 of 1 finished jobs ended in error; "
            "stopping all jobs (batch s.yaml -r continues)"
        )

    def test_error_rule_ignores_model_failures(self) -> None:
        config = with_rule("now,error=2")
        assert decide_halt(config, [MODEL] * 10 + [INFRA], max_concurrent=1) is None
        halt = decide_halt(config, [MODEL] * 10 + [INFRA, RATE], max_concurrent=1)
        assert halt is not None and halt.mode == "now"

    def test_retried_attempts_are_not_finished_jobs(self) -> None:
        config = with_rule("soon,error=2")
        retried = Finish("error", "api_or_credit", "429", final=False)
        assert decide_halt(config, [retried] * 5 + [RATE], max_concurrent=1) is None

    def test_percentage_waits_for_enough_finishes(self) -> None:
        config = with_rule("soon,error=10%")
        assert decide_halt(config, [INFRA] * (PERCENT_MIN_FINISHED - 1), max_concurrent=1) is None
        assert decide_halt(config, [INFRA] * PERCENT_MIN_FINISHED, max_concurrent=1) is not None

    def test_a_percentage_says_nothing_until_10_jobs_have_finished(self) -> None:
        # docs/policies.md, "Stop early".
        config = with_rule("soon,error=10%")
        assert decide_halt(config, [INFRA] * 9, max_concurrent=1) is None
        assert decide_halt(config, [INFRA] * 10, max_concurrent=1) is not None

    def test_100_percent_means_every_finished_job(self) -> None:
        config = with_rule("now,error=100%")
        assert decide_halt(config, [PASS] + [INFRA] * 199, max_concurrent=1) is None
        assert decide_halt(config, [INFRA] * 200, max_concurrent=1) is not None

    def test_a_small_percentage_needs_one_job_at_least(self) -> None:
        config = with_rule("soon,error=1%")
        assert decide_halt(config, [PASS] * 10, max_concurrent=1) is None
        assert decide_halt(config, [PASS] * 9 + [INFRA], max_concurrent=1) is not None

    def test_percentage_compares_whole_jobs(self) -> None:
        config = with_rule("soon,error=10%")
        assert decide_halt(config, [PASS] * 27 + [INFRA] * 2, max_concurrent=1) is None
        assert decide_halt(config, [PASS] * 27 + [INFRA] * 3, max_concurrent=1) is not None


class TestBrokenSetup:
    def test_default_fires_after_the_window_with_category_and_reason(self) -> None:
        config = HaltConfig()
        assert decide_halt(config, [INFRA] * 7, max_concurrent=2) is None
        halt = decide_halt(config, [INFRA] * 8, max_concurrent=2)
        assert halt is not None
        assert halt.mode == "soon" and halt.rule == "setup"
        assert halt.message == (
            "first 8 jobs all ended in infra_failure (cannot start 'nonexistent-binary'): "
            "stopping; fix the setup, then batch SWEEP --resume"
        )

    def test_window_is_twice_max_concurrent_when_larger(self) -> None:
        config = HaltConfig()
        assert decide_halt(config, [RATE] * 19, max_concurrent=10) is None
        halt = decide_halt(config, [RATE] * 20, max_concurrent=10, resume_command="batch s.yaml")
        assert halt is not None
        assert halt.message.startswith("first 20 jobs all ended in api_or_credit (")
        assert halt.message.endswith("then batch s.yaml")

    def test_the_message_quotes_the_first_attempt_and_no_empty_reason(self) -> None:
        first, second = INFRA, Finish("error", "infra_failure", "connection reset")
        halt = decide_halt(HaltConfig(setup_window=2), [first, second], max_concurrent=1)
        assert halt is not None and "(cannot start 'nonexistent-binary')" in halt.message
        silent = [Finish("error", "infra_failure")] * 2
        halt = decide_halt(HaltConfig(setup_window=2), silent, max_concurrent=1)
        assert halt is not None and halt.message == (
            "first 2 jobs all ended in infra_failure: stopping; fix the setup, then "
            "batch SWEEP --resume"
        )

    def test_a_window_of_one_attempt_and_of_none(self) -> None:
        assert decide_halt(HaltConfig(setup_window=1), [INFRA], max_concurrent=1) is not None
        for finishes in ([], [INFRA]):
            assert decide_halt(HaltConfig(setup_window=0), finishes, max_concurrent=1) is None

    def test_errors_without_a_category_are_not_a_broken_setup(self) -> None:
        unnamed = [Finish("error", None, "exit code 2")] * 8
        assert decide_halt(HaltConfig(), unnamed, max_concurrent=1) is None

    @pytest.mark.parametrize("odd_one", [PASS, MODEL, RATE])
    def test_one_other_outcome_in_the_window_means_not_a_setup_problem(
        self, odd_one: Finish
    ) -> None:
        finishes = [INFRA] * 3 + [odd_one] + [INFRA] * 40
        assert decide_halt(HaltConfig(), finishes, max_concurrent=2) is None

    def test_the_last_finish_of_the_window_counts_too(self) -> None:
        finishes = [INFRA] * 7 + [PASS] + [INFRA] * 10
        assert decide_halt(HaltConfig(), finishes, max_concurrent=4) is None

    def test_explicit_window(self) -> None:
        halt = decide_halt(HaltConfig(setup_window=3), [INFRA] * 3, max_concurrent=8)
        assert halt is not None and halt.message.startswith("first 3 jobs")

    def test_setup_rule_counts_retried_attempts(self) -> None:
        retried = Finish("error", "infra_failure", "connection refused", final=False)
        halt = decide_halt(HaltConfig(), [retried] * 8, max_concurrent=1)
        assert halt is not None and "(connection refused)" in halt.message


finishes = st.lists(
    st.builds(
        Finish,
        status=st.sampled_from(["passed", "failed", "error"]),
        category=st.sampled_from([None, "infra_failure", "api_or_credit", "model_failure"]),
        reason=st.just("r"),
        final=st.booleans(),
    ),
    max_size=40,
)


@settings(max_examples=100, deadline=None)
@given(finishes=finishes, count=st.integers(1, 20), fail=st.booleans())
def test_a_count_never_fires_before_it_is_reached(
    finishes: list[Finish], count: int, fail: bool
) -> None:
    statuses = frozenset({"error", "failed"} if fail else {"error"})
    config = HaltConfig(rule=HaltRule("soon", statuses, count=count), setup_rule=False)
    matching = sum(f.final and f.status in statuses for f in finishes)
    fired = decide_halt(config, finishes, max_concurrent=4) is not None
    assert fired == (matching >= count)


@settings(max_examples=100, deadline=None)
@given(finishes=finishes, percent=st.floats(0.5, 100))
def test_a_percentage_never_fires_below_it(finishes: list[Finish], percent: float) -> None:
    config = HaltConfig(
        rule=HaltRule("now", frozenset({"error"}), percent=percent), setup_rule=False
    )
    final = [f for f in finishes if f.final]
    if decide_halt(config, finishes, max_concurrent=4) is not None:
        assert len(final) >= PERCENT_MIN_FINISHED
        assert sum(f.status == "error" for f in final) * 100 >= percent * len(final) - 1e-6


@settings(max_examples=100, deadline=None)
@given(finishes=finishes, max_concurrent=st.integers(1, 12))
def test_the_setup_rule_fires_only_on_a_uniform_window(
    finishes: list[Finish], max_concurrent: int
) -> None:
    halt = decide_halt(HaltConfig(), finishes, max_concurrent=max_concurrent)
    window = max(8, 2 * max_concurrent)
    if halt is not None:
        head = finishes[:window]
        assert len(head) == window
        assert {(f.status, f.category) for f in head} == {("error", head[0].category)}
        assert head[0].category is not None


RETRIED = Finish("error", "api_or_credit", "429", final=False)


@settings(max_examples=100, deadline=None)
@given(
    finishes=st.lists(st.sampled_from([INFRA, PASS, MODEL, RATE, RETRIED]), max_size=40),
    text=st.sampled_from(["soon,fail=3", "now,error=10%", "soon,fail=25%", "now,error=2"]),
)
def test_a_tally_kept_as_jobs_finish_decides_as_a_recount_of_every_finish(
    finishes: list[Finish], text: str
) -> None:
    # The driver keeps the tally (one update per finish) instead of recounting them all on
    # each finish, which made a 100,000-job sweep with a halt rule quadratic.
    config = with_rule(text)
    tally = FinalTally()
    for seen, finish in enumerate(finishes, start=1):
        tally.add(finish)
        kept = decide_halt(config, [], max_concurrent=1, tally=tally)
        assert kept == decide_halt(config, finishes[:seen], max_concurrent=1)


FINISHES = st.builds(
    Finish,
    st.sampled_from(["passed", "failed", "error"]),
    st.sampled_from([None, "infra_failure", "api_or_credit"]),
    st.sampled_from(["", "exit code 1", "exit code 2"]),
    st.booleans(),
    model=st.sampled_from(["m1", "m2"]),
)


class TestKeptFinishes:
    @settings(max_examples=300, deadline=None)
    @given(st.lists(FINISHES, max_size=30), st.integers(min_value=1, max_value=10))
    def test_the_rules_decide_from_the_kept_finishes_as_from_every_one(
        self, finishes: list[Finish], window: int
    ) -> None:
        kept = KeptFinishes(window)
        for finish in finishes:
            kept.add(finish)
        assert kept.count == len(finishes)
        # The sweep's window, and every finish so far (the runtime's, every breaker open).
        for config in (HaltConfig(setup_window=window), HaltConfig(setup_window=len(finishes))):
            assert decide_halt(config, kept.kept, max_concurrent=4) == decide_halt(
                config, finishes, max_concurrent=4
            )

    def test_a_sweep_that_passes_keeps_only_the_first_window(self) -> None:
        kept = KeptFinishes(8)
        for _ in range(1000):
            kept.add(PASS)
        assert (len(kept.kept), kept.count) == (8, 1000)

    def test_finishes_that_may_still_be_a_broken_setup_are_all_kept(self) -> None:
        kept = KeptFinishes(8)
        for _ in range(100):
            kept.add(INFRA)
        assert len(kept.kept) == 100
        kept.add(PASS)
        kept.add(INFRA)
        assert len(kept.kept) == 100
