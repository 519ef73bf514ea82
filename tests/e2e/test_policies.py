"""The policies through the real CLI, with real job processes: a typo'd command halts the
sweep, a dead model server opens that model's breaker, a deadline skips what would not end
in time, and ``--resume`` runs what a policy skipped (docs/policies.md)."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from helpers.fake_jobs import write_job_script
from helpers.paths import PROGRAM

if TYPE_CHECKING:
    from conftest import BatchCli

HALTED = 4


def typo_sweep(cli: BatchCli, cases: list[str]) -> Path:
    """A sweep of ``cases`` whose command names a binary that does not exist."""
    sweep = cli.write_sweep(cases, max_concurrent=4, models=["m1", "m2"])
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
    assert f"fix the setup, then {PROGRAM} {sweep} --resume" in result.stdout
    summary = cli.summary()
    assert summary["state"] == "halted"
    assert summary["halt"]["rule"] == "setup"
    assert summary["halt"]["mode"] == "soon"
    assert summary["halt"]["message"].startswith("first 8 jobs all ended in infra_failure")
    recorded = len(cli.records())
    # The 8 that decided it, and at most the jobs of the other 3 slots already started.
    assert 8 <= recorded <= 11
    skipped = [row for row in summary["jobs"] if row["status"] == "skipped"]
    assert len(skipped) == 20 - recorded
    assert all(row["skip_reason"].startswith("halted: first 8 jobs") for row in skipped)
    assert all("skip_reason" not in row for row in summary["jobs"] if row["status"] == "error")
    halts = [event for event in events(cli.only_batch_dir()) if event["event"] == "halt"]
    assert [(e["rule"], e["mode"]) for e in halts] == [("setup", "soon")]
    # Every job the halt kept from starting has its SKIP line and its skip event.
    skips = [e for e in events(cli.only_batch_dir()) if e["event"] == "skip"]
    key = "{case}|{model}".format_map
    assert sorted(map(key, skips)) == sorted(map(key, skipped))
    assert all(str(e["reason"]).startswith("halted: first 8 jobs") for e in skips)
    skip_lines = [text for text in result.stdout.splitlines() if "] SKIP " in text]
    assert len(skip_lines) == len(skipped), result.stdout

    # The setup fixed, --resume runs exactly the jobs the halt did not start.
    cli.write_sweep(cases, max_concurrent=4, models=["m1", "m2"])
    resumed = cli.run(sweep, "--resume", "--no-progress")

    assert resumed.returncode == 1, resumed.stderr  # the recorded errors are carried
    assert cli.runs_counted() == sorted(row["case"] for row in skipped)
    summary = cli.summary()
    assert summary["state"] == "complete"
    assert "halt" not in summary
    assert all("skip_reason" not in row for row in summary["jobs"])
    assert cli.statuses() == {
        **{key(row): "error" for row in summary["jobs"] if row["resumed"]},
        **{key(row): "passed" for row in skipped},
    }


def test_halt_now_from_the_command_line_stops_the_running_jobs(batch_cli: BatchCli) -> None:
    cli = batch_cli
    sweep = cli.write_sweep(
        {"c1": ["sleep=0.5", "fail"], "c2": ["sleep=30"], "c3": []}, max_concurrent=2
    )

    result = cli.run(sweep, "--no-progress", "--halt", "now,fail=1")

    assert result.returncode == HALTED, result.stderr
    summary = cli.summary()
    assert summary["state"] == "halted"
    assert (summary["halt"]["rule"], summary["halt"]["mode"]) == ("threshold", "now")
    assert summary["halt"]["message"].startswith(
        "halt now,fail=1: 1 of 1 finished jobs ended in error or failed; stopping all jobs"
    )
    assert cli.statuses() == {"c1": "failed", "c2": "skipped", "c3": "skipped"}
    rows = {row["case"]: row for row in summary["jobs"]}
    assert rows["c2"]["skip_reason"] == f"halted: {summary['halt']['message']}"
    assert [record["test_case"] for record in cli.records()] == ["c1"]


# --- the breaker ------------------------------------------------------------------------------

#: A model's job: connect to its server at $PORT; a refused connection is the provider's
#: failure (exit 3: error, infra_failure), not the model's.
CONNECT = """
import os, socket, sys
try:
    socket.create_connection(("127.0.0.1", int(os.environ["PORT"])), timeout=5).close()
