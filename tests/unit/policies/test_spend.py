"""``batch.policies.spend``: which scopes have spent their budget and which jobs may start."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batch.policies.spend import (
    Budget,
    Budgets,
    Exhaustion,
    exhausted_scopes,
    parse_budget,
    skip_reason,
    spend_by_model,
)
from run_support.usage import NO_USAGE, Usage


class TestParseBudget:
    def test_both_limits(self) -> None:
        assert parse_budget({"cost_usd": 50, "tokens": 2_000_000}) == Budget(50.0, 2_000_000)

    def test_either_limit_alone(self) -> None:
        assert parse_budget({"cost_usd": 0.5}) == Budget(cost_usd=0.5)
        assert parse_budget({"tokens": 1e6}) == Budget(tokens=1_000_000)
        assert parse_budget({"tokens": 1}) == Budget(tokens=1)  # the least whole number

    def test_budgets_say_whether_any_limit_is_set(self) -> None:
        assert not Budgets().any
        assert Budgets(sweep=Budget(cost_usd=1)).any
        assert Budgets(models={"m": Budget(tokens=5)}).any

    @pytest.mark.parametrize(
        ("raw", "message"),
        [
            (50, "expected a mapping with cost_usd and/or tokens"),
            ({}, "names no limit (give cost_usd and/or tokens)"),
            ({"cost": 5}, "unknown key 'cost' (known keys: cost_usd, tokens)"),
            ({"cost_usd": 0}, "cost_usd must be a number more than 0, got 0"),
            ({"cost_usd": -1}, "cost_usd must be a number more than 0, got -1"),
            ({"cost_usd": "50"}, "cost_usd must be a number more than 0, got '50'"),
            ({"cost_usd": True}, "cost_usd must be a number more than 0, got True"),
            ({"cost_usd": math.nan}, "cost_usd must be a number more than 0, got nan"),
            ({"cost_usd": math.inf}, "cost_usd must be at most 1e+12, got inf"),
            ({"cost_usd": 10**400}, "cost_usd must be at most 1e+12, got 1" + "0" * 36 + "..."),
            ({"tokens": 1.5}, "tokens must be a whole number more than 0, got 1.5"),
            ({"tokens": 0}, "tokens must be a whole number more than 0, got 0"),
            ({"tokens": None, "cost_usd": None}, None),
        ],
    )
    def test_bad_values_say_what_is_wrong(self, raw: object, message: str | None) -> None:
        if message is None:
            # Both keys null: a budget that limits nothing is accepted as no limit.
            assert parse_budget(raw) == Budget()
            return
        with pytest.raises(ValueError) as caught:
            parse_budget(raw)
        assert str(caught.value) == message


SWEEP_50 = Budgets(sweep=Budget(cost_usd=50))


class TestExhausted:
    def test_below_the_limit_nothing_is_exhausted(self) -> None:
        spent = {"m": Usage(cost_usd=49.99)}
        assert exhausted_scopes(SWEEP_50, spent) == []
        assert skip_reason("m", SWEEP_50, spent) is None

    def test_reaching_the_limit_exactly_exhausts_it(self) -> None:
        spent = {"m": Usage(cost_usd=30), "n": Usage(cost_usd=20)}
        assert exhausted_scopes(SWEEP_50, spent) == [Exhaustion(None, "cost_usd", 50.0, 50.0)]

    def test_the_sweep_budget_counts_every_model_and_stops_every_model(self) -> None:
        spent = {"m": Usage(cost_usd=30.12), "n": Usage(cost_usd=20)}
        reason = "budget reached: cost_usd 50.12 of 50 (sweep)"
        assert skip_reason("m", SWEEP_50, spent) == reason
        assert skip_reason("other", SWEEP_50, spent) == reason

    def test_a_model_budget_stops_only_that_model(self) -> None:
        budgets = Budgets(models={"gpt-x": Budget(cost_usd=50)})
        spent = {"gpt-x": Usage(cost_usd=50.12), "claude": Usage(cost_usd=400)}
        assert skip_reason("gpt-x", budgets, spent) == (
            "budget reached: cost_usd 50.12 of 50 (model gpt-x)"
        )
        assert skip_reason("claude", budgets, spent) is None

    def test_tokens_are_input_plus_output(self) -> None:
        budgets = Budgets(sweep=Budget(tokens=2_000_000))
        below = {"m": Usage(input_tokens=1_500_000, output_tokens=499_999)}
        reached = {"m": Usage(input_tokens=1_500_000, output_tokens=500_512)}
        assert skip_reason("m", budgets, below) is None
        assert skip_reason("m", budgets, reached) == (
            "budget reached: tokens 2000512 of 2000000 (sweep)"
        )

    def test_requests_alone_never_count_as_tokens(self) -> None:
        budgets = Budgets(sweep=Budget(tokens=1))
        assert skip_reason("m", budgets, {"m": Usage(requests=10**6)}) is None

    def test_jobs_that_reported_nothing_never_exhaust_a_budget(self) -> None:
        budgets = Budgets(sweep=Budget(cost_usd=1, tokens=1), models={"m": Budget(cost_usd=1)})
        assert exhausted_scopes(budgets, {"m": NO_USAGE, "n": NO_USAGE}) == []
        assert exhausted_scopes(budgets, {}) == []

    def test_a_cost_budget_ignores_reported_tokens(self) -> None:
        spent = {"m": Usage(input_tokens=10**9)}
        assert skip_reason("m", SWEEP_50, spent) is None

    def test_the_sweep_reason_comes_first(self) -> None:
        budgets = Budgets(sweep=Budget(cost_usd=10), models={"m": Budget(cost_usd=5)})
        assert skip_reason("m", budgets, {"m": Usage(cost_usd=12)}) == (
            "budget reached: cost_usd 12 of 10 (sweep)"
        )

    def test_a_raised_budget_lets_jobs_start_again(self) -> None:
        spent = {"m": Usage(cost_usd=50.12)}
        assert skip_reason("m", SWEEP_50, spent) is not None
        assert skip_reason("m", Budgets(sweep=Budget(cost_usd=100)), spent) is None

    def test_reasons_show_costs_without_float_noise(self) -> None:
        spent = {"m": Usage(cost_usd=0.1) + Usage(cost_usd=0.2)}
        budgets = Budgets(sweep=Budget(cost_usd=0.3))
        # 0.1 + 0.2 is 0.30000000000000004: reached, and said as 0.3.
        assert skip_reason("m", budgets, spent) == "budget reached: cost_usd 0.3 of 0.3 (sweep)"


def test_spend_by_model_sums_each_models_pairs() -> None:
    spent = spend_by_model(
        [("m", Usage(cost_usd=1)), ("n", NO_USAGE), ("m", Usage(cost_usd=2, requests=1))]
    )
    assert spent == {"m": Usage(requests=1, cost_usd=3.0), "n": NO_USAGE}


# --- properties ------------------------------------------------------------------------------

_models = st.sampled_from(["m", "n", "o"])
_counts = st.none() | st.integers(min_value=0, max_value=10**7)
_costs = st.none() | st.floats(min_value=0, max_value=1e4, allow_nan=False)
_usages = st.builds(Usage, _counts, _counts, _counts, _costs)
_budget = st.builds(
    Budget,
    st.none() | st.floats(min_value=0.01, max_value=1e4, allow_nan=False),
    st.none() | st.integers(min_value=1, max_value=10**7),
)
_budgets = st.builds(Budgets, st.none() | _budget, st.dictionaries(_models, _budget, max_size=3))
_spends = st.lists(st.tuples(_models, _usages), max_size=10)


@settings(max_examples=50, deadline=None)
@given(_budgets, _spends, _spends, _models)
def test_more_spend_never_reopens_a_scope(
    budgets: Budgets, before: list, more: list, model: str
) -> None:
    earlier = spend_by_model(before)
    later = spend_by_model(before + more)
    was_closed = {(e.model, e.kind) for e in exhausted_scopes(budgets, earlier)}
    now_closed = {(e.model, e.kind) for e in exhausted_scopes(budgets, later)}
    assert was_closed <= now_closed
    if skip_reason(model, budgets, earlier) is not None:
        assert skip_reason(model, budgets, later) is not None


@settings(max_examples=50, deadline=None)
@given(_budgets, _spends, st.lists(_models, max_size=5))
def test_jobs_reporting_nothing_change_nothing(
    budgets: Budgets, spends: list, silent: list[str]
) -> None:
    with_silent = spends + [(model, NO_USAGE) for model in silent]
    assert exhausted_scopes(budgets, spend_by_model(with_silent)) == exhausted_scopes(
        budgets, spend_by_model(spends)
    )


@settings(max_examples=50, deadline=None)
@given(_budgets, st.lists(st.tuples(_models, st.builds(Usage, requests=_counts)), max_size=6))
def test_no_cost_or_tokens_never_exhausts(budgets: Budgets, spends: list) -> None:
    assert exhausted_scopes(budgets, spend_by_model(spends)) == []


@settings(max_examples=50, deadline=None)
@given(_budgets, _spends, _models)
def test_a_job_may_start_exactly_when_its_scopes_are_open(
    budgets: Budgets, spends: list, model: str
) -> None:
    closed = exhausted_scopes(budgets, spend_by_model(spends))
    blocks = [e for e in closed if e.model in (None, model)]
    assert (skip_reason(model, budgets, spend_by_model(spends)) is None) == (not blocks)
