"""``run_support.usage``: what a job reports it spent, read tolerantly and summed exactly."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from run_support import jsonio
from run_support.usage import (
    MAX_COST_USD,
    MAX_COUNT,
    NO_USAGE,
    Usage,
    parse_usage,
    previous_total,
    total,
    usage_in_result,
    usage_of,
)


class TestParse:
    def test_every_field_is_read(self) -> None:
        raw = {"input_tokens": 1200, "output_tokens": 340, "requests": 3, "cost_usd": 0.0123}
        parsed = parse_usage(raw)
        assert parsed.usage == Usage(1200, 340, 3, 0.0123)
        assert parsed.problems == ()
        assert parsed.problem is None

    def test_any_subset_leaves_the_rest_unreported(self) -> None:
        usage = parse_usage({"cost_usd": 2}).usage
        assert usage == Usage(cost_usd=2.0)
        assert usage.input_tokens is None and usage.tokens is None

    @pytest.mark.parametrize("raw", [None, {}])
    def test_absent_or_empty_is_nothing_reported(self, raw: object) -> None:
        parsed = parse_usage(raw)
        assert parsed.usage == NO_USAGE
        assert not parsed.usage.reported
        assert parsed.problems == ()

    def test_null_fields_are_not_reported(self) -> None:
        assert parse_usage({"input_tokens": None, "requests": 1}).usage == Usage(requests=1)

    def test_a_reported_zero_is_reported(self) -> None:
        usage = parse_usage({"cost_usd": 0}).usage
        assert usage.reported
        assert usage.cost_usd == 0.0

    @pytest.mark.parametrize(
        ("raw", "message"),
        [
            ({"cost_usd": -1}, "usage.cost_usd is -1, not a number of at least 0"),
            ({"cost_usd": math.nan}, "usage.cost_usd is nan, not a number of at least 0"),
            ({"cost_usd": math.inf}, "usage.cost_usd is inf, not a number of at least 0"),
            ({"cost_usd": "0.5"}, "usage.cost_usd is a string, not a number of at least 0"),
            ({"cost_usd": True}, "usage.cost_usd is True, not a number of at least 0"),
            ({"input_tokens": -5}, "usage.input_tokens is -5, not a whole number of at least 0"),
            (
                {"output_tokens": 1.5},
                "usage.output_tokens is 1.5, not a whole number of at least 0",
            ),
            ({"requests": False}, "usage.requests is False, not a whole number of at least 0"),
            ({"requests": [1]}, "usage.requests is a list, not a whole number of at least 0"),
            ({"requests": {"n": 1}}, "usage.requests is a dict, not a whole number of at least 0"),
        ],
    )
    def test_an_invalid_value_is_left_out_and_named(self, raw: dict, message: str) -> None:
        parsed = parse_usage(raw)
        assert parsed.usage == NO_USAGE
        assert parsed.problems == (message,)
        assert parsed.problem == message

    def test_valid_fields_beside_an_invalid_one_still_count(self) -> None:
        parsed = parse_usage({"input_tokens": 10, "output_tokens": "many", "cost_usd": -0.1})
        assert parsed.usage == Usage(input_tokens=10)
        assert parsed.problem == (
            "usage.output_tokens is a string, not a whole number of at least 0; "
            "usage.cost_usd is -0.1, not a number of at least 0"
        )

    @pytest.mark.parametrize(
        ("raw", "kind"), [([1, 2], "a list"), ("lots", "a string"), (7, "an integer")]
    )
    def test_usage_that_is_not_an_object_is_nothing_reported(self, raw: object, kind: str) -> None:
        parsed = parse_usage(raw, where="steps[1].usage")
        assert parsed.usage == NO_USAGE
        assert parsed.problems == (f"steps[1].usage is {kind}, not an object",)

    def test_unknown_keys_are_kept_aside_and_never_counted(self) -> None:
        parsed = parse_usage({"input_tokens": 5, "cache_read_tokens": 900, "provider": "x"})
        assert parsed.usage == Usage(input_tokens=5)
        assert parsed.other == {"cache_read_tokens": 900, "provider": "x"}
        assert parsed.problems == ()
        assert parsed.usage.to_json() == {"input_tokens": 5}

    def test_numbers_up_to_the_bound_are_kept_exactly(self) -> None:
        parsed = parse_usage({"input_tokens": MAX_COUNT, "cost_usd": MAX_COST_USD})
        assert parsed.problems == ()
        assert parsed.usage == Usage(input_tokens=10**15, cost_usd=1e9)

    @pytest.mark.parametrize(
        ("raw", "problem"),
        [
            ({"input_tokens": 10**15 + 1}, "usage.input_tokens is 1000000000000001, not a "
             "count of at most 10^15"),
            ({"requests": int("9" * 4300)}, "usage.requests is an integer past 64 bits, not a "
             "count of at most 10^15"),
            ({"output_tokens": 2.0**80}, "usage.output_tokens is 1.209e+24, not a count of "
             "at most 10^15"),
            ({"cost_usd": 1.7e308}, "usage.cost_usd is 1.700e+308, not a cost of at most "
             "10^9 dollars"),
            ({"cost_usd": 10**400}, "usage.cost_usd is an integer past 64 bits, not a cost "
             "of at most 10^9 dollars"),
        ],
    )  # fmt: skip
    def test_a_number_past_the_bound_is_left_out_and_named(
        self, raw: dict[str, object], problem: str
    ) -> None:
        parsed = parse_usage(raw)
        assert parsed.usage == NO_USAGE
        assert parsed.problem == problem

    def test_a_total_read_back_may_be_a_thousand_runs_at_the_bound(self) -> None:
        assert usage_of({"input_tokens": 1000 * MAX_COUNT}) == Usage(input_tokens=10**18)
        assert usage_of({"input_tokens": 1000 * MAX_COUNT + 1}) == NO_USAGE
        assert usage_of({"cost_usd": 1.7e308}) == NO_USAGE

    def test_a_huge_negative_count_is_named_without_quoting_it(self) -> None:
        parsed = parse_usage({"input_tokens": -(10**5000)})
        assert parsed.problem == (
            "usage.input_tokens is a negative integer past 64 bits, "
            "not a whole number of at least 0"
        )

    def test_usage_of_reads_back_what_is_valid(self) -> None:
        assert usage_of({"requests": 2, "cost_usd": "?"}) == Usage(requests=2)
        assert usage_of("garbage") == NO_USAGE


class TestToJson:
    def test_only_reported_fields_in_a_stable_order(self) -> None:
        usage = Usage(cost_usd=1.5, requests=2, input_tokens=7)
        assert list(usage.to_json()) == ["input_tokens", "requests", "cost_usd"]
        assert jsonio.dumps(usage.to_json()) == b'{"input_tokens":7,"requests":2,"cost_usd":1.5}\n'

    def test_nothing_reported_writes_an_empty_object(self) -> None:
        assert NO_USAGE.to_json() == {}

    def test_a_summed_cost_is_written_without_float_noise(self) -> None:
        assert (Usage(cost_usd=0.1) + Usage(cost_usd=0.2)).to_json() == {"cost_usd": 0.3}

    def test_round_trip(self) -> None:
        usage = Usage(1, 2, 3, 0.25)
        assert parse_usage(jsonio.loads(jsonio.dumps(usage.to_json()))).usage == usage


class TestSums:
    def test_unreported_plus_reported_is_the_reported(self) -> None:
        assert Usage(input_tokens=3) + Usage(cost_usd=0.5) == Usage(input_tokens=3, cost_usd=0.5)

    def test_unreported_plus_unreported_stays_unreported(self) -> None:
        assert (Usage(requests=1) + Usage(requests=2)).cost_usd is None
        assert not (NO_USAGE + NO_USAGE).reported

    def test_tokens_are_input_plus_output(self) -> None:
        assert Usage(input_tokens=10, output_tokens=5).tokens == 15
        assert Usage(output_tokens=5).tokens == 5

    def test_total_of_nothing_is_nothing_reported(self) -> None:
        assert total([]) == NO_USAGE
        assert total([None, NO_USAGE]) == NO_USAGE

    def test_total_sums_steps_and_attempts(self) -> None:
        eval_step = Usage(input_tokens=1000, output_tokens=200, requests=4, cost_usd=0.03)
        judge_step = Usage(input_tokens=300, output_tokens=10, requests=1)
        assert total([eval_step, None, judge_step]) == Usage(1300, 210, 5, 0.03)

    def test_total_of_many_small_costs_does_not_drift(self) -> None:
        assert total([Usage(cost_usd=0.1)] * 10).cost_usd == 1.0

    def test_adding_anything_else_is_a_type_error(self) -> None:
        with pytest.raises(TypeError):
            Usage() + 1  # type: ignore[operator]


_counts = st.none() | st.integers(min_value=0, max_value=MAX_COUNT)
_costs = st.none() | st.floats(min_value=0, max_value=1e9, allow_nan=False)
_usages = st.builds(Usage, _counts, _counts, _counts, _costs)


@given(st.lists(_usages, max_size=8))
def test_total_matches_pairwise_sums_of_the_counts(usages: list[Usage]) -> None:
    summed = total(usages)
    pairwise = NO_USAGE
    for usage in usages:
        pairwise = pairwise + usage
    assert (summed.input_tokens, summed.output_tokens, summed.requests) == (
        pairwise.input_tokens,
        pairwise.output_tokens,
        pairwise.requests,
    )
    assert (summed.cost_usd is None) == (pairwise.cost_usd is None)
    assert summed.reported == any(usage.reported for usage in usages)


@given(_usages)
def test_what_is_written_reads_back_the_same(usage: Usage) -> None:
    again = parse_usage(jsonio.loads(jsonio.dumps(usage.to_json())))
    assert again.problems == ()
    assert again.usage.to_json() == usage.to_json()


def test_a_whole_float_count_is_the_integer_it_denotes() -> None:
    # What some languages write for any number.
    usage = parse_usage({"input_tokens": float(2**40), "requests": 3.0}).usage
    assert usage == Usage(input_tokens=2**40, requests=3)
    assert type(usage.input_tokens) is int and type(usage.requests) is int


class TestFromFiles:
    def test_usage_in_result_reads_the_usage_object(self) -> None:
        data = b'{"outcome": "passed", "usage": {"requests": 2, "cost_usd": 0.5}}'
        assert usage_in_result(data).usage == Usage(requests=2, cost_usd=0.5)

    def test_usage_in_result_keeps_the_problems(self) -> None:
        data = b'{"outcome": "failed", "usage": {"requests": -2}}'
        assert usage_in_result(data).problem == (
            "usage.requests is -2, not a whole number of at least 0"
        )

    @pytest.mark.parametrize(
        "data", [None, OSError(13, "Permission denied"), b"", b"{trunc", b"[1]", b'{"x": 1}']
    )
    def test_a_result_file_without_usable_json_reports_nothing(self, data: object) -> None:
        parsed = usage_in_result(data)  # type: ignore[arg-type]
        assert parsed.usage == NO_USAGE
        assert parsed.problems == ()

    def test_previous_total_prefers_the_recorded_total(self) -> None:
        assert previous_total({"cost_usd": 3}, {"cost_usd": 1}) == Usage(cost_usd=3.0)

    def test_previous_total_of_an_older_record_is_its_usage(self) -> None:
        assert previous_total(None, {"cost_usd": 1}) == Usage(cost_usd=1.0)
        assert previous_total(None, None) == NO_USAGE
