"""``batch plan``, ``batch status``, ``--dry-run`` and usage errors through the CLI: every
decision with its reason, nothing changed on disk, exit status 2 for every bad sweep.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner
from helpers.builders import start_run, write_record
from helpers.paths import TEST_DATA

from batch.cli import main

if TYPE_CHECKING:
    from conftest import BatchCli

BAD_SWEEPS = TEST_DATA / "bad_sweeps"
BATCH = "batch-20261130T031500Z"


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` with its size and mtime: what "nothing changed" compares."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if not p.name.startswith("driver-")
    }


def ledger(cli: BatchCli) -> Path:
    """A batch dir with one job of each kind the resume table knows."""
    batch_dir = cli.dir / "runs" / BATCH
    write_record(batch_dir, "passed", "m", "passed")
    write_record(batch_dir, "wrong", "m", "failed")
    write_record(batch_dir, "infra", "m", "error", "infra_failure")
    write_record(batch_dir, "quota", "m", "error", "api_or_credit")
    start_run(batch_dir, "killed", "m")
    write_record(batch_dir, "torn", "m", raw='{"test_case": "torn", "mod')
    cli.write_sweep(["passed", "wrong", "infra", "quota", "killed", "torn", "new"])
    return batch_dir


def decisions(document: dict) -> dict[str, tuple[str, str]]:
    return {job["case"]: (job["decision"], job["reason"]) for job in document["jobs"]}


def test_plan_shows_every_decision_and_reason_and_writes_nothing(batch_cli: BatchCli) -> None:
    cli = batch_cli
    batch_dir = ledger(cli)
    before = tree(cli.dir)

    # --resume without a value must not take --retry-failed as its value.
    result = cli.run("plan", "sweep.yaml", "--resume", "--retry-failed", "--format", "json")

    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["batch_dir"] == str(batch_dir)
    got = decisions(document)
    assert {case: decision for case, (decision, _) in got.items()} == {
        "passed": "carry",
        "wrong": "carry",
        "infra": "retry",
        "quota": "retry",
        "killed": "run",
        "torn": "run",
        "new": "run",
    }
    assert got["passed"][1].startswith("recorded passed in m/passed-m-")
    assert got["wrong"][1].startswith("recorded failed (model_failure) in m/wrong-m-")
    assert got["quota"][1] == "recorded error (api_or_credit) is retried"
    assert got["killed"][1] == got["new"][1] == got["torn"][1] == "no recorded outcome"
    assert document["counts"] == {"run": 3, "carry": 2, "retry": 2}
    assert [item["path"] for item in document["unreadable"]] == [
        str(next(batch_dir.glob("m/torn-*")).relative_to(batch_dir) / "run-meta.json")
    ]
    assert tree(cli.dir) == before


def test_retry_category_names_exactly_the_categories_rerun(batch_cli: BatchCli) -> None:
    cli = batch_cli
    ledger(cli)

    result = cli.run(
        "plan",
        "sweep.yaml",
        "--retry-category",
        "api_or_credit",
        "--retry-category",
        "model_failure",
        "--format",
        "json",
    )

    assert result.returncode == 0, result.stderr
    got = {case: decision for case, (decision, _) in decisions(json.loads(result.stdout)).items()}
    assert (got["quota"], got["wrong"]) == ("retry", "retry")
    assert (got["infra"], got["passed"]) == ("carry", "carry")


def test_plan_table_has_one_row_per_job_and_a_count_line(batch_cli: BatchCli) -> None:
    cli = batch_cli
    ledger(cli)
    before = tree(cli.dir)

    result = cli.run("plan", "sweep.yaml", "--resume")

    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("│ ")]
    first_cells = [row.split("│")[1:4] for row in rows]
    by_case = {cells[0].strip(): cells[2].strip() for cells in first_cells if cells[0].strip()}
    assert by_case == {
        "passed": "carry",
        "wrong": "carry",
        "infra": "carry",
        "quota": "carry",
        "killed": "run",
        "torn": "run",
        "new": "run",
    }
    assert "3 to run, 0 to retry, 4 carried" in result.stdout
    assert "unreadable record m/torn-" in result.stdout
    # Piped, every reason is whole on its row: no run dir cut short with an ellipsis.
    as_json = json.loads(cli.run("plan", "sweep.yaml", "--resume", "--format", "json").stdout)
    for _, reason in decisions(as_json).values():
        assert any(reason in row for row in rows)
    assert tree(cli.dir) == before


def test_plan_for_a_new_batch_dir_runs_everything_and_creates_nothing(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    cli.write_sweep(["c1", "c2"], models=["a", "b"])

    result = cli.run("plan", "sweep.yaml", "--format", "json")
    dry = cli.run("sweep.yaml", "--dry-run")

    assert result.returncode == 0 and dry.returncode == 0
    assert set(decisions(json.loads(result.stdout)).values()) == {("run", "new batch dir")}
    assert "4 to run, 0 to retry, 0 carried" in dry.stdout
    assert not (cli.dir / "runs").exists()
    assert cli.runs_counted() == []


def test_dry_run_of_a_resume_is_the_plan_and_runs_nothing(batch_cli: BatchCli) -> None:
    cli = batch_cli
    ledger(cli)
    before = tree(cli.dir)

    dry = cli.run("sweep.yaml", "--resume", "--retry-failed", "--dry-run")

    assert dry.returncode == 0, dry.stderr
    assert "3 to run, 2 to retry, 2 carried" in dry.stdout
    assert tree(cli.dir) == before
    assert cli.runs_counted() == []


def test_status_reports_summary_ledger_incomplete_and_unreadable(batch_cli: BatchCli) -> None:
    cli = batch_cli
    sweep = cli.write_sweep({"ok": [], "wrong": ["fail"], "crash": ["exit=2"]})
    assert cli.run(sweep, "--no-progress").returncode == 1
    batch_dir = cli.only_batch_dir()
    killed = start_run(batch_dir, "killed", "m")
    torn = write_record(batch_dir, "torn", "m", raw=b"")
    before = tree(cli.dir)

    table = cli.run("status", batch_dir)
    as_json = cli.run("status", batch_dir, "--format", "json")

    assert table.returncode == 0 and as_json.returncode == 0
    report = json.loads(as_json.stdout)
    assert report["state"] == "complete"
    assert report["totals"] == {
        "passed": 1,
        "failed": 1,
        "error": 1,
        "skipped": 0,
        "pending": 0,
        "running": 0,
    }
    assert report["recorded_pairs"] == 3
    assert report["recorded"] == {"passed": 1, "failed": 1, "error": 1}
    assert report["incomplete"] == [str(killed.relative_to(batch_dir))]
    assert [item["path"] for item in report["unreadable"]] == [
        str(torn.relative_to(batch_dir) / "run-meta.json")
    ]
    assert "summary:   complete — passed 1, failed 1, error 1" in table.stdout
    assert "incomplete run dirs (running, or killed before recording): 1" in table.stdout
    assert f"  {killed.relative_to(batch_dir)}" in table.stdout
    assert "unreadable records (their jobs run again on --resume): 1" in table.stdout
    assert tree(cli.dir) == before


def test_status_of_a_batch_dir_without_a_summary_says_so(batch_cli: BatchCli) -> None:
    cli = batch_cli
    batch_dir = cli.dir / "runs" / BATCH
    write_record(batch_dir, "c1", "m", "passed")

    result = cli.run("status", batch_dir)
    missing = cli.run("status", cli.dir / "nowhere")

    assert result.returncode == 0
    assert "summary:   no batch-summary.json" in result.stdout
    assert "1 (case, model) pairs recorded — passed 1, failed 0, error 0" in result.stdout
    assert missing.returncode == 2
    assert "no such batch dir" in missing.stderr


@pytest.mark.parametrize("name", sorted(p.name for p in BAD_SWEEPS.iterdir()))
@pytest.mark.parametrize("command", ["run", "plan"])
def test_every_bad_sweep_exits_2_with_one_located_line_and_writes_nothing(
    tmp_path: Path, name: str, command: str
) -> None:
    sweep = BAD_SWEEPS / name
    corpus_before = sorted(BAD_SWEEPS.iterdir())
    args = [command, str(sweep), "-o", str(tmp_path / "out")]

    result = CliRunner().invoke(main, args, env={"BATCH_LEDGER_TEST_UNSET_VARIABLE": None})

    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"{sweep}:")
    assert lines[0].split(":")[1].isdigit() and lines[0].split(":")[2].isdigit()
    assert result.stdout == ""
    assert not (tmp_path / "out").exists()
    assert sorted(BAD_SWEEPS.iterdir()) == corpus_before


def test_a_bad_sweep_exits_2_from_the_real_command(batch_cli: BatchCli) -> None:
    sweep = batch_cli.dir / "sweep.yaml"
    sweep.write_text("cases: [c1]\nmodels: [m]\ncommand: [x, '{cse}']\n")

    result = batch_cli.run(sweep)

    assert result.returncode == 2
    assert result.stderr.startswith(f"{sweep}:3:")
    assert not (batch_cli.dir / "runs").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nowhere.yaml"], "nowhere.yaml"),
        (["sweep.yaml", "--resume"], "no batch dir to resume"),
        (["sweep.yaml", "--retry-failed"], "no batch dir to resume"),
        (["sweep.yaml", "--cases", "zz*"], "no job matches --cases/--models"),
        (["sweep.yaml", "-j", "0"], "-j"),
        (["plan", "sweep.yaml", "--format", "yaml"], "--format"),
    ],
)
def test_usage_errors_exit_2_and_write_nothing(
    batch_cli: BatchCli, args: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch_cli.write_sweep(["c1"])
    monkeypatch.chdir(batch_cli.dir)

    result = CliRunner().invoke(main, args)

    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert not (batch_cli.dir / "runs").exists()
