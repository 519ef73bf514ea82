"""Budgets through the real CLI: jobs report what they spent; once a budget is reached no new
job of its scope starts, the batch ends ``halted``, and ``--resume`` with a raised budget
runs the rest. Jobs that report no usage never count.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conftest import BatchCli


def spends(**usage: float) -> str:
    return "result=" + json.dumps({"outcome": "passed", "usage": usage})


def rows(cli: BatchCli) -> dict[str, dict[str, Any]]:
    return {f"{row['case']}|{row['model']}": row for row in cli.summary()["jobs"]}


def test_a_sweep_budget_crossed_mid_sweep_halts_and_a_raised_budget_resumes(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    cases = {f"c{n}": [spends(cost_usd=1.0)] for n in range(1, 6)}
    sweep = cli.write_sweep(cases, max_concurrent=1, budget={"cost_usd": 2.5})

    first = cli.run(sweep, "--no-progress")

    assert first.returncode == 4, first.stdout + first.stderr
    summary = cli.summary()
    assert summary["state"] == "halted"
    reason = "budget reached: cost_usd 3 of 2.5 (sweep)"
    assert summary["halt"]["rule"] == "budget"
    assert reason in summary["halt"]["message"]
    assert cli.runs_counted() == ["c1", "c2", "c3"]
    statuses = {row["case"]: (row["status"], row.get("skip_reason")) for row in summary["jobs"]}
    assert statuses == {
        "c1": ("passed", None),
        "c2": ("passed", None),
        "c3": ("passed", None),
        "c4": ("skipped", reason),
        "c5": ("skipped", reason),
    }
    assert f"{reason}: starting no more of its jobs" in first.stdout

    # Resumed unchanged, the budget is still spent: nothing runs.
    again = cli.run(sweep, "--no-progress", "--resume")
    assert again.returncode == 4
    assert cli.runs_counted() == []

    raised = cli.write_sweep(cases, max_concurrent=1, budget={"cost_usd": 10})
    last = cli.run(raised, "--no-progress", "--resume")
    assert last.returncode == 0, last.stdout + last.stderr
    assert cli.runs_counted() == ["c4", "c5"]
    summary = cli.summary()
    assert summary["state"] == "complete"
    assert "halt" not in summary
    assert {row["status"] for row in summary["jobs"]} == {"passed"}


def test_a_model_token_budget_stops_that_model_only_and_silent_jobs_never_count(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    cases = {f"c{n}": [spends(input_tokens=50, output_tokens=10)] for n in range(1, 4)}
    sweep = cli.write_sweep(
        cases,
        max_concurrent=1,
        order="model-major",
        models=[{"id": "a", "budget": {"tokens": 100}}, "b"],
        budget={"tokens": 1000},
    )
    result = cli.run(sweep, "--no-progress")

    assert result.returncode == 4, result.stdout + result.stderr
    reason = "budget reached: tokens 120 of 100 (model a)"
    assert {key: (row["status"], row.get("skip_reason")) for key, row in rows(cli).items()} == {
        "c1|a": ("passed", None),
        "c2|a": ("passed", None),
        "c3|a": ("skipped", reason),
        "c1|b": ("passed", None),
        "c2|b": ("passed", None),
        "c3|b": ("passed", None),
    }
    events = [
        json.loads(line)
        for line in (cli.only_batch_dir() / "batch-logs" / "events.jsonl").read_text().splitlines()
    ]
    assert [
        {key: e[key] for key in ("scope", "kind", "spent", "limit")}
        for e in events
        if e["event"] == "budget"
    ] == [{"scope": "a", "kind": "tokens", "spent": 120, "limit": 100}]

    # Jobs that report nothing run to the end whatever the budget.
    silent = cli.write_sweep(["s1", "s2", "s3"], file="silent.yaml", budget={"cost_usd": 0.01})
    assert cli.run(silent, "--no-progress", "-o", "silent").returncode == 0


def test_a_retry_the_budget_holds_back_is_not_announced_as_one(batch_cli: BatchCli) -> None:
    cli = batch_cli
    costly_error = "result=" + json.dumps(
        {"outcome": "failed", "failure_category": "api_or_credit", "usage": {"cost_usd": 1.0}}
    )
    sweep = cli.write_sweep(
        {"c1": [costly_error]}, retries=2, retry_backoff="0.1s", budget={"cost_usd": 0.5}
    )

    result = cli.run(sweep, "--no-progress")

    assert result.returncode == 4, result.stdout + result.stderr
    assert cli.runs_counted() == ["c1"]
    # What happened: one attempt, its error, and why no retry followed; no RETRY line.
    assert "RETRY" not in result.stdout
    reason = "budget reached: cost_usd 1 of 0.5 (sweep)"
    assert "] DONE c1 \N{MULTIPLICATION SIGN} m: ERROR (api_or_credit" in result.stdout
    assert f"; not retried: {reason}\n" in result.stdout
    row = cli.summary()["jobs"][0]
    assert (row["status"], row.get("skip_reason"), row["attempts"]) == ("error", None, 1)