except ConnectionRefusedError:
    print("connection refused")
    sys.exit(3)
"""


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_dead_model_server_opens_its_breaker_while_the_other_model_goes_on(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    job = write_job_script(cli.dir, CONNECT)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)  # the kernel completes connections; nobody needs to accept them
    with server:
        cases = [f"c{n}" for n in range(8)]
        sweep = cli.write_sweep(
            cases,
            max_concurrent=2,
            models=[
                {"id": "dead", "env": {"PORT": str(closed_port())}, "breaker": {"threshold": 3}},
                {"id": "live", "env": {"PORT": str(server.getsockname()[1])}},
            ],
        )
        data = json.loads(sweep.read_text())
        sweep.write_text(json.dumps({**data, "command": [str(job), "{case}"]}))

        result = cli.run(sweep, "--no-progress")

    assert result.returncode == 1, result.stderr  # errors, not halted: live went on
    line = "dead: breaker open, starting none of its jobs (3 consecutive infra_failure)"
    assert line in result.stdout
    # The DONE line of the failure that opened it comes first (it once came after).
    before = result.stdout.split(line)[0].splitlines()
    assert (
        len(
            [
                text
                for text in before
                if " \N{MULTIPLICATION SIGN} dead: ERROR (infra_failure" in text
            ]
        )
        >= 3
    ), before
    summary = cli.summary()
    assert summary["state"] == "complete"
    rows = {(row["case"], row["model"]): row for row in summary["jobs"]}
    assert all(rows[case, "live"]["status"] == "passed" for case in cases)
    dead = [rows[case, "dead"] for case in cases]
    errors = [row for row in dead if row["status"] == "error"]
    # The three that opened it, and at most one already started beside them.
    assert 3 <= len(errors) <= 4
    assert [row["status"] for row in dead] == ["error"] * len(errors) + ["skipped"] * (
        8 - len(errors)
    )
    reasons = {row.get("skip_reason") for row in dead if row["status"] == "skipped"}
    assert reasons == {"breaker open: 3 consecutive infra_failure"}
    logged = events(cli.only_batch_dir())
    assert [(e["model"], e["state"], e["reason"]) for e in logged if e["event"] == "breaker"] == [
        ("dead", "open", "3 consecutive infra_failure")
    ]
    skips = [(e["case"], e["model"]) for e in logged if e["event"] == "skip"]
    assert skips == [(row["case"], "dead") for row in dead if row["status"] == "skipped"]

    # The server back, --retry-failed runs the errors and the jobs the breaker skipped.
    cli.runs_counted()
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    with server:
        data = json.loads(sweep.read_text())
        data["models"][0]["env"]["PORT"] = str(server.getsockname()[1])
        sweep.write_text(json.dumps(data))
        retried = cli.run(sweep, "--retry-failed", "--no-progress")

    assert retried.returncode == 0, retried.stdout + retried.stderr
    assert set(cli.statuses().values()) == {"passed"}
    assert "skip_reason" not in json.dumps(cli.summary())


def test_an_open_breaker_refuses_in_run_retries_and_the_jobs_keep_their_records(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = cli.write_sweep(
        ["c1", "c2", "c3", "c4"],
        after=["exit=3"],  # every attempt: error, infra_failure
        max_concurrent=1,
        retries=2,
        retry_backoff="0.2s",
        breaker={"threshold": 2},
        halt="off",
    )

    result = cli.run(sweep, "--no-progress")

    assert result.returncode == 1, result.stderr
    assert "m: breaker open, starting none of its jobs (2 consecutive infra_failure)" in (
        result.stdout
    )
    assert cli.runs_counted() == ["c1", "c2"]  # no retry ran after it opened
    # Each job a policy held back says so in the log, skipped or not retried.
    opened = "breaker open: 2 consecutive infra_failure"
    for case in ("c3", "c4"):
        label = f"{case} \N{MULTIPLICATION SIGN} m"
        assert f"] SKIP {label}: {opened}; left for --resume\n" in result.stdout
    for case in ("c1", "c2"):
        label = f"{case} \N{MULTIPLICATION SIGN} m"
        assert f"] DONE {label}: ERROR (infra_failure; exit code 3) in " in result.stdout
        assert f"s; not retried: {opened}\n" in result.stdout
    summary = cli.summary()
    assert summary["state"] == "complete"
    rows = {row["case"]: row for row in summary["jobs"]}
    # A refused retry leaves the job as its record says, with no skip_reason.
    assert [(rows[c]["status"], rows[c].get("skip_reason")) for c in ("c1", "c2")] == [
        ("error", None),
        ("error", None),
    ]
    reason = "breaker open: 2 consecutive infra_failure"
    assert [(rows[c]["status"], rows[c]["skip_reason"]) for c in ("c3", "c4")] == [
        ("skipped", reason),
        ("skipped", reason),
    ]
    skips = sorted(e["case"] for e in events(cli.only_batch_dir()) if e["event"] == "skip")
    assert skips == ["c1", "c2", "c3", "c4"]


# --- the deadline -----------------------------------------------------------------------------


def test_a_deadline_skips_what_would_not_end_in_time_and_stops_what_runs_at_it(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = cli.write_sweep(
        {"long": [], "hang": ["sleep=30"], "quick": []},
        max_concurrent=2,
        timeout=None,
        kill_grace="2s",
    )
    data = json.loads(sweep.read_text())
    timeouts = {"long": "1h", "quick": "2s"}  # "hang": none, and no history: no estimate
    for case in data["cases"]:
        if case["id"] in timeouts:
            case["timeout"] = timeouts[case["id"]]
    sweep.write_text(json.dumps(data))

    result = cli.run(sweep, "--no-progress", "--deadline", "4s")

    assert result.returncode == HALTED, result.stderr
    summary = cli.summary()
    # It ends by the deadline: 4 s after the CLI read it, and hang's stop (TERM, at most
    # kill_grace), with room for a loaded machine.
    assert summary["elapsed_seconds"] < 8
    assert summary["state"] == "halted"
    assert (summary["halt"]["rule"], summary["halt"]["mode"]) == ("deadline", "now")
    rows = {row["case"]: row for row in summary["jobs"]}
    assert rows["quick"]["status"] == "passed"
    assert rows["long"]["status"] == "skipped"
    assert re.fullmatch(
        r"deadline \d\d:\d\d(:\d\d)?: expected 1h00m00s, [34]\.\ds left",
        rows["long"]["skip_reason"],
    ), rows["long"]["skip_reason"]
    assert rows["hang"]["status"] == "skipped"
    assert rows["hang"]["skip_reason"].startswith("halted: deadline ")
    assert "reached: stopping 1 running job(s)" in rows["hang"]["skip_reason"]
    assert [record["test_case"] for record in cli.records()] == ["quick"]
    halts = [(e["rule"], e["mode"]) for e in events(cli.only_batch_dir()) if e["event"] == "halt"]
    assert halts == [("deadline", "soon"), ("deadline", "now")]


@pytest.mark.parametrize(
    ("option", "value", "line"),
    [
        ("--halt", "sometimes", "error: --halt: cannot read halt 'sometimes' (write off, or e.g."),
        ("--deadline", "7", "error: --deadline: deadline '7' needs a unit or a colon"),
    ],
)
def test_an_unreadable_policy_option_is_one_line_and_writes_nothing(
    batch_cli: BatchCli, option: str, value: str, line: str
) -> None:
    sweep = batch_cli.write_sweep(["c1"])
    result = batch_cli.run(sweep, option, value)
    assert result.returncode == 2
    assert result.stderr.startswith(line), result.stderr
    assert result.stderr.count("\n") == 1
    assert batch_cli.batch_dirs() == []
