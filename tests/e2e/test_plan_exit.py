"""``batch plan``, and a finished local run, as a program end their process as soon as their
output is flushed (batch/cli.py, ``_exit_at_once``): all of the output, the files and the
exit status, as a normal exit."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import BatchCli, _argv, _env

from batch.cli import main


def buffered_env() -> dict[str, str]:
    """The tests' environment with stdout buffered, as a user's is (not PYTHONUNBUFFERED):
    only then is there output left to flush when the plan ends."""
    env = _env(None)
    env.pop("PYTHONUNBUFFERED", None)
    return env


def run_program(cli: BatchCli, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """``batch ARGS`` as the program, with a buffered stdout."""
    return subprocess.run(
        _argv(args),
        cwd=cli.dir,
        env=buffered_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_large_plan_ends_at_once_with_all_its_output(
    batch_cli: BatchCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Far more than a pipe or stdout's buffer holds: a lost tail would show.
    cli = batch_cli
    sweep = cli.write_sweep([f"case-{n:04d}" for n in range(3000)])
    monkeypatch.chdir(cli.dir)
    in_process = CliRunner().invoke(main, ["plan", sweep.name])  # no early exit in here
    assert in_process.exit_code == 0

    for fmt in ("table", "json"):
        program = run_program(cli, "plan", sweep.name, "--format", fmt)
        assert program.returncode == 0, program.stderr
        if fmt == "table":
            assert program.stdout == in_process.output
            assert program.stdout.endswith(f"0 carried — a new batch dir under {cli.dir}/runs\n")
        else:
            assert json.loads(program.stdout)["counts"] == {"run": 3000, "carry": 0, "retry": 0}


def test_a_plan_whose_reader_goes_away_exits_as_before(batch_cli: BatchCli) -> None:
    # The flush fails on the closed pipe: the normal exit reports it, as it always did.
    cli = batch_cli
    sweep = cli.write_sweep([f"case-{n:04d}" for n in range(3000)])
    plan = subprocess.Popen(
        _argv(["plan", sweep.name]),
        cwd=cli.dir,
        env=buffered_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert plan.stdout is not None and plan.stderr is not None
    plan.stdout.readline()
    plan.stdout.close()
    err = plan.stderr.read()
    assert plan.wait(timeout=60) != 0
    assert b"Traceback" not in err or b"BrokenPipeError" in err


def test_a_finished_run_ends_at_once_with_its_output_summary_events_and_lock_released(
    batch_cli: BatchCli,
) -> None:
    # A local run as the program skips the interpreter's teardown (batch/cli.py, run): what
    # a user and the next invocation read must all be there, and the exit status as before.
    cli = batch_cli
    cases: dict[str, tuple[str, ...]] = {f"c{n:02d}": () for n in range(11)}
    cases["c11"] = ("exit=2",)  # a non-model failure: error, exit status 1
    sweep = cli.write_sweep(cases, max_concurrent=4)
    program = run_program(cli, sweep.name, "--no-progress")
    assert program.returncode == 1, program.stderr
    (batch_dir,) = (cli.dir / "runs").iterdir()
    summary = json.loads((batch_dir / "batch-summary.json").read_text())
    assert summary["state"] == "complete"
    assert (summary["totals"]["passed"], summary["totals"]["error"]) == (11, 1)
    lines = (batch_dir / "batch-logs" / "events.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["event"] == "batch_end"
    assert not (batch_dir / "batch-logs" / "driver.lock").exists()
    # The closing lines come last, after the table, on a buffered stdout.
    assert "--retry-failed" in program.stdout.splitlines()[-1], program.stdout[-500:]

    # status ends at once too: its whole JSON, still in stdout's buffer at the end.
    status = run_program(cli, "status", batch_dir, "--format", "json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["recorded"] == {"passed": 11, "failed": 0, "error": 1}
