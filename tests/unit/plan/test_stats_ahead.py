"""``batch plan`` starts the records' stats before it builds the jobs; the driver, which
decides under its batch lock, does not (batch/plan/planner.py, run_support/ledger_fstat.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.builders import write_record

from batch.errors import UsageError
from batch.plan.planner import RunOptions, decide_jobs, make_plan, prepare_plan
from run_support import ledger_fstat, ledger_scan
from run_support.results import load_recorded_runs

SWEEP = """\
name: s
cases: [c0, c1, c2, c3]
models: [m1, m2]
command: [agent, "{case}"]
output: runs
"""


@pytest.fixture
def sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A sweep and a batch of it with an index, big enough here for children."""
    monkeypatch.setattr(ledger_scan, "CHILD_MIN_BYTES", 0)
    monkeypatch.setattr(ledger_fstat, "_usable_cores", lambda: 2)
    monkeypatch.setattr(ledger_fstat, "_other_threads", lambda: False)  # other tests' threads
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP)
    batch_dir = tmp_path / "runs" / "s-20260101T000000Z"
    (batch_dir / "batch-logs").mkdir(parents=True)
    for model in ("m1", "m2"):
        for case in ("c0", "c1", "c2"):
            write_record(batch_dir, case, model, outcome=("passed", "failed")[case == "c1"])
    load_recorded_runs(batch_dir)  # the index
    return path


def test_a_read_only_plan_starts_the_stats_before_the_jobs_are_built(
    sweep: Path, no_children_left: Callable[[], bool]
) -> None:
    plan = prepare_plan(sweep, RunOptions(resume=""), read_only=True)
    assert plan.ledger_stats is not None

    decide_jobs(plan, RunOptions(resume=""), read_only=True)

    assert plan.ledger_stats is None and no_children_left()
    decisions = {job.key[:2]: job.decision for job in plan.jobs}
    assert decisions == {
        (case, model): "run" if case == "c3" else "carry"
        for case in ("c0", "c1", "c2", "c3")
        for model in ("m1", "m2")
    }


def test_the_plan_is_the_same_with_or_without_children(
    sweep: Path, monkeypatch: pytest.MonkeyPatch, no_children_left: Callable[[], bool]
) -> None:
    ahead = make_plan(sweep, RunOptions(resume="", retry_failed=True), read_only=True)
    monkeypatch.setattr(ledger_scan, "CHILD_MIN_BYTES", 1 << 62)
    here = make_plan(sweep, RunOptions(resume="", retry_failed=True), read_only=True)

    assert [(j.key, j.decision, j.decision_reason) for j in ahead.jobs] == [
        (j.key, j.decision, j.decision_reason) for j in here.jobs
    ]
    assert no_children_left()


def test_the_driver_starts_no_stats_before_it_holds_the_lock(
    sweep: Path, no_children_left: Callable[[], bool]
) -> None:
    # A record another driver writes before this one has the lock must be seen.
    plan = prepare_plan(sweep, RunOptions(resume=""))
    assert plan.ledger_stats is None and no_children_left()


def test_a_usage_error_after_the_stats_started_leaves_no_child(
    sweep: Path, no_children_left: Callable[[], bool]
) -> None:
    options = RunOptions(resume="", case_globs=("nothing-*",))
    with pytest.raises(UsageError, match="no job matches"):
        prepare_plan(sweep, options, read_only=True)
    assert no_children_left()
