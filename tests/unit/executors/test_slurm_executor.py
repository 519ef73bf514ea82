"""``executor: {kind: slurm}``: the sweep key, the snapshot, the choice, and the pure parts of
``batch.executors.slurm`` (sweeps on the real Slurm are in ``tests/e2e/test_slurm.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers.builders import write_record
from helpers.fake_jobs import Batch, make_sweep

from batch.cli import main
from batch.errors import ExecutorUnavailable, SweepError
from batch.executors.dask import DaskExecutor, task_key
from batch.executors.select import check_executor
from batch.executors.slurm import job_name, worker_jobs
from batch.plan.jobs import Job
from batch.sweep.features.executor import ExecutorSpec, SlurmSpec
from batch.sweep.load import load_sweep
from batch.sweep.snapshot import sweep_snapshot


def load_with(tmp_path: Path, executor: Any) -> Any:
    path = tmp_path / "sweep.yaml"
    sweep = {"cases": ["c1"], "models": ["m"], "command": ["true"], "executor": executor}
    path.write_text(json.dumps(sweep, indent=1))
    return load_sweep(path)


def test_a_slurm_executor_reads_every_setting(tmp_path: Path) -> None:
    executor = {
        "kind": "slurm",
        "partition": "cpu",
        "account": "proj",
        "walltime": "4h",
        "cores": 8,
        "memory": "16GiB",
        "job_directives": ["--qos=normal"],
        "prologue": ["source /shared/venv/bin/activate"],
        "python": "/shared/venv/bin/python",
        "host": "10.1.0.4",
        "adaptive": {"maximum": 6},
    }

    spec = load_with(tmp_path, executor).executor

    assert spec == ExecutorSpec(
        kind="slurm",
        slurm=SlurmSpec(
            queue="cpu",
            account="proj",
            walltime="04:00:00",
            cores=8,
            memory=16 * 2**30,
            job_directives=("--qos=normal",),
            prologue=("source /shared/venv/bin/activate",),
            python="/shared/venv/bin/python",
            host="10.1.0.4",
            adaptive=(0, 6),
        ),
    )


def test_slurm_walltime_is_kept_as_slurm_writes_it(tmp_path: Path) -> None:
    for written in ("1-12:00:00", "90:00", "00:10:00"):
        spec = load_with(tmp_path, {"kind": "slurm", "walltime": written}).executor
        assert spec.slurm.walltime == written
    assert load_with(tmp_path, {"kind": "slurm", "walltime": 5400}).executor.slurm.walltime == (
        "01:30:00"
    )


@pytest.mark.parametrize(
    ("executor", "message"),
    [
        ({"kind": "dask", "cores": 2}, "executor.cores: needs kind: slurm"),
        ({"kind": "slurm", "queue": "a", "partition": "b"}, "give queue or partition, not both"),
        ({"kind": "slurm", "workers": 2, "adaptive": {"maximum": 3}}, "workers or adaptive"),
        (
            {"kind": "slurm", "adaptive": {"minimum": 4, "maximum": 3}},
            "executor.adaptive.minimum: more than maximum (3)",
        ),
        ({"kind": "slurm", "walltime": "soon"}, "executor.walltime:"),
        ({"kind": "slurm", "memory": "lots"}, "executor.memory:"),
        ({"kind": "slurm", "scheduler": "tcp://x:1"}, "a scheduler needs kind: dask"),
        ({"kind": "local", "scheduler_file": "s.json"}, "needs kind: dask or slurm"),
        (
            {"kind": "slurm", "scheduler_file": "s.json", "cores": 2},
            "executor.cores: not used with scheduler_file",
        ),
        ({"kind": "slurm", "job_directives": "--qos=x"}, "executor.job_directives: expected"),
    ],
)
def test_bad_slurm_settings_are_located_errors(
    tmp_path: Path, executor: dict[str, Any], message: str
) -> None:
    with pytest.raises(SweepError, match=r"sweep\.yaml:\d+:\d+: ") as error:
        load_with(tmp_path, executor)
    assert message in str(error.value)


def test_the_snapshot_of_a_slurm_sweep_loads_back_to_the_same_executor(tmp_path: Path) -> None:
    sweep = load_with(
        tmp_path,
        {"kind": "slurm", "partition": "cpu", "job_directives": ["--gres=gpu:1"], "workers": 3},
    )
    snapshot = tmp_path / "snapshot.yaml"
    snapshot.write_text(sweep_snapshot(sweep))

    assert load_sweep(snapshot).executor == sweep.executor
    assert load_with(tmp_path, {"kind": "dask", "scheduler_file": "s.json"}).executor == (
        ExecutorSpec(kind="dask", scheduler_file=str(tmp_path / "s.json"))
    )


def test_worker_job_names_tie_jobs_to_one_batch_dir_and_are_safe_for_sbatch() -> None:
    name = job_name("/shared/runs/batch-20261130T031500Z")
    assert name.startswith("batch-batch-20261130T031500Z-")
    assert job_name("/other/runs/batch-20261130T031500Z") != name
    assert job_name("/shared/runs/batch-20261130T031500Z/") == name
    odd = job_name("/tmp/my runs;$(rm -rf ~)")
    assert all(char.isalnum() or char in "._-" for char in odd), odd


def test_worker_jobs_follow_the_running_attempts_up_to_the_limit() -> None:
    assert [worker_jobs(running, 2, 3) for running in range(8)] == [0, 1, 1, 2, 2, 3, 3, 3]


def test_dask_task_keys_name_the_case_and_model_and_are_unique() -> None:
    job = Job("c01", "openai/gpt-4o")
    first, second = task_key(job, 1, "ab12", 1), task_key(job, 1, "ab12", 2)
    assert first.startswith("c01 x openai/gpt-4o #1")
    assert first != second


def test_a_record_of_a_job_killed_with_its_worker_is_not_its_outcome(tmp_path: Path) -> None:
    batch = Batch(tmp_path)
    executor = DaskExecutor(make_sweep(tmp_path, ["true"]), batch.ctx, scheduler="tcp://x:1")
    job = Job("c01", "mock/oracle")
    claims = {}
    for exit_code, stop in ((-15, "signal"), (-9, "signal"), (-11, "signal"), (1, "exit")):
        run_dir = write_record(
            batch.dir, outcome="error", at=exit_code, stop_reason=stop, exit_code=exit_code
        )
        claims[exit_code] = claim = tmp_path / f"claim{exit_code}"
        claim.write_text(run_dir.relative_to(batch.dir).as_posix())

    recorded = {code: executor._recorded(job, claim) for code, claim in claims.items()}

    assert recorded[-15] is None  # rerun: SIGTERM/SIGKILL came with the worker's end
    assert recorded[-9] is None
    assert recorded[-11] is not None  # the job's own crash is its outcome
    assert recorded[1] is not None


def test_executor_slurm_without_sbatch_is_a_one_line_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    with pytest.raises(ExecutorUnavailable, match="sbatch, which is not on PATH"):
        check_executor(ExecutorSpec(kind="slurm", slurm=SlurmSpec()))
    # A cluster someone else runs needs no sbatch here.
    check_executor(ExecutorSpec(kind="slurm", scheduler_file="/shared/s.json"))


def test_scheduler_with_executor_slurm_is_a_usage_error(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(json.dumps({"cases": ["c1"], "models": ["m"], "command": ["true"]}))

    result = CliRunner().invoke(
        main, ["run", str(sweep), "--executor", "slurm", "--scheduler", "tcp://x:1"]
    )

    assert result.exit_code == 2
    assert "--scheduler needs --executor dask" in result.output
