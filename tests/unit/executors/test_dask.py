"""Sweeps on a real Dask cluster: a scheduler and two worker processes on 127.0.0.1.

The driver is the real ``batch`` command (a subprocess); the jobs are the fake agent. One
cluster serves the module; the tests that break a cluster (a lost scheduler) start their own.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dask
import psutil
import pytest
from click.testing import CliRunner
from distributed import Client, LocalCluster
from helpers.fake_jobs import (
    fake_agent_command,
    is_gone,
    make_sweep,
    read_pid,
    wait_until,
    write_job_script,
)
from helpers.repeat_jobs import check_every_repeat_ran_once, repeat_command, triples

from batch.attempt.runner import AttemptResult
from batch.cli import main
from batch.executors.base import DASK_HINT
from batch.executors.dask_worker import Refused, WorkerCall, run_on_worker
from batch.plan.jobs import Job
from batch.plan.planner import choose_executor
from batch.sweep.features.executor import ExecutorSpec

if TYPE_CHECKING:
    from conftest import BatchCli
    from helpers.podman_fixture import PodmanTest

#: Brings ``podman`` (real containers, for the worker's container cleanup).
pytest_plugins = ("helpers.podman_fixture",)


def start_cluster(n_workers: int) -> LocalCluster:
    # Dask must never rerun a task on its own: a task whose worker died fails at once.
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        return LocalCluster(
            n_workers=n_workers,
            threads_per_worker=4,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            # No dashboard; its HTTP server (always started) on loopback, any free port.
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
            memory_limit=0,
        )


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    cluster = start_cluster(2)
    try:
        yield cluster
    finally:
        cluster.close(timeout=30)


@pytest.fixture(scope="module")
def client(cluster: LocalCluster) -> Iterator[Client]:
    with Client(cluster, set_as_default=False) as client:
        yield client


@pytest.fixture
def scheduler(cluster: LocalCluster, client: Client) -> str:
    """The module cluster's address, with both workers up (a test may have killed one)."""
    client.wait_for_workers(2, timeout=30)
    return cluster.scheduler_address


def worker_pids(client: Client) -> set[int]:
    return set(client.run(os.getpid).values())


def outcomes(batch_dir: Path) -> dict[tuple[str, str], tuple[Any, ...]]:
    """Per (case, model): what the summary says and what the record says."""
    rows = json.loads((batch_dir / "batch-summary.json").read_text())["jobs"]
    records = {}
    for path in batch_dir.glob("*/*/run-meta.json"):
        meta = json.loads(path.read_text())
        records[meta["test_case"], meta["model"]] = (
            meta["outcome"],
            meta["failure_category"],
            meta["stop_reason"],
            meta["exit_code"],
        )
    return {
        (row["case"], row["model"]): (
            row["status"],
            row["failure_category"],
            row["attempts"],
            records.get((row["case"], row["model"])),
        )
        for row in rows
    }


def only_dir(parent: Path) -> Path:
    (found,) = [path for path in parent.iterdir() if path.is_dir()]
    return found


def run_dirs(batch_dir: Path, case: str) -> list[Path]:
    return sorted(batch_dir.glob(f"*/{case}-*"), key=lambda path: path.name[-2:])


def held_sweep(cli: BatchCli, cases: list[str], **keys: Any) -> Path:
    """Jobs that write ``pid-CASE`` and hold while ``cli.dir/gate`` exists."""
    (cli.dir / "gate").touch()
    held = {case: [f"pidfile={cli.dir}/pid-{case}", f"hold={cli.dir}/gate"] for case in cases}
    return cli.write_sweep(held, kill_grace="1s", **keys)


# --- the same results as the local executor ---------------------------------------------------

VARIED_CASES = {
    "passes": ["print=hello"],
    "fails": ["print=wrong answer", "fail"],
    "crashes": ["exit=3"],
    "rate-limited": ["print=429 rate limit", "exit=1"],
    "hangs": ["sleep=30"],
}


def test_a_sweep_on_dask_records_what_the_local_executor_records(
    batch_cli: BatchCli, scheduler: str
) -> None:
    cli = batch_cli
    sweep = cli.write_sweep(VARIED_CASES, models=["m/a", "m:b"], timeout="1s", kill_grace="1s")

    local = cli.run(sweep, "--no-progress", "-o", "local")
    on_dask = cli.run(sweep, "--no-progress", "-o", "dask", "--scheduler", scheduler)

    assert (local.returncode, on_dask.returncode) == (1, 1), on_dask.stderr
    expected = outcomes(only_dir(cli.dir / "local"))
    assert outcomes(only_dir(cli.dir / "dask")) == expected
    assert expected["hangs", "m:b"][0] == "error"  # the timeout was enforced on the worker
    assert expected["rate-limited", "m/a"][1] == "api_or_credit"
    assert sorted(cli.runs_counted()) == sorted(2 * 2 * list(VARIED_CASES))


