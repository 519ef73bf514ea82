"""One job cannot stop the sweep: a job that damages its own run dir is that job's ``error``.

A job that removes its run dir, replaces it by a file, makes it read-only or puts a
directory where its record goes used to stop the whole sweep ("cannot write run-meta.json;
starting no more jobs"), and again on every resume. Now the driver records the attempt as
an ``infra_failure`` in a fresh run dir beside the damaged one and goes on; only a batch dir
that refuses that write too (full, read-only, gone) stops the sweep
(``tests/e2e/test_disk_full.py``, and the last test here).
"""

from __future__ import annotations

import errno
import io
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from helpers.failing_os import FailingOS
from helpers.fake_jobs import Batch

from batch.commands.run import run_main
from batch.errors import ExitStatus
from batch.plan.planner import RunOptions
from batch.sweep.features.steps import Step
from run_support import atomic

if TYPE_CHECKING:
    from conftest import BatchCli

ROOT = os.geteuid() == 0
#: Root writes through mode bits; the immutable flag is what stops it.
READ_ONLY = 'chmod 0500 "$BATCH_RUN_DIR"' + (' && chattr +i "$BATCH_RUN_DIR"' if ROOT else "")

DAMAGE = {
    "gone": ('rm -rf "$BATCH_RUN_DIR"', "the job's run dir was removed"),
    "file": (
        'rm -rf "$BATCH_RUN_DIR" && echo job > "$BATCH_RUN_DIR"',
        "the job's run dir was replaced by a file",
    ),
    "readonly": (READ_ONLY, "the job's run dir was made read-only (mode 500)"),
    "record": (
        'mkdir "$BATCH_RUN_DIR/run-meta.json"',
        "something that is not a file was put at the job's run-meta.json",
    ),
}


def write_sweep(cli: BatchCli) -> Path:
    cases = {case: script for case, (script, _) in DAMAGE.items()}
    # Its own result.json unreadable (a directory): an invalid result, as it always was.
    cases["result"] = 'mkdir "$BATCH_RUN_DIR/result.json"'
    cases["ok"] = "true"
    sweep = {
        "output": "runs",
        "cases": [{"id": case, "params": {"do": script}} for case, script in cases.items()],
        "models": ["m"],
        "command": ["/bin/sh", "-c", f'echo "$BATCH_CASE" >> {cli.count_file}; {{params.do}}'],
        "max_concurrent": 1,
        # Five damaging jobs in a row would open the breaker (docs/policies.md): this test
        # is about each one being its own error, so every job must run.
        "breaker": "off",
    }
    path = cli.dir / "sweep.yaml"
    path.write_text(json.dumps(sweep, indent=1))
    return path


def read_records(batch_dir: Path) -> list[dict[str, object]]:
    """Every record file of the batch dir (a job may have put a directory at one)."""
    paths = sorted(batch_dir.glob("*/*/run-meta.json"))
    return [json.loads(path.read_bytes()) for path in paths if path.is_file()]


@pytest.fixture
def cli(batch_cli: BatchCli) -> Iterator[BatchCli]:
    yield batch_cli
    if ROOT and shutil.which("chattr"):  # an immutable run dir would outlive tmp_path
        for path in (batch_cli.dir / "runs").glob("*/*/*"):
            subprocess.run(["chattr", "-i", str(path)], capture_output=True, check=False)


