"""Stopping a sweep through the real CLI: Ctrl-C (or SIGTERM) once and twice, during a
stagger wait and before the first job; a second driver on the same batch dir; a driver
killed outright.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import pytest
from helpers.fake_jobs import fake_agent_command, is_gone, read_pid, wait_until

from batch.processes.watchdog import TOKEN_VAR, new_invocation_token

if TYPE_CHECKING:
    from conftest import BatchCli


def held_sweep(
    cli: BatchCli,
    *,
    held: int,
    waiting: int,
    extra: tuple[str, ...] = (),
    kill_grace: str = "0.5s",
) -> Path:
    """``held`` jobs that start and wait on ``cli.dir/gate``, then ``waiting`` that cannot
    start until a slot frees (``max_concurrent`` is ``held``). ``extra`` actions run before
    the wait, ``CASE`` in them replaced by the case id."""
    (cli.dir / "gate").touch()
    cases = {
        f"h{n}": [
            f"pidfile={cli.dir}/pid-h{n}",
            *(action.replace("CASE", f"h{n}") for action in extra),
            f"touch={cli.dir}/started-h{n}",
            f"hold={cli.dir}/gate",
        ]
        for n in range(1, held + 1)
    }
    cases.update({f"w{n}": [] for n in range(1, waiting + 1)})
    return cli.write_sweep(cases, max_concurrent=held, kill_grace=kill_grace)


def started(cli: BatchCli, held: int) -> list[Path]:
    return [cli.dir / f"started-h{n}" for n in range(1, held + 1)]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_first_interrupt_starts_nothing_new_and_lets_running_jobs_finish(
    batch_cli: BatchCli, sig: int
) -> None:
    cli = batch_cli
    sweep = held_sweep(cli, held=2, waiting=3)
    driver = cli.start(sweep, "--no-progress")
    cli.wait_for(*started(cli, 2))

    driver.signal(sig)
    assert wait_until(lambda: "interrupted: starting no new jobs" in driver.stdout)
    (cli.dir / "gate").unlink()

    assert driver.wait() == 130
    assert cli.runs_counted() == ["h1", "h2"]
    assert cli.statuses() == {
        "h1": "passed",
        "h2": "passed",
        "w1": "skipped",
        "w2": "skipped",
        "w3": "skipped",
    }
    assert cli.summary()["state"] == "interrupted"
    assert sorted(meta["test_case"] for meta in cli.records()) == ["h1", "h2"]


def test_second_interrupt_kills_every_job_group_and_records_nothing_for_them(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    # Each held job ignores SIGTERM and leaves a grandchild that ignores it too: only the
    # SIGKILL to the whole group after the grace stops them.
    sweep = held_sweep(
        cli, held=2, waiting=2, extra=("ignore-term", f"grandchild={cli.dir}/grandchild-CASE")
    )
    driver = cli.start(sweep, "--no-progress")
    cli.wait_for(*started(cli, 2))
    pids = [read_pid(cli.dir / f"pid-h{n}") for n in (1, 2)]
    pids += [read_pid(cli.dir / f"grandchild-h{n}") for n in (1, 2)]

    driver.signal(signal.SIGINT)
    assert wait_until(lambda: "interrupted: starting no new jobs" in driver.stdout)
    driver.signal(signal.SIGINT)

    assert driver.wait(timeout=15) == 130
    assert all(is_gone(pid) for pid in pids)
    batch_dir = cli.only_batch_dir()
    run_dirs = sorted(batch_dir.glob("m/h*"))
    assert len(run_dirs) == 2
    assert not any((run_dir / "run-meta.json").exists() for run_dir in run_dirs)
    assert set(cli.statuses().values()) == {"skipped"}
    assert cli.summary()["state"] == "interrupted"
    assert cli.summary()["totals"]["skipped"] == 4
    assert "killing running jobs" in driver.stdout


def test_a_second_driver_on_a_busy_batch_dir_exits_3_naming_the_holder(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = held_sweep(cli, held=1, waiting=1)
    first = cli.start(sweep, "--no-progress")
    cli.wait_for(*started(cli, 1))
    batch_dir = cli.only_batch_dir()

    second = cli.run(sweep, "--resume", batch_dir, "--no-progress")

    assert second.returncode == 3
    assert f"pid {first.pid}" in second.stderr
    assert str(batch_dir) in second.stderr
    (cli.dir / "gate").unlink()
    assert first.wait() == 0
    assert cli.runs_counted() == ["h1", "w1"]  # the refused driver started nothing


#: Job c1 removes its driver's lock file, says so, then waits on the test's gate; c2 passes.
UNLOCKER = """
import os, sys, time
removed, gate, case = sys.argv[1:4]
if case == "c1":
    os.unlink(os.path.join(os.environ["BATCH_DIR"], "batch-logs", "driver.lock"))
    open(removed, "w").close()
    while os.path.exists(gate):
        time.sleep(0.02)