def test_a_repeats_sweep_on_dask_records_every_repeat_once_and_a_resume_reruns_none(
    batch_cli: BatchCli, scheduler: str
) -> None:
    cli = batch_cli
    cases, models = ["c1", "c2", "c3"], ["m/a", "m:b"]
    sweep = cli.dir / "sweep.yaml"
    sweep.write_text(
        json.dumps(
            {
                "output": "runs",
                "cases": cases,
                "models": models,
                "repeats": 2,
                "command": repeat_command(cli.dir),
            }
        ),
        encoding="utf-8",
    )

    first = cli.run(sweep, "--no-progress", "--scheduler", scheduler)

    assert first.returncode == 0, first.stderr
    expected = triples(cases, models, 2)
    check_every_repeat_ran_once(cli, cli.only_batch_dir(), expected)
    resumed = cli.run(sweep, "--no-progress", "--resume", "--scheduler", scheduler)
    assert resumed.returncode == 0, resumed.stderr
    check_every_repeat_ran_once(cli, cli.only_batch_dir(), expected)  # nothing ran again
    assert all(row["resumed"] for row in cli.summary()["jobs"])


def test_jobs_run_in_worker_processes_not_in_the_driver(
    batch_cli: BatchCli, scheduler: str, client: Client
) -> None:
    cli = batch_cli
    sweep = held_sweep(cli, ["c1", "c2"])
    driver = cli.start(sweep, "--no-progress", "--scheduler", scheduler)

    parents = {psutil.Process(read_pid(cli.dir / f"pid-{c}", 30)).ppid() for c in ("c1", "c2")}
    (cli.dir / "gate").unlink()

    assert driver.wait() == 0, driver.stderr
    assert parents <= worker_pids(client)
    assert driver.pid not in parents
    assert cli.statuses() == {"c1": "passed", "c2": "passed"}


def test_a_worker_removes_the_containers_of_the_attempts_it_ran(
    batch_cli: BatchCli, scheduler: str, podman: PodmanTest
) -> None:
    cli = batch_cli
    podman_run = (
        'exec podman run --rm --cidfile "$BATCH_RUN_DIR/c1" --label "$BATCH_CONTAINER_LABEL" '
        '--network none --rootfs "$ROOTFS" /bin/busybox sleep 300'
    )
    sweep = cli.dir / "sweep.yaml"
    sweep.write_text(
        json.dumps(
            {
                "name": podman.name,
                "cases": ["held"],
                "models": ["m"],
                "command": ["sh", "-c", podman_run],
                # The workers started before the podman fixture set up their environment.
                "env": {**podman.local.env, "ROOTFS": str(podman.local.rootfs)},
                "containers": "podman",
                "timeout": "4s",
                "kill_grace": "300ms",
            }
        )
    )

    done = cli.run(sweep, "--no-progress", "--scheduler", scheduler, timeout=90)

    assert done.returncode == 1, done.stdout + done.stderr
    (record,) = cli.records()
    assert (record["outcome"], record["stop_reason"]) == ("error", "timeout")
    assert (cli.only_batch_dir() / record["run_dir"] / "c1").is_file()  # it was created
    assert record["containers_removed"] == 1
    assert podman.left() == {}


# --- a worker dies, the user aborts, the scheduler goes away ----------------------------------


