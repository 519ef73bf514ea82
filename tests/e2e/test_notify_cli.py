"""Notifications through the real CLI: a sweep's notify commands get the stall, recovered,
interrupt and end events of real jobs; one that fails is logged, one that hangs is killed,
and neither holds the sweep up. The closing lines say what to type next."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helpers.fake_jobs import is_gone, read_pid, wait_until
from helpers.paths import PROGRAM

if TYPE_CHECKING:
    from conftest import BatchCli

SECRET = "sk-live-notify-0123456789"

#: Appends what it was given (the event on stdin, the BATCH_* variables) to argv[1],
#: argv[2] seconds later: a notifier of the run is still running when the jobs are over.
RECORDER = """
import json, os, sys, time
time.sleep(float(sys.argv[2]))
event = json.loads(sys.stdin.read())
env = {k: v for k, v in os.environ.items() if k.startswith("BATCH_") and k != "BATCH_JOB_TOKEN"}
with open(sys.argv[1], "a") as out:
    out.write(json.dumps({"event": event, "env": env}) + "\\n")
"""


def recorder(cli: BatchCli, delay: float = 0.2) -> list[str]:
    script = cli.dir / "recorder.py"
    script.write_text(RECORDER)
    return [sys.executable, str(script), str(cli.dir / "notified.jsonl"), str(delay)]


def notified(cli: BatchCli) -> list[dict[str, Any]]:
    path = cli.dir / "notified.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def names(cli: BatchCli) -> list[str]:
    return [seen["event"]["event"] for seen in notified(cli)]


def events(batch_dir: Path, name: str) -> list[dict[str, Any]]:
    lines = (batch_dir / "batch-logs" / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == name]


def test_stall_recovered_and_end_reach_the_notifier_and_a_failing_one_is_logged(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    # The failing notifier quotes a secret: the log, events.jsonl and the screen redact it.
    failing = [sys.executable, "-c", f"import sys; print('no route {SECRET}'); sys.exit(3)"]
    cli.write_sweep(
        {"quick": ["print=429 rate limit", "exit=1"], "slow": ["sleep=1.5"]},
        max_concurrent=2,
        env={"API_TOKEN": SECRET},
        stall="1s",
        # A second: the stall's notifier still runs when the job that ends it finishes.
        notify={"commands": [recorder(cli, delay=1.0), failing], "timeout": "30s"},
    )
    started = time.monotonic()
    done = cli.run("sweep.yaml", "--no-progress")
    took = time.monotonic() - started

    assert done.returncode == 1, done.stderr
    # Each notifier ended long before its 30 s limit; the driver waited for no more.
    assert took < 20
    batch_dir = cli.only_batch_dir()
    assert sorted(names(cli)) == ["end", "recovered", "stall"]
    by_name = {seen["event"]["event"]: seen for seen in notified(cli)}
    stall = by_name["stall"]["event"]
    assert stall["running"] == 1 and stall["stalled_seconds"] >= 1
    assert stall["state"] == "running"
    end = by_name["end"]
    assert end["event"]["state"] == "complete" and end["event"]["exit_status"] == 1
    assert end["event"]["counts"]["error"] == 1 and end["event"]["counts"]["passed"] == 1
    assert end["env"]["BATCH_DIR"] == str(batch_dir)
    assert (end["env"]["BATCH_STATE"], end["env"]["BATCH_ERROR"]) == ("complete", "1")

    [stall_event] = events(batch_dir, "stall")
    assert stall_event["running"] == 1
    assert len(events(batch_dir, "recovered")) == 1
    failed = [e for e in events(batch_dir, "notify") if e["status"] == "failed"]
    assert sorted(e["on"] for e in failed) == ["end", "recovered", "stall"]

    log = (batch_dir / "batch-logs" / "notify.log").read_text()
    assert log.count("--- FAILED: exit code 3") == 3
    assert log.count("--- ok: exit code 0") == 3
    assert "no route [REDACTED]" in log
    assert SECRET not in log + (batch_dir / "batch-logs" / "events.jsonl").read_text()
    assert SECRET not in done.stdout
    # Said once on screen, however many events the command failed on.
    assert done.stdout.count("warning: notify command") == 1
    assert "stalled: no job finished for" in done.stdout
    assert done.stdout.splitlines()[-1] == (
        f"1 job ended in error (api_or_credit 1): {PROGRAM} sweep.yaml --retry-failed"
    )


def test_an_interrupt_is_notified_at_once_and_the_end_says_how_to_resume(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    gate = cli.dir / "gate"
    gate.touch()
    cli.write_sweep(
        {"held": [f"touch={cli.dir}/started", f"hold={gate}"], "waiting": []},
        max_concurrent=1,
        notify=recorder(cli),
    )
    driver = cli.start("sweep.yaml", "--no-progress")
    cli.wait_for(cli.dir / "started")

    driver.signal(signal.SIGINT)
    # Delivered while the held job still runs, not saved up for the end.
    assert wait_until(lambda: names(cli) == ["interrupt"], timeout=15)
    gate.unlink()

    assert driver.wait() == 130
    assert names(cli) == ["interrupt", "end"]
    end = notified(cli)[1]["event"]
    assert (end["state"], end["exit_status"]) == ("interrupted", 130)
    assert end["counts"]["passed"] == 1 and end["counts"]["skipped"] == 1
    assert driver.stdout.splitlines()[-1] == (
        f"Interrupted: 1 of 2 jobs not run: {PROGRAM} sweep.yaml --resume"
    )


def test_a_hanging_notifier_is_killed_after_its_timeout_and_holds_the_end_no_longer(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    pid_file = cli.dir / "notifier.pid"
    hanging = [
        sys.executable,
        "-c",
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)",
    ]
    cli.write_sweep(["c1", "c2"], notify={"commands": [hanging], "timeout": "1s"})
    started = time.monotonic()
    done = cli.run("sweep.yaml", "--no-progress")
    took = time.monotonic() - started

    assert done.returncode == 0, done.stderr
    assert took < 15  # 1 s limit, 1 s grace, and the sweep itself; not the notifier's 60 s
    assert is_gone(read_pid(pid_file))
    log = (cli.only_batch_dir() / "batch-logs" / "notify.log").read_text()
    assert "--- FAILED: timed out after 1.0s; killed" in log
    assert "timed out after 1.0s; killed; see batch-logs/notify.log" in done.stdout
    assert done.stdout.splitlines()[-1] == "All 2 jobs passed."


def test_a_ctrl_c_while_the_driver_waits_for_notifiers_ends_the_wait_not_the_run(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    pid_file = cli.dir / "notifier.pid"
    hanging = [
        sys.executable,
        "-c",
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)",
    ]
    cli.write_sweep(["c1"], notify={"commands": [hanging], "timeout": "60s", "events": ["end"]})
    driver = cli.start("sweep.yaml", "--no-progress")
    notifier = read_pid(pid_file, timeout=15)

    driver.signal(signal.SIGINT)

    assert driver.wait(timeout=10) == 0
    assert is_gone(notifier)
    assert "not waiting for the notify commands: killing them" in driver.stdout
    assert driver.stdout.splitlines()[-1] == "1 job passed."
    assert cli.summary()["state"] == "complete"


def test_a_halt_is_notified_and_the_end_says_why_and_how_to_continue(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    cli.write_sweep(
        {"bad": ["print=429 rate limit", "exit=1"], "w1": [], "w2": []},
        max_concurrent=1,
        halt="soon,error=1",
        notify=recorder(cli),
    )
    done = cli.run("sweep.yaml", "--no-progress")

    assert done.returncode == 4, done.stdout + done.stderr
    assert names(cli) == ["halt", "end"]
    halt, end = (seen["event"] for seen in notified(cli))
    assert (halt["rule"], halt["mode"]) == ("threshold", "soon")
    assert halt["reason"].startswith("halt soon,error=1: 1 of 1 finished jobs ended in error")
    assert (end["state"], end["exit_status"]) == ("halted", 4)
    lines = done.stdout.splitlines()
    assert lines[-3] == f"Halted: {halt['reason']}"
    assert lines[-2] == f"2 jobs not run; fix the cause, then: {PROGRAM} sweep.yaml --resume"
    assert lines[-1] == (
        f"1 job ended in error (api_or_credit 1): {PROGRAM} sweep.yaml --retry-failed"
    )
    # The halt's own message names the command as the user typed it.
    assert f"({PROGRAM} sweep.yaml --resume continues)" in halt["reason"]


def test_a_deadline_that_refuses_a_start_is_notified_as_a_halt(batch_cli: BatchCli) -> None:
    cli = batch_cli
    sweep = cli.write_sweep(
        {"long": [], "quick": []}, max_concurrent=1, timeout=None, notify=recorder(cli)
    )
    data = json.loads(sweep.read_text())
    for case in data["cases"]:
        case["timeout"] = {"long": "2h", "quick": "10s"}[case["id"]]
    sweep.write_text(json.dumps(data))

    done = cli.run(sweep, "--no-progress", "--deadline", "1h")

    assert done.returncode == 4, done.stdout + done.stderr
    assert names(cli) == ["halt", "end"]
    halt, end = (seen["event"] for seen in notified(cli))
    assert (halt["rule"], halt["mode"]) == ("deadline", "soon")
    assert halt["reason"].startswith("deadline ")
    assert "starting no job that would end after it" in halt["reason"]
    assert (end["state"], end["exit_status"]) == ("halted", 4)
