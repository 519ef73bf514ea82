"""``batch stats --source records`` reads the ledger itself, not the summary."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.builders import make_summary, write_record

from batch.cli import main
from batch.commands.stats import stats_main
from batch.stats.source import load_summary, read_invocations, records_summary
from run_support import ledger_scan


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


# --- the readers themselves -------------------------------------------------------------------


def test_records_read_as_summary_rows_as_the_driver_writes_them(tmp_path: Path) -> None:
    write_record(tmp_path, "c1", "m", "passed", duration=2.0, usage={"cost_usd": 0.5})
    write_record(
        tmp_path, "c2", "m", "error", "api_or_credit", duration=1.0, attempt=2,
        reason="exit code 2; output.log matches '429'", usage={"cost_usd": 0.1},
        usage_total={"cost_usd": 0.3}, dir_name="c2-a2",
    )  # fmt: skip
    write_record(tmp_path, "c3", "m", "failed", reason="", dir_name="c3-a1")
    write_record(tmp_path, "c4", "m", "passed", reason="stale", dir_name="c4-a1")
    summary = records_summary(tmp_path)
    assert {k: summary[k] for k in ("schema", "batch_id", "state")} == {
        "schema": 1, "batch_id": tmp_path.name, "state": "records"
    }  # fmt: skip
    rows = summary["jobs"]
    assert rows[0] == {
        "case": "c1", "model": "m", "status": "passed", "duration_seconds": 2.0,
        "resumed": False, "failure_category": None, "attempts": 1,
        "run_dir": rows[0]["run_dir"], "usage": {"cost_usd": 0.5},
    }  # fmt: skip
    assert rows[0]["run_dir"].startswith("m/")
    assert rows[1] == {
        "case": "c2", "model": "m", "status": "error", "duration_seconds": 1.0,
        "resumed": False, "failure_category": "api_or_credit", "attempts": 2,
        "run_dir": "m/c2-a2", "usage": {"cost_usd": 0.3},
        "reason": "exit code 2; output.log matches '429'",
    }  # fmt: skip
    assert "reason" not in rows[2] and "usage" not in rows[2]  # an empty reason says nothing
    assert "reason" not in rows[3]  # a pass has no reason
    assert [row["case"] for row in rows] == ["c1", "c2", "c3", "c4"]


def test_records_use_the_batchs_own_non_model_categories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Records count as aged at once (past the cache's racy window), so they are cached:
    # reading records for stats must still write nothing in the batch dir.
    monkeypatch.setattr(ledger_scan, "RACY_WINDOW_NS", -(10**15))
    write_record(tmp_path, "c1", "m", "failed", "judge_rejected")
    assert records_summary(tmp_path)["jobs"][0]["status"] == "failed"
    (tmp_path / "batch-summary.json").write_text(
        json.dumps({**make_summary([]), "non_model_categories": ["judge_rejected"]})
    )
    assert records_summary(tmp_path)["jobs"][0]["status"] == "error"
    # Reading records writes nothing in the batch dir (its cache is the reader's own).
    assert sorted(p.name for p in tmp_path.iterdir()) == ["batch-summary.json", "m"]


def test_a_missing_or_unreadable_summary_is_one_line_naming_it(tmp_path: Path) -> None:
    write_record(tmp_path, "c1", "m", "passed")
    path = tmp_path / "batch-summary.json"
    with pytest.raises(ValueError) as caught:
        load_summary(tmp_path)
    assert str(caught.value) == f"{path}: No such file or directory"
    path.write_text("{not json")
    with pytest.raises(ValueError) as caught:
        load_summary(tmp_path)
    assert str(caught.value).startswith(f"{path}: ") and "\n" not in str(caught.value)
    path.write_text(json.dumps(make_summary([])))
    assert load_summary(tmp_path)["state"] == "complete"


def test_a_dir_that_is_no_batch_dir_or_none_at_all_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for read in (load_summary, records_summary):
        with pytest.raises(ValueError) as caught:
            read(empty)
        assert str(caught.value).startswith(f"{empty}: not a batch dir")
    with pytest.raises(ValueError) as caught:
        records_summary(tmp_path / "gone")
    assert str(caught.value) == f"{tmp_path / 'gone'}: no such batch dir"


def test_invocations_come_from_the_events_log(tmp_path: Path) -> None:
    assert read_invocations(tmp_path) == []  # no events log: none known
    logs = tmp_path / "batch-logs"
    logs.mkdir()
    (logs / "events.jsonl").write_text(
        '{"t": "2026-12-01T07:00:00Z", "event": "batch_start"}\n'
        '{"t": "2026-12-01T07:01:00Z", "event": "batch_end", "state": "complete"}\n'
    )
    (run,) = read_invocations(tmp_path)
    assert (run.seconds, run.state) == (60.0, "complete")
