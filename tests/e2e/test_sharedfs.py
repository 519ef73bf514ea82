"""A batch whose output root is on a network filesystem (sshfs over loopback): a driver
SIGKILLed there is resumed with nothing lost and nothing rerun, the batch lock still keeps
a second driver out, and the journal it left serves the next read.

If sshfs cannot be mounted here, every test FAILS with the reason (``sshfs_mount``).
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner
from helpers.fake_jobs import wait_until
from helpers.ledger_spy import spy_on_parsing

from batch.cli import main
from batch.errors import ExitStatus
from run_support.results import load_recorded_runs

if TYPE_CHECKING:
    from conftest import BatchCli

#: Brings the session fixture ``sshfs_mount``.
pytest_plugins = ("helpers.sshfs_fixture",)

CASES = ["c1", "c2", "c3", "c4", "c5"]


def on_mount(mount: Path, tmp_path: Path) -> Path:
    """An output root of this test's own on the network filesystem."""
    root = mount / tmp_path.name
    root.mkdir()
    return root


def only_batch_dir(root: Path) -> Path:
    (found,) = [p for p in root.iterdir() if p.is_dir()]
    return found


def records(batch_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(batch_dir.glob("*/*/run-meta.json"))]


@pytest.mark.parametrize("executor", [[], ["--executor", "dask"]], ids=["local", "dask"])
def test_a_sweep_on_sshfs_killed_and_resumed_loses_nothing_and_reruns_nothing(
    batch_cli: BatchCli,
    sshfs_mount: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    executor: list[str],
) -> None:
    cli = batch_cli
    root = on_mount(sshfs_mount, tmp_path)
    gate = cli.dir / "gate"
    gate.touch()
    per_case = {case: [] for case in CASES} | {
        "c4": [f"touch={cli.dir}/started-c4", f"hold={gate}"]
    }
    sweep = cli.write_sweep(per_case, output=str(root))
    driver = cli.start(sweep, "--no-progress", "-j", "1", *executor)
    cli.wait_for(cli.dir / "started-c4", timeout=30)
    batch_dir = only_batch_dir(root)
    assert wait_until(lambda: len(records(batch_dir)) == 3)
    driver.signal(signal.SIGKILL)
    driver.wait()
    assert cli.runs_counted() == ["c1", "c2", "c3", "c4"]
    # The snapshot names the executor when it is not local: the jobs ran on Dask workers.
    assert ("dask" in (batch_dir / "sweep.yaml").read_text()) == bool(executor)

    # The rows the killed driver cached serve a read of its three records, on sshfs too.
    parsed = spy_on_parsing(monkeypatch)
    recorded = load_recorded_runs(batch_dir)
    assert parsed == []
    assert sorted(case for case, _, _ in recorded) == ["c1", "c2", "c3"]
    monkeypatch.undo()

    (cli.dir / "started-c4").unlink()
    resumed = cli.start(sweep, "--no-progress", "-j", "1", "--resume", *executor)
    cli.wait_for(cli.dir / "started-c4", timeout=30)
    # The lock on the network filesystem still keeps a second driver out of the batch.
    second = cli.run(sweep, "--no-progress", "--resume", *executor)
    assert second.returncode == ExitStatus.LOCKED, second.stderr
    gate.unlink()
    assert resumed.wait(60) == 0, resumed.stderr

    assert cli.runs_counted() == ["c4", "c5"]
    assert sorted(r["test_case"] for r in records(batch_dir)) == CASES
    assert {r["test_case"]: r["attempt"] for r in records(batch_dir)} == dict.fromkeys(CASES, 1)
    assert set(cli.statuses(batch_dir).values()) == {"passed"}

    # Nothing left to do; what the cache the resume left serves is what the
    # records say (on sshfs a record's ctime is its mtime, to the second: records written
    # within 2 s of a read are parsed by the racy-clean rule, never served).
    monkeypatch.chdir(cli.dir)
    plan = CliRunner().invoke(main, ["plan", str(sweep), "--resume", "--format", "json"])
    assert plan.exit_code == 0, plan.output
    assert json.loads(plan.output)["counts"] == {"run": 0, "carry": 5, "retry": 0}
    cached = load_recorded_runs(batch_dir)
    assert dict(cached) == dict(load_recorded_runs(batch_dir, use_index=False))
    assert len(cached) == 5
