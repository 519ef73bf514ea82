"""The policies through the real CLI, with real job processes: a typo'd command halts the
sweep, a dead model server opens that model's breaker, a deadline skips what would not end
in time, and ``--resume`` runs what a policy skipped (docs/policies.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import BatchCli

HALTED = 4


def typo_sweep(cli: BatchCli, cases: list[str]) -> Path:
    """A sweep of ``cases`` whose command names a binary that does not exist."""
    sweep = cli.write_sweep(cases, max_concurrent=2, models=["m1", "m2"])
    data = json.loads(sweep.read_text())
    data["command"] = ["nonexistent-binary", "{case}"]
    sweep.write_text(json.dumps(data))
    return sweep


def events(batch_dir: Path) -> list[dict[str, object]]:
    lines = (batch_dir / "batch-logs" / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_a_typod_command_halts_soon_with_one_line_and_resume_runs_the_rest(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    cases = [f"c{n:02d}" for n in range(10)]
    sweep = typo_sweep(cli, cases)

    result = cli.run(sweep, "--no-progress")

    assert result.returncode == HALTED, result.stderr
    line = (
        "first 8 jobs all ended in infra_failure (cannot start 'nonexistent-binary': "
        "[Errno 2] No such file or directory"
    )
    assert [text for text in result.stdout.splitlines() if line in text] != [], result.stdout
    assert f"fix the setup, then batch {sweep} --resume" in result.stdout
    summary = cli.summary()
    assert summary["state"] == "halted"
    assert summary["halt"]["rule"] == "setup"
    assert summary["halt"]["mode"] == "soon"
    assert summary["halt"]["message"].startswith("first 8 jobs all ended in infra_failure")
    recorded = len(cli.records())
    # The 8 that decided it, and at most the one other slot's job already started.
    assert 8 <= recorded <= 9
    skipped = [row for row in summary["jobs"] if row["status"] == "skipped"]
    assert len(skipped) == 20 - recorded
    assert all(row["skip_reason"].startswith("halted: first 8 jobs") for row in skipped)
    assert all("skip_reason" not in row for row in summary["jobs"] if row["status"] == "error")
    halts = [event for event in events(cli.only_batch_dir()) if event["event"] == "halt"]
    assert [(e["rule"], e["mode"]) for e in halts] == [("setup", "soon")]

    # The setup fixed, --resume runs exactly the jobs the halt did not start.
    cli.write_sweep(cases, max_concurrent=2, models=["m1", "m2"])
    resumed = cli.run(sweep, "--resume", "--no-progress")

    assert resumed.returncode == 1, resumed.stderr  # the recorded errors are carried
    assert cli.runs_counted() == sorted(row["case"] for row in skipped)
    key = "{case}|{model}".format_map
    summary = cli.summary()
    assert summary["state"] == "complete"
    assert "halt" not in summary
    assert all("skip_reason" not in row for row in summary["jobs"])
    assert cli.statuses() == {
        **{key(row): "error" for row in summary["jobs"] if row["resumed"]},
        **{key(row): "passed" for row in skipped},
    }
