"""``batch stats --source records`` reads the ledger itself, not the summary."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.builders import write_record

from batch.cli import main
from batch.commands.stats import stats_main


def ledger(batch_dir: Path) -> None:
    write_record(batch_dir, "c1", "openai/gpt-4o", "passed", duration=2.0)
    write_record(batch_dir, "c2", "openai/gpt-4o", "failed", "model_failure", duration=4.0)
    write_record(batch_dir, "c3", "openai/gpt-4o", "error", "api_or_credit", duration=1.0)
    # An older attempt of c3 that passed: the newest record is the one that counts.
    write_record(batch_dir, "c3", "openai/gpt-4o", "passed", at=-60, dir_name="c3-old-a1")


def test_stats_from_records_count_the_newest_record_of_each_job(tmp_path: Path) -> None:
    ledger(tmp_path)
    out = io.StringIO()
    assert stats_main([tmp_path], fmt="json", source="records", out=out, err=io.StringIO()) == 0
    (row,) = json.loads(out.getvalue())["models"]
    assert (row["model"], row["jobs"], row["passed"], row["failed"], row["error"]) == (
        "openai/gpt-4o",
        3,
        1,
        1,
        1,
    )
    assert row["adjusted_pass_rate"] == 0.5


def test_stats_from_records_need_no_summary_but_the_default_does(tmp_path: Path) -> None:
    ledger(tmp_path)
    runner = CliRunner()
    from_records = runner.invoke(main, ["stats", str(tmp_path), "--source", "records"])
    assert from_records.exit_code == 0, from_records.output
    assert "openai/gpt-4o" in from_records.output
    from_summary = runner.invoke(main, ["stats", str(tmp_path)])
    assert from_summary.exit_code == 2
    assert "batch-summary.json" in from_summary.output


@pytest.mark.parametrize(
    ("args", "prefix"),
    [
        (["stats", "--source", "records"], ""),
        (["stats"], ""),
        (["report"], ""),
        (["status"], "error: "),
    ],
)
def test_a_file_given_as_the_batch_dir_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], prefix: str
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a batch dir\n")

    result = CliRunner().invoke(main, [*args, str(notes)])

    assert result.exit_code == 2
    assert result.stderr == f"{prefix}{notes}: not a directory\n"
    assert result.stdout == ""


def test_stats_from_records_carry_spend_and_reasons(tmp_path: Path) -> None:
    """Records as the runner writes them once jobs report usage (``usage_total``: the job's
    total over its attempts) and non-passing finishes say why."""
    write_record(
        tmp_path, "c1", "m", "passed", usage={"cost_usd": 0.5}, usage_total={"cost_usd": 1.5}
    )
    write_record(tmp_path, "c2", "m", "error", "infra_failure", reason="timeout after 1m")
    out = io.StringIO()
    assert (
        stats_main([tmp_path], fmt="json", by="case", source="records", out=out, err=io.StringIO())
        == 0
    )
    document = json.loads(out.getvalue())
    assert document["overall"]["cost_usd"] == 1.5
    assert document["cases"][1]["not_passed"][0]["reason"] == "timeout after 1m"