def test_a_job_that_damages_its_run_dir_is_its_own_error_and_the_sweep_goes_on(
    cli: BatchCli,
) -> None:
    if ROOT:
        assert shutil.which("chattr"), "as root, a read-only run dir needs chattr"
    sweep = write_sweep(cli)

    first = cli.run(sweep, "--no-progress")

    output = first.stdout + first.stderr
    assert first.returncode == ExitStatus.ERRORS, output
    assert "starting no more jobs" not in output
    assert cli.runs_counted() == sorted([*DAMAGE, "result", "ok"])
    batch_dir = cli.only_batch_dir()
    summary = cli.summary(batch_dir)
    assert summary["state"] == "complete"
    rows = {row["case"]: row for row in summary["jobs"]}
    assert {case: (row["status"], row["failure_category"]) for case, row in rows.items()} == {
        **{case: ("error", "infra_failure") for case in [*DAMAGE, "result"]},
        "ok": ("passed", None),
    }
    records = {record["test_case"]: record for record in read_records(batch_dir)}
    for case, (_, damage) in DAMAGE.items():
        record = records[case]
        detail = record["result"]["record_error"]
        assert detail.startswith(damage), detail
        assert record["reason"].startswith(damage) and rows[case]["reason"] == record["reason"]
        assert "the job itself ended with: " in detail
        assert record["exit_code"] == 0
        assert record["run_dir"] == rows[case]["run_dir"]  # the fresh dir holds the record
        assert (batch_dir / record["run_dir"] / "run-meta.json").is_file()
    assert records["result"]["result"]["classification_error"].startswith("invalid result.json")

    # The same jobs do it again on every retry: still each one's error, never a stop.
    retried = cli.run(sweep, "--retry-failed", "--no-progress")
    output = retried.stdout + retried.stderr
    assert retried.returncode == ExitStatus.ERRORS, output
    assert "starting no more jobs" not in output
    assert cli.runs_counted() == sorted([*DAMAGE, "result"])
    again = cli.summary(batch_dir)
    assert again["state"] == "complete"
    assert {row["case"]: row["attempts"] for row in again["jobs"]} == {
        **dict.fromkeys([*DAMAGE, "result"], 2),
        "ok": 1,
    }

    resumed = cli.run(sweep, "--resume", "--no-progress")
    assert resumed.returncode == ExitStatus.ERRORS
    assert cli.runs_counted() == []
    assert "6 carried over, 0 to run" in resumed.stdout
    status = json.loads(cli.run("status", batch_dir, "--format", "json").stdout)
    assert status["recorded"] == {"passed": 1, "failed": 0, "error": 5}
    # What the jobs left in their own run dirs is shown for what it is, never counted.
    assert [item["path"].split("/")[1][:7] for item in status["unreadable"]] == ["record-"] * 2
    assert all(item["reason"] == "not a regular file" for item in status["unreadable"])


def test_a_damaged_run_dir_in_a_batch_dir_that_refuses_writes_still_stops_the_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The job removed its run dir, but the disk is full too: recording the job's error
    # beside it fails as well, so it is the batch dir's failure, and nothing more starts.
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        json.dumps(
            {
                "cases": ["c1", "c2", "c3"],
                "models": ["m"],
                "command": ["/bin/sh", "-c", 'rm -rf "$BATCH_RUN_DIR"'],
                "max_concurrent": 1,
                "summary_interval": "0s",
            }
        )
    )
    failing = FailingOS("write", errno.ENOSPC, lambda path: "run-meta.json" in path)
    monkeypatch.setattr(atomic, "os", failing)
    out = io.StringIO()

    status = run_main(sweep, RunOptions(progress=False), out=out, err=out)

    lines = [line for line in out.getvalue().splitlines() if "No space left" in line]
    assert status == ExitStatus.ERRORS
    assert len(lines) == 1 and "starting no more jobs" in lines[0], out.getvalue()
    assert failing.failures == 1  # the error record beside the removed dir; no other job
    (batch_dir,) = (tmp_path / "runs").iterdir()
    assert list(batch_dir.glob("*/*/run-meta.json")) == []
    assert list(batch_dir.glob("m/*")) == []  # the fresh dir is not left behind
    rows = json.loads((batch_dir / "batch-summary.json").read_bytes())["jobs"]
    assert [row["status"] for row in rows] == ["skipped"] * 3


def test_a_step_that_removes_the_run_dir_is_the_jobs_error_not_the_next_steps_crash(
    tmp_path: Path,
) -> None:
    batch = Batch(tmp_path)
    remove = Step("eval", ("/bin/sh", "-c", 'rm -rf "$BATCH_RUN_DIR"'))
    judge = Step("judge", ("/bin/sh", "-c", 'touch "$BATCH_RUN_DIR/judged"'))

    result = batch.run_steps(remove, judge)

    record = batch.record(result)
    assert (record["outcome"], record["failure_category"]) == ("error", "infra_failure")
    assert record["result"]["record_error"].startswith("the job's run dir was removed")
    assert "steps" not in record  # nothing of the lost run dir is offered for reuse
    assert not (batch.dir / result.run_dir / "judged").exists()