def test_a_worker_killed_mid_job_leaves_no_record_and_the_driver_reruns_the_job(
    batch_cli: BatchCli, scheduler: str, client: Client
) -> None:
    cli = batch_cli
    (cli.dir / "gate").touch()
    cases = {
        "victim": [f"pidfile={cli.dir}/pid-victim", f"hold={cli.dir}/gate"],
        "c1": [],
        "c2": [],
    }
    sweep = cli.write_sweep(cases, kill_grace="1s")
    driver = cli.start(sweep, "--no-progress", "--scheduler", scheduler)
    job_pid = read_pid(cli.dir / "pid-victim", 30)
    worker_pid = psutil.Process(job_pid).ppid()
    # Until the driver has c1's and c2's outcomes: a record on disk whose answer was still
    # on its way from the worker is lost with the worker too (and rightly told as lost).
    assert wait_until(lambda: finished_cases(cli) == {"c1", "c2"}, timeout=30)
    assert worker_pid in worker_pids(client)

    os.kill(worker_pid, signal.SIGKILL)

    # The dead worker's watchdog stops its job: nothing of the lost attempt runs on.
    assert wait_until(lambda: is_gone(job_pid), timeout=15)
    (cli.dir / "gate").unlink()
    assert driver.wait(60) == 0, driver.stdout + driver.stderr
    batch_dir = cli.only_batch_dir()
    assert cli.statuses() == {"victim": "passed", "c1": "passed", "c2": "passed"}
    rows = {row["case"]: row for row in cli.summary()["jobs"]}
    assert rows["victim"]["attempts"] == 2
    first, second = run_dirs(batch_dir, "victim")
    assert not (first / "run-meta.json").exists()
    assert json.loads((second / "run-meta.json").read_text())["attempt"] == 2
    # Every attempt ran once: Dask did not run the lost one again behind the driver's back.
    counted = (cli.dir / "count.txt").read_text().splitlines()
    assert sorted(counted) == sorted(set(counted))
    assert [line for line in counted if line.startswith("victim")] == [
        "victim\tm\t1",
        "victim\tm\t2",
    ]
    events = [json.loads(line) for line in (batch_dir / "batch-logs/events.jsonl").open()]
    assert [e["case"] for e in events if e["event"] == "lost"] == ["victim"]


def finished_cases(cli: BatchCli) -> set[str]:
    """The cases whose outcome the driver has (a ``finish`` event in its events.jsonl)."""
    logs = list(cli.dir.glob("runs/*/batch-logs/events.jsonl"))
    lines = logs[0].read_text().splitlines() if logs else []
    events = [json.loads(line) for line in lines if line.endswith("}")]
    return {event["case"] for event in events if event["event"] == "finish"}


def test_a_job_that_takes_its_worker_down_twice_is_left_for_resume(
    batch_cli: BatchCli, scheduler: str
) -> None:
    cli = batch_cli
    job = write_job_script(cli.dir, "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n")
    sweep = cli.dir / "sweep.yaml"
    sweep.write_text(json.dumps({"cases": ["doomed"], "models": ["m"], "command": [str(job)]}))

    result = cli.run(sweep, "--no-progress", "--scheduler", scheduler)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "doomed \N{MULTIPLICATION SIGN} m: lost with its Dask worker; left for --resume" in (
        result.stdout
    )
    (row,) = cli.summary()["jobs"]
    assert (row["status"], row["attempts"]) == ("skipped", 2)
    assert cli.records() == []


def test_a_second_interrupt_kills_the_jobs_on_the_workers(
    batch_cli: BatchCli, scheduler: str, client: Client
) -> None:
    cli = batch_cli
    sweep = held_sweep(cli, ["c1", "c2"])
    driver = cli.start(sweep, "--no-progress", "--scheduler", scheduler)
    pids = [read_pid(cli.dir / f"pid-{case}", 30) for case in ("c1", "c2")]
    assert {psutil.Process(pid).ppid() for pid in pids} <= worker_pids(client)

    driver.signal(signal.SIGINT)
    assert wait_until(lambda: "interrupted: starting no new jobs" in driver.stdout)
    driver.signal(signal.SIGINT)

    assert driver.wait(30) == 130
    assert wait_until(lambda: all(is_gone(pid) for pid in pids), timeout=10)
    assert cli.statuses() == {"c1": "skipped", "c2": "skipped"}
    assert cli.records() == []
    assert not (cli.only_batch_dir() / "batch-logs/dask-claims").exists()


def test_a_driver_killed_outright_leaves_no_job_running_on_the_workers(
    batch_cli: BatchCli, scheduler: str
) -> None:
    cli = batch_cli
    sweep = held_sweep(cli, ["c1", "c2"])
    driver = cli.start(sweep, "--no-progress", "--scheduler", scheduler)
    pids = [read_pid(cli.dir / f"pid-{case}", 30) for case in ("c1", "c2")]

    driver.signal(signal.SIGKILL)

    # The scheduler drops a dead client's tasks; each worker then stops their jobs.
    assert wait_until(lambda: all(is_gone(pid) for pid in pids), timeout=15)
    assert cli.records() == []


