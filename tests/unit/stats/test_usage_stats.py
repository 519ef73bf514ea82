"""Usage per model and for the batch (batch/stats/usage.py): totals, cost per passed
case, the two-batch cost difference."""

from __future__ import annotations

from typing import Any

import pytest

from batch.stats.usage import (
    compare_usage,
    cost_diff,
    cost_text,
    row_usage,
    tokens_text,
    usage_group,
    usage_stats,
)
from run_support.usage import Usage


def row(case: str, model: str, status: str, **usage: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"case": case, "model": model, "status": status}
    if usage:
        out["usage"] = usage
    return out


ROWS = [
    row("c1", "gpt", "passed", input_tokens=1000, output_tokens=200, requests=2, cost_usd=0.5),
    row("c2", "gpt", "failed", input_tokens=800, output_tokens=100, requests=1, cost_usd=0.25),
    row("c3", "gpt", "passed", input_tokens=900, output_tokens=150, requests=1, cost_usd=0.25),
    row("c1", "local", "passed", input_tokens=50, output_tokens=5),
    row("c2", "local", "error"),
]


class TestUsageGroup:
    def test_sums_a_models_rows_and_prices_each_pass(self) -> None:
        gpt = usage_stats(ROWS)["groups"]["gpt"]
        assert gpt == {
            "input_tokens": 2700,
            "output_tokens": 450,
            "tokens": 3150,
            "requests": 4,
            "cost_usd": 1.0,
            # The failed job's spend is part of what the two passes cost.
            "cost_per_passed_case": 0.5,
            "jobs_with_usage": 3,
        }

    def test_a_model_that_reported_no_cost_has_none_not_zero(self) -> None:
        local = usage_stats(ROWS)["groups"]["local"]
        assert local["tokens"] == 55
        assert local["requests"] is None
        assert local["cost_usd"] is None
        assert local["cost_per_passed_case"] is None
        assert local["jobs_with_usage"] == 1

    def test_no_pass_means_no_cost_per_pass(self) -> None:
        stats = usage_group([row("c1", "m", "failed", cost_usd=3), row("c2", "m", "running")])
        assert stats["cost_usd"] == 3.0
        assert stats["cost_per_passed_case"] is None

    def test_nothing_reported_anywhere(self) -> None:
        assert usage_group([row("c1", "m", "passed")]) == {
            "input_tokens": None,
            "output_tokens": None,
            "tokens": None,
            "requests": None,
            "cost_usd": None,
            "cost_per_passed_case": None,
            "jobs_with_usage": 0,
        }

    def test_an_unfinished_jobs_earlier_spend_counts(self) -> None:
        # A job retried after an error is pending or running again; its first try was paid.
        stats = usage_group([row("c1", "m", "pending", cost_usd=2), row("c2", "m", "passed")])
        assert stats["cost_usd"] == 2.0
        assert stats["cost_per_passed_case"] == 2.0

    def test_the_batch_total_counts_every_model(self) -> None:
        overall = usage_stats(ROWS)["overall"]
        assert overall["tokens"] == 3205
        assert overall["cost_usd"] == 1.0
        assert overall["cost_per_passed_case"] == pytest.approx(1 / 3)
        assert overall["jobs_with_usage"] == 4

    def test_costs_are_summed_without_float_noise(self) -> None:
        rows = [row(f"c{i}", "m", "passed", cost_usd=0.1) for i in range(3)]
        assert usage_group(rows)["cost_usd"] == 0.3

    def test_groups_keep_the_rows_order_and_can_be_by_case(self) -> None:
        assert list(usage_stats(ROWS)["groups"]) == ["gpt", "local"]
        by_case = usage_stats(ROWS, by="case")["groups"]
        assert list(by_case) == ["c1", "c2", "c3"]
        assert by_case["c2"]["cost_usd"] == 0.25

    @pytest.mark.parametrize(
        "usage", ["lots", [1], {"cost_usd": "NaN", "requests": -1}, {"cost_usd": True}]
    )
    def test_a_hand_edited_usage_reads_as_not_reported(self, usage: object) -> None:
        edited = {"case": "c", "model": "m", "status": "passed", "usage": usage}
        assert row_usage(edited) == Usage()
        assert usage_group([edited])["jobs_with_usage"] == 0


class TestCompare:
    def test_cost_difference_per_model_and_total(self) -> None:
        after = [
            row("c1", "gpt", "passed", cost_usd=0.75),
            row("c1", "local", "passed", input_tokens=10),
            row("c1", "new", "passed", cost_usd=2),
        ]
        compared = compare_usage(ROWS, after)
        assert list(compared["groups"]) == ["gpt", "local", "new"]
        assert compared["groups"]["gpt"]["cost_usd_diff"] == -0.25
        # No cost on either side of local: no difference, not 0.
        assert compared["groups"]["local"]["cost_usd_diff"] is None
        # Only in B: nothing to compare with.
        assert compared["groups"]["new"]["a"] is None
        assert compared["groups"]["new"]["cost_usd_diff"] is None
        assert compared["overall"]["cost_usd_diff"] == 1.75
        assert compared["overall"]["b"]["cost_usd"] == 2.75

    def test_cost_diff_needs_both_costs(self) -> None:
        assert cost_diff({"cost_usd": 1.0}, {"cost_usd": 1.3}) == 0.3
        assert cost_diff({"cost_usd": None}, {"cost_usd": 1.0}) is None
        assert cost_diff(None, {"cost_usd": 1.0}) is None


@pytest.mark.parametrize(
    ("value", "signed", "text"),
    [
        (None, False, "—"),
        (12.345, False, "$12.35"),
        (1234.5, False, "$1,234.50"),
        (0.0, False, "$0.00"),
        (0.0042, False, "$0.0042"),
        (0.00001, False, "<$0.0001"),
        (1.5, True, "+$1.50"),
        (-0.25, True, "-$0.25"),
        (0.0, True, "±$0.00"),
        (None, True, "—"),
    ],
)
def test_cost_text(value: float | None, signed: bool, text: str) -> None:
    assert cost_text(value, signed=signed) == text


@pytest.mark.parametrize(
    ("value", "text"), [(None, "—"), (0, "0"), (1_234_567, "1,234,567"), (12_345_678, "12.3M")]
)
def test_tokens_text(value: int | None, text: str) -> None:
    assert tokens_text(value) == text
