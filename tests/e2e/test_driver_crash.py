"""A bug inside the driver leaves a summary that says the sweep did not complete."""

from __future__ import annotations

import io
import json

import pytest
from conftest import BatchCli

from batch.commands.run import run_main
from batch.executors import local
from batch.plan.planner import RunOptions


def test_an_unexpected_error_leaves_the_summary_interrupted_not_running(
    batch_cli: BatchCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep = batch_cli.write_sweep(["c1", "c2", "c3"], max_concurrent=1)

    async def broken_run(self: object, job: object, attempt: int) -> None:
        raise RuntimeError("a bug in the driver")

    monkeypatch.setattr(local.LocalExecutor, "run", broken_run)
    with pytest.raises(RuntimeError, match="a bug in the driver"):
        run_main(sweep, RunOptions(progress=False), out=io.StringIO(), err=io.StringIO())
    summary = json.loads((batch_cli.only_batch_dir() / "batch-summary.json").read_text())
    assert summary["state"] == "interrupted"
    assert summary["totals"]["running"] == summary["totals"]["pending"] == 0
