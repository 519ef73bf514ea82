"""Reasons everywhere, through the real CLI: every job that does not pass gets one line that
says why — the cause the runner knows (cannot start, timeout, signal, exit code, the failing
step) and what the job said (its ``result.json`` ``reason``, or else the last non-empty line
of its output) — in its record, its summary row, the ``finish`` event, its DONE line and
``batch status``; secrets redacted, control characters escaped (docs/ledger.md).
"""

# The lines users see join case and model with U+00D7.
# ruff: noqa: RUF001

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from conftest import BatchCli

JOB = r"""
import json, os, signal, sys, time

action = sys.argv[1]
if action == "pass":
    print("all good")
elif action == "exit3":
    print("connecting to api.example")
    print("connection refused")
    print("   ")
    print("")
    sys.exit(3)
elif action == "quiet":
    sys.exit(1)
elif action == "signal":
    print("about to crash", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
elif action == "slow":
    print("waiting for the model", flush=True)
    time.sleep(30)
elif action == "said":
    print("a line the job's own reason takes precedence over")
    with open(os.path.join(os.environ["BATCH_RUN_DIR"], "result.json"), "w") as f:
        json.dump({"outcome": "failed", "reason": "score 0.2 below 0.5"}, f)
elif action == "secret":
    print("auth failed with key " + os.environ["API_TOKEN"] + "\x1b[2J")
    sys.exit(1)
elif action == "long":
    print("x" * 100_000)
    sys.exit(1)
"""

TOKEN = "sk-not-a-real-token-123"

#: case -> (program, action, extra case keys)
CASES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "pass": (sys.executable, "pass", {}),
    "nostart": ("no-such-program-for-batch", "pass", {}),
    "exit3": (sys.executable, "exit3", {}),
    "quiet": (sys.executable, "quiet", {}),
    "signal": (sys.executable, "signal", {}),
    "timeout": (sys.executable, "slow", {"timeout": "1s"}),
    "said": (sys.executable, "said", {}),
    "secret": (sys.executable, "secret", {}),
    "long": (sys.executable, "long", {}),
}

EXPECTED = {
    "nostart": "cannot start 'no-such-program-for-batch'",
    "exit3": "exit code 3: connection refused",
    "quiet": "exit code 1",
    "signal": "killed by signal 9: about to crash",
    "timeout": "timeout after 1.0s: waiting for the model",
    "said": "result.json says failed: score 0.2 below 0.5",
    # The secret is redacted; the escape sequence is escaped, not sent to a terminal.
    "secret": "exit code 1: auth failed with key [REDACTED]\\x1b[2J",
}


def write_sweep(cli: BatchCli) -> Path:
    (cli.dir / "job.py").write_text(JOB)
    sweep = {
        "output": "runs",
        "cases": [
            {"id": case, "params": {"exe": exe, "action": action}, **keys}
            for case, (exe, action, keys) in CASES.items()
        ],
        "models": ["m"],
        "command": ["{params.exe}", "job.py", "{params.action}"],
        "env": {"API_TOKEN": TOKEN},
        "kill_grace": "1s",
        "max_concurrent": 4,
    }
    path = cli.dir / "sweep.yaml"
    path.write_text(json.dumps(sweep))
    return path


def test_every_kind_of_cause_is_one_line_in_record_row_event_done_line_and_status(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    done = cli.run(write_sweep(cli), "--no-progress")
    assert done.returncode == 1, done.stderr  # errors among them
    batch_dir = cli.only_batch_dir()

    records = {record["test_case"]: record for record in cli.records()}
    reasons = {case: record.get("reason") for case, record in records.items()}
    assert reasons["pass"] is None  # a pass needs no reason
    assert reasons["nostart"] is not None and reasons["nostart"].startswith(EXPECTED["nostart"])
    for case in ("exit3", "quiet", "signal", "timeout", "said", "secret"):
        assert reasons[case] == EXPECTED[case], case
    # A 100,000-character last line is cut to a line a terminal can show.
    assert reasons["long"] is not None and reasons["long"].startswith("exit code 1: xxx")
    assert len(reasons["long"]) <= 400 and reasons["long"].endswith("\N{HORIZONTAL ELLIPSIS}")
    assert TOKEN not in json.dumps(records)

    rows = {row["case"]: row for row in cli.summary()["jobs"]}
    assert "reason" not in rows["pass"]
    assert {case: row.get("reason") for case, row in rows.items()} == reasons

    events = (batch_dir / "batch-logs" / "events.jsonl").read_text()
    finish = {
        event["case"]: event
        for event in map(json.loads, events.splitlines())
        if event["event"] == "finish"
    }
    assert {case: event.get("reason") for case, event in finish.items()} == reasons

    # The DONE line says why, on its one line.
    done_lines = [line for line in done.stdout.splitlines() if " DONE " in line]
    assert len(done_lines) == len(CASES)
    for case in ("exit3", "signal", "timeout", "said", "secret"):
        (line,) = [line for line in done_lines if f"DONE {case} " in line]
        assert EXPECTED[case] in line, line
    assert "(infra_failure; exit code 3: connection refused) in " in "\n".join(done_lines)
    assert TOKEN not in done.stdout and "\x1b" not in done.stdout

    status = cli.run("status", batch_dir)
    assert status.returncode == 0, status.stderr
    assert f"not passed ({len(CASES) - 1}), and why:" in status.stdout
    assert "  exit3 × m: error (infra_failure): exit code 3: connection refused" in status.stdout
    assert "  said × m: failed (model_failure): " + EXPECTED["said"] in status.stdout
    assert "pass × m" not in status.stdout
    as_json = json.loads(cli.run("status", batch_dir, "--format", "json").stdout)
    assert {row["case"]: row["reason"] for row in as_json["not_passed"]} == {
        case: reason for case, reason in reasons.items() if reason is not None
    }


def test_a_failing_step_is_named_in_the_reason(batch_cli: BatchCli) -> None:
    cli = batch_cli
    (cli.dir / "job.py").write_text(JOB)
    sweep = cli.dir / "sweep.yaml"
    sweep.write_text(
        json.dumps(
            {
                "output": "runs",
                "cases": ["c1"],
                "models": ["m"],
                "steps": [
                    {"name": "eval", "command": [sys.executable, "job.py", "pass"]},
                    {"name": "judge", "command": [sys.executable, "job.py", "exit3"]},
                ],
            }
        )
    )
    done = cli.run(sweep, "--no-progress")
    assert done.returncode == 1

    (record,) = cli.records()
    assert record["reason"] == "step judge: exit code 3: connection refused"
    assert record["steps"][1]["reason"] == "exit code 3: connection refused"
    (row,) = cli.summary()["jobs"]
    assert row["reason"] == record["reason"]
    assert "ERROR (infra_failure; step judge: exit code 3: connection refused)" in done.stdout


def test_a_carried_failure_keeps_its_reason_and_an_old_record_gets_one(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    done = cli.run(write_sweep(cli), "--no-progress")
    assert done.returncode == 1
    batch_dir = cli.only_batch_dir()
    # A record written before reasons were kept: the reader tells one from its other keys.
    (old,) = batch_dir.glob("m/signal-*/run-meta.json")
    record = json.loads(old.read_text())
    del record["reason"]
    old.write_text(json.dumps(record))

    resumed = cli.run(write_sweep(cli), "--resume", "--no-progress")
    assert resumed.returncode == 1
    rows = {row["case"]: row for row in cli.summary()["jobs"]}
    assert all(row["resumed"] for row in rows.values())
    assert rows["exit3"]["reason"] == EXPECTED["exit3"]
    assert rows["signal"]["reason"] == "killed by signal 9"
