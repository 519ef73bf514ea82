"""batch status reads a batch dir without the sweep file."""

# The lines users see join case and model with U+00D7.
# ruff: noqa: RUF001

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

from helpers.builders import make_jobs, write_record, write_summary_dir

from batch.commands.status import batch_status, status_main

if TYPE_CHECKING:
    from conftest import BatchCli


def test_status_counts_errors_by_the_batchs_own_non_model_categories(tmp_path: Path) -> None:
    # A sweep that treats only api_or_credit as non-model: its task_data failure is the
    # model's, and status must agree with the summary the driver wrote.
    batch_dir = tmp_path / "batch-x"
    write_record(batch_dir, "c1", "m", "error", "task_data")
    write_record(batch_dir, "c2", "m", "error", "api_or_credit")
    write_summary_dir(
        batch_dir, make_jobs(["c1", "c2"], ["m"]), non_model_categories={"api_or_credit"}
    )
    assert batch_status(batch_dir)["recorded"] == {"passed": 0, "failed": 1, "error": 1}


def test_status_lists_every_job_that_did_not_pass_with_its_reason(tmp_path: Path) -> None:
    batch_dir = tmp_path / "batch-x"
    write_record(batch_dir, "c1", "m")
    write_record(batch_dir, "c2", "m", "failed", reason="exit code 1: wrong answer")
    write_record(batch_dir, "c3", "m", "error", stop_reason="timeout", exit_code=-15)
    write_summary_dir(batch_dir, make_jobs(["c1", "c2", "c3"], ["m"]))
    rows = batch_status(batch_dir)["not_passed"]
    assert [(row["case"], row["status"], row["reason"]) for row in rows] == [
        ("c2", "failed", "exit code 1: wrong answer"),
        ("c3", "error", "timeout"),  # an older record: told from its keys
    ]
    out = io.StringIO()
    status_main(batch_dir, out=out, err=io.StringIO())
    assert (
        "not passed (2), and why:\n"
        "  c2 × m: failed (model_failure): exit code 1: wrong answer\n"
        "  c3 × m: error (infra_failure): timeout\n"
    ) in out.getvalue()


def test_status_of_a_sweep_file_shows_its_newest_batch_dir(batch_cli: BatchCli) -> None:
    # docs/scaling.md watches a sweep with `batch status SWEEP`: once "not a directory".
    cli = batch_cli
    sweep = cli.write_sweep(["c1", "c2"])
    assert cli.run(sweep, "--no-progress").returncode == 0
    first = cli.only_batch_dir()
    assert cli.run(sweep, "--no-progress").returncode == 0
    (newest,) = [d for d in cli.batch_dirs() if d != first]

    shown = cli.run("status", sweep)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0] == f"batch dir: {newest}"
    assert "summary:   complete — passed 2" in shown.stdout


def test_status_of_a_sweep_that_never_ran_says_so(batch_cli: BatchCli) -> None:
    sweep = batch_cli.write_sweep(["c1"])
    shown = batch_cli.run("status", sweep)
    assert shown.returncode == 2
    assert (
        shown.stderr == f"error: {sweep}: no batch dir of this sweep under "
        f"{batch_cli.dir / 'runs'} yet\n"
    )
