"""The attempt budget through the real CLI: a case whose data is broken is retried by
``--retry-failed`` until it has spent ``max_attempts`` (default 3), then carried with its last
status, and ``batch plan`` says why; ``--max-attempts`` raises the budget for one invocation;
in-run retries stop at the budget too.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import BatchCli

BROKEN_DATA = 'result={"outcome": "failed", "failure_category": "task_data"}'


def plan_rows(cli: BatchCli, *args: str) -> dict[str, dict[str, str]]:
    result = cli.run("plan", "sweep.yaml", "--retry-failed", "--format", "json", *args)
    assert result.returncode == 0, result.stderr
    return {row["case"]: row for row in json.loads(result.stdout)["jobs"]}


def test_a_broken_case_is_retried_twice_then_carried_with_its_last_status(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = cli.write_sweep({"broken": [BROKEN_DATA], "ok": []})
    assert cli.run(sweep, "--no-progress").returncode == 1
    assert cli.runs_counted() == ["broken", "ok"]

    for attempt in (2, 3):
        assert cli.run(sweep, "--no-progress", "--retry-failed").returncode == 1
        assert cli.runs_counted() == ["broken"]
        rows = {row["case"]: row for row in cli.summary()["jobs"]}
        assert (rows["broken"]["status"], rows["broken"]["attempts"]) == ("error", attempt)

    broken = plan_rows(cli)["broken"]
    assert broken["decision"] == "carry"
    assert broken["reason"].startswith("attempt budget spent (3/3): keeps its recorded error")
    table = cli.run("plan", "sweep.yaml", "--retry-failed").stdout
    assert "attempt budget spent (3/3)" in table
    assert "0 to run, 0 to retry, 2 carried" in table

    third = cli.run(sweep, "--no-progress", "--retry-failed")
    assert third.returncode == 1  # its last status stands: error
    assert cli.runs_counted() == []
    rows = {row["case"]: row for row in cli.summary()["jobs"]}
    assert (rows["broken"]["status"], rows["broken"]["attempts"]) == ("error", 3)
    assert len([m for m in cli.records() if m["test_case"] == "broken"]) == 3

    # --max-attempts raises it for one invocation.
    assert cli.run(sweep, "--no-progress", "--retry-failed", "--max-attempts", "4").returncode == 1
    assert cli.runs_counted() == ["broken"]


def test_in_run_retries_stop_at_the_budget(batch_cli: BatchCli) -> None:
    cli = batch_cli
    sweep = cli.write_sweep(
        {"broken": [BROKEN_DATA]},
        models=[{"id": "m", "max_attempts": 2}],
        retries=5,
        retry_backoff="0.1s",
    )
    assert cli.run(sweep, "--no-progress").returncode == 1
    assert cli.runs_counted() == ["broken"] * 2
    events = [
        json.loads(line)
        for line in (cli.only_batch_dir() / "batch-logs" / "events.jsonl").read_text().splitlines()
    ]
    spent = [e for e in events if e["event"] == "budget_spent"]
    assert [(e["case"], e["attempts"], e["max_attempts"]) for e in spent] == [("broken", 2, 2)]