@contextlib.contextmanager
def cluster_processes(directory: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A scheduler and a worker as processes of their own, as on a real cluster: the test
    may kill the scheduler outright. Yields the scheduler process and its address."""
    file = directory / "scheduler.json"
    loopback = ["--host", "127.0.0.1", "--no-dashboard", "--dashboard-address", "127.0.0.1:0"]
    commands = [
        ["dask_scheduler", "--port", "0", "--scheduler-file", str(file)],
        ["dask_worker", "--nthreads", "2", "--scheduler-file", str(file)],
    ]
    processes = []
    try:
        for command in commands:
            argv = [sys.executable, "-m", f"distributed.cli.{command[0]}", *command[1:], *loopback]
            processes.append(
                subprocess.Popen(
                    argv,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
            assert wait_until(file.exists, timeout=30)
        with Client(scheduler_file=str(file), set_as_default=False) as client:
            client.wait_for_workers(1, timeout=30)
            address = client.scheduler.address
        yield processes[0], address
    finally:
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_a_lost_scheduler_stops_the_sweep_and_resume_finishes_it(batch_cli: BatchCli) -> None:
    cli = batch_cli
    sweep = held_sweep(cli, ["c1", "c2"], max_concurrent=1)
    with cluster_processes(cli.dir) as (scheduler, address):
        driver = cli.start(sweep, "--no-progress", "--scheduler", address)
        job_pid = read_pid(cli.dir / "pid-c1", 30)

        scheduler.kill()

        assert driver.wait(60) == 1
        # Cut off from the scheduler, the worker stops the job itself.
        assert wait_until(lambda: is_gone(job_pid), timeout=15)
    assert "lost the connection to the Dask scheduler" in driver.stdout
    assert cli.summary()["state"] == "interrupted"
    assert cli.statuses() == {"c1": "skipped", "c2": "skipped"}
    assert cli.records() == []

    (cli.dir / "gate").unlink()
    resumed = cli.run(sweep, "--no-progress", "--resume")

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert cli.statuses() == {"c1": "passed", "c2": "passed"}


# --- choosing the executor ---------------------------------------------------------------------


def test_executor_dask_in_the_sweep_without_a_scheduler_runs_on_a_cluster_of_its_own(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = held_sweep(cli, ["c1", "c2"], executor="dask")
    driver = cli.start(sweep, "--no-progress")

    worker = psutil.Process(read_pid(cli.dir / "pid-c1", 30)).ppid()
    (cli.dir / "gate").unlink()

    assert driver.wait(60) == 0, driver.stderr
    assert worker != driver.pid
    assert wait_until(lambda: is_gone(worker), timeout=15)  # the cluster ends with the sweep
    assert cli.statuses() == {"c1": "passed", "c2": "passed"}


#: What Dask's nanny puts in its process's and its worker's environment by default
#: (``distributed.nanny.pre-spawn-environ``), for numpy in the worker itself.
DASK_THREAD_LIMITS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MALLOC_TRIM_THRESHOLD_",
)

ENV_WRITER = """
import json, os, sys
names = sys.argv[2:]
with open(os.path.join(sys.argv[1], "env.json"), "w") as out:
    json.dump({name: os.environ.get(name) for name in names}, out)
"""


def test_a_job_on_the_clusters_own_worker_gets_no_thread_limit_the_user_never_set(
    batch_cli: BatchCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under the local executor a job sees the user's environment; on the cluster the driver
    # starts it saw OMP_NUM_THREADS=1 (and MKL, OpenBLAS, malloc trimming) from Dask's
    # nanny: a numpy or torch job ran on one thread, and nothing said why.
    for name in DASK_THREAD_LIMITS:
        monkeypatch.delenv(name, raising=False)
    cli = batch_cli
    (cli.dir / "env_writer.py").write_text(ENV_WRITER)
    command = [sys.executable, str(cli.dir / "env_writer.py"), "{run_dir}", *DASK_THREAD_LIMITS]
    sweep = cli.dir / "sweep.yaml"
    sweep.write_text(
        json.dumps(
            {"output": "runs", "cases": ["c1", "c2"], "models": ["m"], "command": command}
            | {"executor": "dask"}
        )
    )

    done = cli.run(sweep, "--no-progress", timeout=120)

    assert done.returncode == 0, done.stderr
    seen = [
        json.loads(path.read_text()) for path in sorted((cli.dir / "runs").glob("*/m/*/env.json"))
    ]
    assert seen == [dict.fromkeys(DASK_THREAD_LIMITS)] * 2


def test_executor_dask_without_distributed_is_one_line_with_the_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweep.yaml").write_text('cases: [c1]\nmodels: [m]\ncommand: ["true"]\n')
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if it were not installed

    result = CliRunner().invoke(main, ["sweep.yaml", "--executor", "dask", "--no-progress"])

    assert result.exit_code == 2
    assert result.output.splitlines() == [f"error: {DASK_HINT}"]
    assert not (tmp_path / "runs").exists()


def test_a_scheduler_with_the_local_executor_is_a_usage_error(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text('cases: [c1]\nmodels: [m]\ncommand: ["true"]\n')

    result = CliRunner().invoke(
        main, [str(sweep), "--executor", "local", "--scheduler", "tcp://127.0.0.1:1"]
    )

    assert result.exit_code == 2
    assert "--scheduler needs --executor dask" in result.output


@pytest.mark.parametrize(
    ("in_sweep", "kind", "scheduler", "chosen"),
    [
        (ExecutorSpec(), None, None, ExecutorSpec()),
        (ExecutorSpec(), "dask", None, ExecutorSpec("dask")),
        (ExecutorSpec(), None, "tcp://h:1", ExecutorSpec("dask", "tcp://h:1")),
        (ExecutorSpec("dask", "tcp://h:1"), "dask", None, ExecutorSpec("dask", "tcp://h:1")),
        (ExecutorSpec("dask", "tcp://h:1"), None, "tcp://g:2", ExecutorSpec("dask", "tcp://g:2")),
        (ExecutorSpec("dask", "tcp://h:1"), "local", None, ExecutorSpec()),
    ],
)
def test_the_command_line_chooses_the_executor_over_the_sweep(
    in_sweep: ExecutorSpec, kind: str | None, scheduler: str | None, chosen: ExecutorSpec
) -> None:
    assert choose_executor(in_sweep, kind, scheduler) == chosen


# --- at most once ------------------------------------------------------------------------------


def test_a_task_dask_runs_a_second_time_does_not_run_the_job_again(
    tmp_path: Path, scheduler: str, client: Client
) -> None:
    batch_dir = tmp_path / "batch"
    claims = batch_dir / "batch-logs/dask-claims/t1"
    claims.mkdir(parents=True)
    count = tmp_path / "count.txt"
    call = WorkerCall(
        job=Job("c1", "m"),
        sweep=make_sweep(tmp_path, fake_agent_command(f"count={count}")),
        batch_dir=str(batch_dir),
        batch_id="batch",
        attempt=1,
        secrets=frozenset(),
        token="t1",
        claim=str(claims / "1"),
    )

    first = client.submit(run_on_worker, call, pure=False).result(timeout=30)
    second = client.submit(run_on_worker, call, pure=False).result(timeout=30)

    assert isinstance(first, AttemptResult)
    assert first.meta is not None and first.meta.outcome == "passed"
    assert second == Refused("duplicate")
    assert count.read_text().splitlines() == ["c1\tm\t1"]


@pytest.mark.parametrize("lost", ["worker died", "Dask ran it again"])
def test_a_job_recorded_before_its_worker_died_keeps_its_record_and_is_not_rerun(
    tmp_path: Path, lost: str
) -> None:
    # The worker wrote run-meta.json, then died before the driver fetched the result: the
    # record on the shared filesystem says the job finished; rerunning it would double-run.
    # Dask reports that as the worker's death, or (when it ran the task again elsewhere)
    # as a run that found the attempt's claim taken.
    from distributed import KilledWorker
    from helpers.fake_jobs import make_sweep

    from batch.attempt.runner import BatchContext
    from batch.executors.dask import DaskExecutor
    from run_support.results import RunMeta, write_run_meta

    outcome = KilledWorker("task", "worker", 0) if lost == "worker died" else Refused("duplicate")
    job = Job(case="c2", model="m")
    ctx = BatchContext(batch_dir=tmp_path, batch_id=tmp_path.name, registry=None)  # type: ignore[arg-type]
    executor = DaskExecutor(make_sweep(tmp_path, ["true"], cases=["c2"], models=["m"]), ctx)
    executor._client = type("Client", (), {"status": "running"})()
    run_dir = tmp_path / "m" / "c2-m-20261130T000000000000Z-a1"
    run_dir.mkdir(parents=True)
    write_run_meta(run_dir, RunMeta(test_case="c2", model="m", outcome="passed"))
    claim = tmp_path / "claim-1"
    claim.write_text("m/c2-m-20261130T000000000000Z-a1")

    result = executor._result(job, outcome, claim)
    assert result.meta is not None and result.meta.outcome == "passed"
    assert result.run_dir == "m/c2-m-20261130T000000000000Z-a1"

    claim.write_text("m/no-such-run")  # died before recording: no outcome, rerun
    assert executor._result(job, outcome, claim).meta is None
