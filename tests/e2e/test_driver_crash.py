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


def test_the_summary_counts_a_job_only_once_its_record_is_on_disk(
    batch_cli: BatchCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A slow disk (each record write held 0.4 s here): no summary written meanwhile, however
    # often (summary_interval 0.01 s), may call a job finished before its record exists.
    import threading
    import time

    from batch.attempt import runner

    real_write = runner.write_run_meta
    written: set[str] = set()

    def slow_write(run_dir: object, meta: runner.RunMeta) -> object:
        time.sleep(0.4)  # the fsyncs of a busy disk
        path = real_write(run_dir, meta)  # type: ignore[arg-type]
        written.add(meta.test_case)
        return path

    monkeypatch.setattr(runner, "write_run_meta", slow_write)
    sweep = batch_cli.write_sweep(["c1", "c2", "c3"], max_concurrent=1, summary_interval="0.01s")
    lies: list[str] = []
    seen_passed: set[str] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for path in batch_cli.dir.glob("runs/*/batch-summary.json"):
                try:
                    rows = json.loads(path.read_text())["jobs"]
                except (OSError, ValueError):
                    continue
                passed = {row["case"] for row in rows if row["status"] == "passed"}
                lies.extend(passed - written)
                seen_passed.update(passed)
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        status = run_main(sweep, RunOptions(progress=False), out=io.StringIO(), err=io.StringIO())
    finally:
        done.set()
        watcher.join()
    assert status == 0 and not lies
    assert seen_passed  # the watcher did see summaries counting finished jobs
