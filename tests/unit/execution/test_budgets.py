"""The spend a budget is checked against: recorded totals at the start, each attempt after."""

from __future__ import annotations

from pathlib import Path

from helpers.fake_jobs import make_sweep

from batch.execution.budgets import Spend, sweep_budgets
from batch.plan.jobs import Job
from batch.policies.spend import Budget, Budgets
from batch.sweep.load import ModelSpec
from run_support.usage import Usage


def test_the_sweeps_and_the_models_budgets(tmp_path: Path) -> None:
    sweep = make_sweep(
        tmp_path,
        ["true"],
        models=(ModelSpec("a", budget=Budget(tokens=10)), ModelSpec("b")),
        budget=Budget(cost_usd=5.0),
    )
    assert sweep_budgets(sweep) == Budgets(Budget(cost_usd=5.0), {"a": Budget(tokens=10)})


def test_recorded_totals_count_and_each_attempt_adds_to_its_model() -> None:
    budgets = Budgets(Budget(cost_usd=1.0), {"a": Budget(tokens=100)})
    jobs = [
        Job("c1", "a", usage={"input_tokens": 60, "output_tokens": 30}),  # carried
        Job("c2", "b", usage={"cost_usd": 0.5}),  # retried: earlier attempts spent this
        Job("c3", "b"),  # reported nothing
    ]
    spend = Spend(budgets, jobs)
    assert spend.refusal("a") is None
    spend.add("a", Usage(output_tokens=10))
    assert spend.refusal("a") == "budget reached: tokens 100 of 100 (model a)"
    assert spend.refusal("b") is None  # a's budget is a's alone
    spend.add("b", Usage(cost_usd=0.25))
    spend.add("b", Usage())  # no usage reported: never counts
    assert spend.refusal("b") is None
    spend.add("b", Usage(cost_usd=0.3))
    assert spend.refusal("b") == "budget reached: cost_usd 1.05 of 1 (sweep)"
    assert spend.refusal("a") == "budget reached: cost_usd 1.05 of 1 (sweep)"  # sweep first
    assert [(e.model, e.kind) for e in spend.reached()] == [(None, "cost_usd"), ("a", "tokens")]


def test_without_budgets_nothing_is_refused() -> None:
    spend = Spend(Budgets(), [Job("c1", "a", usage={"cost_usd": 1e9})])
    assert spend.refusal("a") is None
