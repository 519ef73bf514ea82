"""batch status reads a batch dir without the sweep file."""

from __future__ import annotations

from pathlib import Path

from helpers.builders import make_jobs, write_record, write_summary_dir

from batch.commands.status import batch_status


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
