"""``executor: {kind: slurm}`` through the command line, on the real one-node Slurm of
``scripts/slurm-local``: worker jobs submitted with ``sbatch``, jobs that run inside their
Slurm allocation, and no job of the batch left in the queue whatever stops the driver.

If Slurm cannot be started here, every test FAILS with the reason (``local_slurm``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from helpers.fake_jobs import is_gone, wait_until, write_job_script
from helpers.repeat_jobs import check_every_repeat_ran_once, repeat_command, triples

from batch.executors.slurm import job_name

if TYPE_CHECKING:
    from conftest import BatchCli, Driver
    from helpers.slurm_fixture import LocalSlurm

#: Brings the session fixture ``local_slurm``.
pytest_plugins = ("helpers.slurm_fixture",)

#: The job: says which Slurm job it runs in, counts its runs; a ``hold*`` case writes
#: ``job-CASE`` (its pid and Slurm job id) and waits while ``gate`` exists.
JOB = """
import os, sys, time
from pathlib import Path

case, model, attempt, here = sys.argv[1:5]
here = Path(here)
slurm_job = os.environ.get("SLURM_JOB_ID", "")
print(f"SLURM_JOB_ID={slurm_job}", flush=True)
with open(here / "count.txt", "a") as counts:
    counts.write(f"{case}\\t{model}\\t{attempt}\\n")
if case.startswith("hold"):
    (here / f".job-{case}").write_text(f"{os.getpid()} {slurm_job}")
    os.replace(here / f".job-{case}", here / f"job-{case}")
    while (here / "gate").exists():
        time.sleep(0.05)
