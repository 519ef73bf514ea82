"""A driver killed mid-sweep leaves its ledger cache current: the first read is fast."""

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
from run_support.names import OLD_CACHE_NAMES
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
    files = sorted(path.relative_to(batch_dir) for path in batch_dir.rglob("*"))

    parsed = spy_on_parsing(monkeypatch)
    monkeypatch.chdir(cli.dir)
    result = CliRunner().invoke(main, ["plan", str(sweep), "--resume", "--format", "json"])

    assert result.exit_code == 0, result.output
    assert parsed == []
    assert json.loads(result.output)["counts"] == {"run": 2, "carry": 3, "retry": 0}
    # plan changes nothing in the batch dir (the cache is the reader's own, outside it).
    assert sorted(path.relative_to(batch_dir) for path in batch_dir.rglob("*")) == files


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


def test_a_resume_leaves_the_cache_current_and_removes_an_earlier_versions_files(
    batch_cli: BatchCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = batch_cli
    sweep = cli.write_sweep({"c1": [], "c2": ["fail"], "c3": []})
    assert cli.run(sweep, "--no-progress", "--cases", "c1").returncode == 0
    batch_dir = cli.only_batch_dir()
    for name in OLD_CACHE_NAMES:  # as a version before issue 44 left them
        (batch_dir / name).write_bytes(b"{}\n")

    assert cli.run(sweep, "--no-progress", "--resume").returncode == 0

    assert [name for name in OLD_CACHE_NAMES if (batch_dir / name).exists()] == []
    parsed = spy_on_parsing(monkeypatch)
    found = load_recorded_runs(batch_dir)
    assert parsed == []
    assert {case: meta.outcome for (case, _, _), meta in found.items()} == {
        "c1": "passed",
        "c2": "failed",
        "c3": "passed",
    }
