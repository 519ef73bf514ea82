"""A driver killed mid-sweep leaves its ledger index current: the first read is fast."""

from __future__ import annotations

import json
import signal
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner
from helpers.fake_jobs import wait_until
from helpers.ledger_spy import spy_on_parsing

from batch.cli import main
from batch.layout import SUMMARY_NAME
from run_support.names import INDEX_NAME, JOURNAL_NAME
from run_support.results import load_recorded_runs

if TYPE_CHECKING:
    from conftest import BatchCli


def test_plan_resume_after_sigkill_is_served_without_parsing_a_record(
    batch_cli: BatchCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = batch_cli
    gate = cli.dir / "gate"
    gate.touch()
    held = [f"touch={cli.dir}/started-c4", f"hold={gate}"]
    sweep = cli.write_sweep({"c1": [], "c2": ["fail"], "c3": [], "c4": held, "c5": []})
    driver = cli.start(sweep, "--no-progress", "-j", "1")
    cli.wait_for(cli.dir / "started-c4")
    batch_dir = cli.only_batch_dir()
    assert wait_until(lambda: len(cli.records(batch_dir)) == 3)
    driver.signal(signal.SIGKILL)
    driver.wait()
    assert not (batch_dir / INDEX_NAME).exists()
    journal = (batch_dir / JOURNAL_NAME).read_bytes()

    parsed = spy_on_parsing(monkeypatch)
    monkeypatch.chdir(cli.dir)
    result = CliRunner().invoke(main, ["plan", str(sweep), "--resume", "--format", "json"])

    assert result.exit_code == 0, result.output
    assert parsed == []
    assert json.loads(result.output)["counts"] == {"run": 2, "carry": 3, "retry": 0}
    # plan changes nothing on disk: no index written, the journal as the driver left it.
    assert not (batch_dir / INDEX_NAME).exists()
    assert (batch_dir / JOURNAL_NAME).read_bytes() == journal


def test_a_resume_starts_its_first_job_before_it_rewrites_the_summary(batch_cli: BatchCli) -> None:
    # A resume's first summary lists every job (24 MB for 100,000): written after the first
    # starts, one summary_interval in, never in front of it.
    cli = batch_cli
    gate = cli.dir / "gate"
    gate.touch()
    held = [f"touch={cli.dir}/started-c2", f"hold={gate}"]
    sweep = cli.write_sweep({"c1": [], "c2": held}, summary_interval="60s")
    assert cli.run(sweep, "--no-progress", "--cases", "c1").returncode == 0
    batch_dir = cli.only_batch_dir()
    before = (batch_dir / SUMMARY_NAME).read_bytes()

    driver = cli.start(sweep, "--no-progress", "--resume")
    cli.wait_for(cli.dir / "started-c2")
    assert (batch_dir / SUMMARY_NAME).read_bytes() == before
    gate.unlink()

    assert driver.wait() == 0
    assert cli.statuses(batch_dir) == {"c1": "passed", "c2": "passed"}
    assert cli.summary(batch_dir)["state"] == "complete"


def test_a_resume_leaves_an_index_and_only_its_own_journal_lines(
    batch_cli: BatchCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The index is written after the first jobs started (or when the sweep ends, here):
    # the lines of the jobs that finished meanwhile stay in the journal, the rest is folded.
    cli = batch_cli
    sweep = cli.write_sweep({"c1": [], "c2": ["fail"], "c3": []})
    assert cli.run(sweep, "--no-progress", "--cases", "c1").returncode == 0
    batch_dir = cli.only_batch_dir()
    (batch_dir / INDEX_NAME).unlink(missing_ok=True)
    assert len((batch_dir / JOURNAL_NAME).read_bytes().splitlines()) == 1

    assert cli.run(sweep, "--no-progress", "--resume").returncode == 0

    assert (batch_dir / INDEX_NAME).is_file()
    assert len((batch_dir / JOURNAL_NAME).read_bytes().splitlines()) == 2  # c2's and c3's
    parsed = spy_on_parsing(monkeypatch)
    found = load_recorded_runs(batch_dir, update_index=False)
    assert parsed == []
    assert {case: meta.outcome for (case, _, _), meta in found.items()} == {
        "c1": "passed",
        "c2": "failed",
        "c3": "passed",
    }
