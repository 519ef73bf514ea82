"""A ``--retry-failed`` that stops before it reaches some of its jobs (a halt, a Ctrl-C,
a second Ctrl-C that kills the running retry) leaves those jobs' rows as their newest
records say — ``error``, its category, duration and run dir — never ``skipped``: ``batch
stats`` (which reads the summary) counts what ``batch stats --source records`` counts
(docs/summary.md, "Jobs an invocation did not get to")."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helpers.fake_jobs import wait_until

if TYPE_CHECKING:
    from conftest import BatchCli

CASES = [f"c{n}" for n in range(1, 8)]


def rate_limited_sweep(cli: BatchCli, *extra: str) -> Path:
    """Seven jobs of one model, each ending in ``error`` (a 429: api_or_credit); nothing
    stops the first run early."""
    return cli.write_sweep(
        CASES,
        after=[*extra, "print=429 Too Many Requests", "exit=1"],
        max_concurrent=1,
        halt="off",
        breaker="off",
    )


def newest_records(cli: BatchCli) -> dict[str, dict[str, Any]]:
    """case -> its newest run-meta.json (the highest attempt)."""
    newest: dict[str, dict[str, Any]] = {}
    for record in cli.records():
        case = record["test_case"]
        if case not in newest or record["attempt"] > newest[case]["attempt"]:
            newest[case] = record
    return newest


def stats_counts(cli: BatchCli, *source: str) -> dict[str, Any]:
    result = cli.run("stats", cli.only_batch_dir(), "--format", "json", *source)
    assert result.returncode == 0, result.stderr
    overall = json.loads(result.stdout)["overall"]
    return {key: overall[key] for key in ("passed", "failed", "error", "skipped", "pass_rate")}


def assert_rows_match_the_ledger(cli: BatchCli) -> None:
    rows = {row["case"]: row for row in cli.summary()["jobs"]}
    for case, record in newest_records(cli).items():
        row = rows[case]
        assert row["status"] == "error", row
        assert row["failure_category"] == "api_or_credit", row
        assert row["run_dir"] == record["run_dir"], (row, record)
        assert row["attempts"] == record["attempt"], row
        assert row["duration_seconds"] == round(record["duration_seconds"], 3), row
        assert row["reason"].startswith("exit code 1"), row
    assert cli.summary()["totals"]["error"] == len(CASES)
    assert cli.summary()["totals"]["skipped"] == 0
    assert stats_counts(cli) == stats_counts(cli, "--source", "records")


def test_a_halted_retry_keeps_the_recorded_errors_it_did_not_reach(batch_cli: BatchCli) -> None:
    cli = batch_cli
    sweep = rate_limited_sweep(cli)
    assert cli.run(sweep, "--no-progress").returncode == 1

    retried = cli.run(sweep, "--retry-failed", "--halt", "soon,error=5", "--no-progress")

    assert retried.returncode == 4, retried.stdout + retried.stderr
    assert cli.summary()["state"] == "halted"
    assert len(cli.records()) == 7 + 5  # two jobs were not retried
    assert_rows_match_the_ledger(cli)
    rows = {row["case"]: row for row in cli.summary()["jobs"]}
    unreached = [case for case in CASES if rows[case]["attempts"] == 1]
    assert unreached == ["c6", "c7"]
    # Each says why it was not retried, and is carried from the earlier invocation.
    for case in unreached:
        assert rows[case]["resumed"] is True
        assert rows[case]["skip_reason"].startswith("halted: halt soon,error=5")
        assert f"DONE {case} \N{MULTIPLICATION SIGN} m: ERROR (api_or_credit" in retried.stdout
    assert "not run" not in retried.stdout  # nothing is left for --resume
    assert "7 jobs ended in error (api_or_credit 7)" in retried.stdout


def test_an_interrupted_retry_keeps_the_recorded_errors_it_did_not_reach(
    batch_cli: BatchCli,
) -> None:
    """Ctrl-C while the first retry runs, and Ctrl-C again: that retry is killed (no record)
    and the six others never start; all seven keep their first run's error."""
    cli = batch_cli
    gate = cli.dir / "gate"
    sweep = rate_limited_sweep(cli, f"touch={cli.dir}/started-CASE", f"hold={gate}")
    sweep.write_text(sweep.read_text().replace("started-CASE", "started-{case}"))
    assert cli.run(sweep, "--no-progress").returncode == 1
    first = newest_records(cli)

    gate.touch()
    for path in cli.dir.glob("started-*"):
        path.unlink()
    driver = cli.start(sweep, "--retry-failed", "--no-progress")
    cli.wait_for(cli.dir / "started-c1")
    driver.signal(signal.SIGINT)
    assert wait_until(lambda: "interrupted: starting no new jobs" in driver.stdout)
    driver.signal(signal.SIGINT)

    assert driver.wait() == 130, driver.stdout + driver.stderr
    assert cli.summary()["state"] == "interrupted"
    assert newest_records(cli) == first  # the killed retry wrote no record
    assert_rows_match_the_ledger(cli)
    assert all(row["resumed"] is True for row in cli.summary()["jobs"])


def test_a_retry_its_breaker_stops_keeps_the_recorded_errors_it_did_not_reach(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = rate_limited_sweep(cli)
    assert cli.run(sweep, "--no-progress").returncode == 1
    data = json.loads(sweep.read_text())
    del data["breaker"]  # the default breaker: 5 consecutive api_or_credit
    sweep.write_text(json.dumps(data))

    retried = cli.run(sweep, "--retry-failed", "--no-progress")

    assert retried.returncode == 1, retried.stdout + retried.stderr
    assert "m: breaker open" in retried.stdout
    assert_rows_match_the_ledger(cli)
    rows = {row["case"]: row for row in cli.summary()["jobs"]}
    assert [case for case in CASES if rows[case]["attempts"] == 1] == ["c6", "c7"]
    assert rows["c7"]["skip_reason"] == "breaker open: 5 consecutive api_or_credit"