"""


@pytest.fixture(autouse=True)
def cancel_leftovers(batch_cli: BatchCli, local_slurm: LocalSlurm) -> Iterator[None]:
    """After a failed test, no worker job of its batches holds the node's CPUs for the
    next test (the drivers it left are SIGKILLed, which leaves their jobs queued)."""
    yield
    batch_cli.stop_all()
    for batch_dir in batch_cli.batch_dirs():
        local_slurm.scancel_name(job_name(batch_dir))


def slurm_sweep(
    cli: BatchCli,
    slurm: LocalSlurm,
    cases: list[str],
    models: list[str],
    *,
    max_concurrent: int = 2,
    command: list[str] | None = None,
    **executor: Any,
) -> Path:
    if command is None:
        job = write_job_script(cli.dir, JOB)
        command = [str(job), "{case}", "{model}", "{attempt}", str(cli.dir)]
    sweep = {
        "output": "runs",
        "cases": cases,
        "models": models,
        "command": command,
        "max_concurrent": max_concurrent,
        "kill_grace": "1s",
        "executor": {
            "kind": "slurm",
            "partition": slurm.partition,
            "cores": 1,
            "memory": "512MiB",
            "walltime": "00:10:00",
            "host": "127.0.0.1",
            **executor,
        },
    }
    path = cli.dir / "sweep.yaml"
    path.write_text(json.dumps(sweep, indent=1), encoding="utf-8")
    return path


def with_repeats(sweep: Path, repeats: int) -> Path:
    data = json.loads(sweep.read_text(encoding="utf-8"))
    sweep.write_text(json.dumps({**data, "repeats": repeats}, indent=1), encoding="utf-8")
    return sweep


def slurm_job_ids(batch_dir: Path) -> dict[tuple[str, str], str]:
    """(case, model) -> the SLURM_JOB_ID its recorded run printed ("" when none)."""
    seen = {}
    for meta_path in batch_dir.glob("*/*/run-meta.json"):
        meta = json.loads(meta_path.read_text())
        log = (meta_path.parent / "output.log").read_text()
        (line,) = [line for line in log.splitlines() if line.startswith("SLURM_JOB_ID=")]
        seen[meta["test_case"], meta["model"]] = line.removeprefix("SLURM_JOB_ID=")
    return seen


def counted(cli: BatchCli) -> list[str]:
    return sorted((cli.dir / "count.txt").read_text().splitlines())


def queue_empties(slurm: LocalSlurm, name: str, timeout: float = 10.0) -> bool:
    """True once no job of ``name`` is queued or running (completing jobs take a moment)."""
    return wait_until(lambda: not slurm.squeue_ids(name), timeout=timeout)


def no_process_left(slurm: LocalSlurm, name: str) -> None:
    """No process of a worker job of ``name`` outlives it: not the Dask worker, not a job.
    (Slurm sends SIGKILL KillWait = 2 s after a cancel's SIGTERM, to what it still tracks.)"""
    wait_until(lambda: not slurm.processes(name), timeout=15)
    assert slurm.processes(name) == []


def held(cli: BatchCli, case: str, timeout: float = 60.0) -> tuple[int, str]:
    """The pid and Slurm job id of ``case``'s running job, once it holds."""
    path = cli.dir / f"job-{case}"
    assert wait_until(path.exists, timeout=timeout), f"{case} never started"
    pid, slurm_job = path.read_text().split()
    return int(pid), slurm_job


def holding(cli: BatchCli, count: int, timeout: float = 60.0) -> list[tuple[int, str]]:
    """The pid and Slurm job id of the first ``count`` jobs that hold, once they do."""
    assert wait_until(lambda: len(list(cli.dir.glob("job-*"))) >= count, timeout=timeout)
    return [held(cli, path.name.removeprefix("job-")) for path in cli.dir.glob("job-*")]


def test_a_40_job_sweep_runs_every_job_in_a_slurm_job_and_leaves_the_queue_empty(
    batch_cli: BatchCli, local_slurm: LocalSlurm
) -> None:
    cli = batch_cli
    cases = [f"c{n:02d}" for n in range(8)]
    models = ["m/a", "m:b", "m-c", "m.d", "m e"]
    sweep = slurm_sweep(cli, local_slurm, cases, models)

    result = cli.run(sweep, "--no-progress", timeout=120)

    assert result.returncode == 0, result.stdout + result.stderr
    batch_dir = cli.only_batch_dir()
    name = job_name(batch_dir)
    everything = {(case, model) for case in cases for model in models}
    rows = cli.summary()["jobs"]
    assert {(row["case"], row["model"]) for row in rows} == everything
    assert {(row["status"], row["attempts"]) for row in rows} == {("passed", 1)}
    records = cli.records()
    assert {(meta["test_case"], meta["model"]) for meta in records} == everything
    assert {(meta["outcome"], meta["exit_code"]) for meta in records} == {("passed", 0)}
    assert counted(cli) == sorted(f"{c}\t{m}\t1" for c, m in everything)
    # Each job ran inside a Slurm allocation: one of this batch's worker jobs, whose logs
    # (NAME-<jobid>.out, written by Slurm) are in the batch dir.
    job_ids = set(slurm_job_ids(batch_dir).values())
    assert all(job_id.isdigit() for job_id in job_ids), job_ids
    logged = {path.name for path in (batch_dir / "batch-logs/slurm").iterdir()}
    assert {f"{name}-{job_id}.out" for job_id in job_ids} <= logged
    assert queue_empties(local_slurm, name)
    no_process_left(local_slurm, name)


def test_a_repeats_sweep_on_slurm_records_every_repeat_once_and_a_resume_reruns_none(
    batch_cli: BatchCli, local_slurm: LocalSlurm
) -> None:
    cli = batch_cli
    cases, models = ["c1", "c2", "c3"], ["m/a", "m:b"]
    command = repeat_command(cli.dir)
    sweep = with_repeats(slurm_sweep(cli, local_slurm, cases, models, command=command), 2)

    first = cli.run(sweep, "--no-progress", timeout=120)

    assert first.returncode == 0, first.stdout + first.stderr
    expected = triples(cases, models, 2)
    check_every_repeat_ran_once(cli, cli.only_batch_dir(), expected)
    resumed = cli.run(sweep, "--no-progress", "--resume", timeout=120)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    check_every_repeat_ran_once(cli, cli.only_batch_dir(), expected)  # nothing ran again
    assert all(row["resumed"] for row in cli.summary()["jobs"])
    name = job_name(cli.only_batch_dir())
    assert queue_empties(local_slurm, name)
    no_process_left(local_slurm, name)


def test_a_worker_job_cancelled_mid_sweep_loses_nothing(
    batch_cli: BatchCli, local_slurm: LocalSlurm
) -> None:
    cli = batch_cli
    (cli.dir / "gate").touch()
    sweep = slurm_sweep(cli, local_slurm, ["hold", "c1", "c2", "c3"], ["m"])
    driver = cli.start(sweep, "--no-progress")
    _, victim = held(cli, "hold")
    assert wait_until(lambda: len(list(cli.dir.glob("runs/*/*/*/run-meta.json"))) == 3, 60)

    subprocess.run(["scancel", victim], check=True, timeout=30)
    # The lost attempt runs again, on another worker job (a new one if need be).
    assert wait_until(lambda: held(cli, "hold")[1] != victim, timeout=60)
    (cli.dir / "gate").unlink()

    assert driver.wait(60) == 0, driver.stdout + driver.stderr
    assert cli.statuses() == dict.fromkeys(["hold", "c1", "c2", "c3"], "passed")
    assert {row["case"]: row["attempts"] for row in cli.summary()["jobs"]}["hold"] == 2
    assert counted(cli) == sorted(["hold\tm\t1", "hold\tm\t2", "c1\tm\t1", "c2\tm\t1", "c3\tm\t1"])
    # Slurm signals every process of the cancelled worker job at once, so the job may die
    # before its worker and be recorded: killed by SIGTERM, which is not its outcome.
    records = {meta["attempt"]: meta for meta in cli.records() if meta["test_case"] == "hold"}
    assert records[2]["outcome"] == "passed"
    assert set(records) <= {1, 2}
    if 1 in records:
        assert (records[1]["stop_reason"], records[1]["exit_code"]) == ("signal", -15)
    assert queue_empties(local_slurm, job_name(cli.only_batch_dir()))
    no_process_left(local_slurm, job_name(cli.only_batch_dir()))


def interrupted_while_two_jobs_hold(cli: BatchCli, slurm: LocalSlurm) -> tuple[Driver, str]:
    """A sweep of hold1, hold2 and c3, interrupted once while both holds run on Slurm; the
    driver and its worker jobs' name."""
    (cli.dir / "gate").touch()
    sweep = slurm_sweep(cli, slurm, ["hold1", "hold2", "c3"], ["m"])
    driver = cli.start(sweep, "--no-progress")
    held(cli, "hold1")
    held(cli, "hold2")
    name = job_name(cli.only_batch_dir())
    assert slurm.squeue_ids(name)
    driver.signal(signal.SIGINT)
    assert wait_until(lambda: "interrupted: starting no new jobs" in driver.stdout)
    return driver, name


def test_one_interrupt_lets_running_jobs_finish_and_leaves_no_worker_job_queued(
    batch_cli: BatchCli, local_slurm: LocalSlurm
) -> None:
    cli = batch_cli
    driver, name = interrupted_while_two_jobs_hold(cli, local_slurm)
    (cli.dir / "gate").unlink()  # the running jobs finish and are recorded

    assert driver.wait(60) == 130, driver.stdout + driver.stderr
    assert local_slurm.squeue_ids(name) == []
    no_process_left(local_slurm, name)
    assert cli.statuses() == {"hold1": "passed", "hold2": "passed", "c3": "skipped"}
    assert counted(cli) == ["hold1\tm\t1", "hold2\tm\t1"]


def test_two_interrupts_kill_the_jobs_and_leave_no_worker_job_queued(
    batch_cli: BatchCli, local_slurm: LocalSlurm
) -> None:
    cli = batch_cli
    driver, name = interrupted_while_two_jobs_hold(cli, local_slurm)
    driver.signal(signal.SIGINT)

    assert driver.wait(60) == 130, driver.stdout + driver.stderr
    assert local_slurm.squeue_ids(name) == []  # at once: the driver waited for scancel
    no_process_left(local_slurm, name)
    assert cli.statuses() == dict.fromkeys(["hold1", "hold2", "c3"], "skipped")
    assert cli.records() == []


def test_a_killed_driver_leaves_worker_jobs_that_resume_cancels_before_it_finishes(
    batch_cli: BatchCli, local_slurm: LocalSlurm
) -> None:
    cli = batch_cli
    (cli.dir / "gate").touch()
    cases = ["hold1", "hold2", "hold3"]
    # Three one-CPU worker jobs on the two-CPU node: two run a job each, one is pending.
    sweep = slurm_sweep(cli, local_slurm, cases, ["m"], max_concurrent=3)
    driver = cli.start(sweep, "--no-progress")
    pids = [pid for pid, _ in holding(cli, 2)]
    name = job_name(cli.only_batch_dir())
    assert wait_until(lambda: len(local_slurm.squeue_ids(name)) == 3)

    driver.signal(signal.SIGKILL)
    driver.wait()
    # Nothing ran the driver's cleanup: its worker jobs are still there. The running ones
    # end soon with their scheduler; the pending one would start and wait for it a minute.
    orphans = set(local_slurm.squeue_ids(name))
    assert len(orphans) == 3
    assert wait_until(lambda: all(is_gone(pid) for pid in pids), timeout=30)
    for held_file in cli.dir.glob("job-*"):
        held_file.unlink()

    resumed = cli.start(sweep, "--no-progress", "--resume")
    job_ids = {job_id for _, job_id in holding(cli, 2)}
    assert not set(local_slurm.squeue_ids(name)) & orphans  # cancelled as the resume started
    (cli.dir / "gate").unlink()

    assert resumed.wait(60) == 0, resumed.stdout + resumed.stderr
    assert cli.statuses() == dict.fromkeys(cases, "passed")
    ran_in = set(slurm_job_ids(cli.only_batch_dir()).values())
    assert job_ids <= ran_in
    assert not ran_in & orphans
    assert local_slurm.squeue_ids(name) == []
    no_process_left(local_slurm, name)


def test_a_batch_resumes_on_slurm_after_local_and_on_local_after_slurm(
    batch_cli: BatchCli, local_slurm: LocalSlurm
) -> None:
    cli = batch_cli
    sweep = slurm_sweep(cli, local_slurm, ["c1", "c2", "c3", "c4"], ["m"])

    local = cli.run(sweep, "--no-progress", "--executor", "local", "--cases", "c1")
    on_slurm = cli.run(
        sweep, "--no-progress", "--resume", "--executor", "slurm", "--cases", "c[12]", timeout=120
    )
    back_local = cli.run(sweep, "--no-progress", "--resume", "--executor", "local")

    for result in (local, on_slurm, back_local):
        assert result.returncode == 0, result.stdout + result.stderr
    assert cli.statuses() == dict.fromkeys(["c1", "c2", "c3", "c4"], "passed")
    assert counted(cli) == sorted(f"c{n}\tm\t1" for n in range(1, 5))
    ran_in = {case: job_id for (case, _), job_id in slurm_job_ids(cli.only_batch_dir()).items()}
    assert ran_in["c2"].isdigit()
    assert ran_in["c1"] == ran_in["c3"] == ran_in["c4"] == os.environ.get("SLURM_JOB_ID", "")
    no_process_left(local_slurm, job_name(cli.only_batch_dir()))