"""


def test_a_job_removing_the_lock_file_lets_no_second_driver_in(batch_cli: BatchCli) -> None:
    cli = batch_cli
    job = cli.dir / "unlocker.py"
    job.write_text(UNLOCKER)
    gate, removed = cli.dir / "gate", cli.dir / "removed"
    gate.touch()
    sweep = cli.write_sweep(["c1", "c2"], max_concurrent=1)
    data = json.loads(sweep.read_text())
    data["command"] = [sys.executable, str(job), str(removed), str(gate), "{case}"]
    sweep.write_text(json.dumps(data))
    first = cli.start(sweep, "--no-progress")
    cli.wait_for(removed)
    batch_dir = cli.only_batch_dir()
    assert not (batch_dir / "batch-logs" / "driver.lock").exists()

    second = cli.run(sweep, "--resume", batch_dir, "--no-progress")

    # Was: the second driver took the batch, stopped c1 as "a leftover of a dead driver"
    # and ran both jobs again beside the first.
    assert second.returncode == 3, second.stdout + second.stderr
    assert str(batch_dir) in second.stderr and "in use by another driver" in second.stderr
    assert "leftover" not in second.stdout
    # The holder makes its lock file again: batch control finds the driver and steers it.
    lock = batch_dir / "batch-logs" / "driver.lock"
    assert wait_until(lock.exists, 5)
    assert json.loads(lock.read_text())["pid"] == first.pid
    assert cli.run("control", batch_dir, "pause").returncode == 0
    assert cli.run("control", batch_dir, "continue").returncode == 0
    gate.unlink()
    assert first.wait() == 0, first.stdout + first.stderr
    assert "driver.lock was removed or replaced while this driver ran" in first.stdout
    assert cli.statuses() == {"c1": "passed", "c2": "passed"}
    assert [r["test_case"] for r in cli.records()] == ["c1", "c2"]  # each ran once


def test_jobs_die_within_kill_grace_when_the_driver_is_killed(batch_cli: BatchCli) -> None:
    cli = batch_cli
    sweep = held_sweep(cli, held=2, waiting=0, extra=("ignore-term",))
    driver = cli.start(sweep, "--no-progress")
    cli.wait_for(*started(cli, 2))
    pids = [read_pid(cli.dir / f"pid-h{n}") for n in (1, 2)]

    driver.signal(signal.SIGKILL)
    driver.wait()

    # kill_grace is 0.5 s: SIGTERM is ignored, SIGKILL follows the grace, not 10 s later.
    assert wait_until(lambda: all(is_gone(pid) for pid in pids), timeout=4)


def test_an_interrupt_during_a_stagger_wait_ends_the_sweep_at_once(batch_cli: BatchCli) -> None:
    cli = batch_cli
    sweep = cli.write_sweep({"first": [f"touch={cli.dir}/started-first"], "next": []}, stagger="1h")
    driver = cli.start(sweep, "--no-progress")
    cli.wait_for(cli.dir / "started-first")
    assert wait_until(lambda: "DONE first" in driver.stdout)

    driver.signal(signal.SIGINT)

    assert driver.wait(timeout=10) == 130
    assert cli.statuses() == {"first": "passed", "next": "skipped"}


def test_an_interrupt_before_the_first_job_exits_130(batch_cli: BatchCli) -> None:
    cli = batch_cli
    sweep = held_sweep(cli, held=1, waiting=0, kill_grace="20s")
    batch_dir = cli.dir / "runs" / "batch-20261130T031500Z"
    (batch_dir / "batch-logs").mkdir(parents=True)
    # A job group a dead driver left behind that ignores SIGTERM: the next driver spends
    # kill_grace stopping it before it starts anything, with no sweep of its own to stop.
    # It carries its invocation's job token, as a real one does: a group the driver cannot
    # prove its own is left alone at once, and the interrupt would then race the first job.
    invocation = new_invocation_token()
    leftover = subprocess.Popen(
        fake_agent_command("ignore-term", f"touch={cli.dir}/leftover", "sleep=30"),
        start_new_session=True,
        env={**os.environ, TOKEN_VAR: f"{invocation}.1"},
    )
    try:
        cli.wait_for(cli.dir / "leftover")
        entry = {
            "pgid": leftover.pid,
            "pid": leftover.pid,
            "start_time": _started(leftover.pid),
            "token": f"{invocation}.1",
        }
        state = {"token": invocation, "groups": [entry]}
        (batch_dir / "batch-logs" / "pgids.json").write_text(json.dumps(state))
        driver = cli.start(sweep, "--resume", batch_dir, "--no-progress")
        lock = batch_dir / "batch-logs" / "driver.lock"
        assert wait_until(lambda: lock.exists() and f'"pid": {driver.pid}' in lock.read_text())

        driver.signal(signal.SIGINT)

        assert driver.wait(timeout=10) == 130
        assert "Traceback" not in driver.stderr and "Aborted" not in driver.stderr
        assert "interrupted" in driver.stderr
        assert cli.runs_counted() == []
    finally:
        leftover.kill()
        leftover.wait()


def _started(pid: int) -> float:
    return psutil.Process(pid).create_time()
