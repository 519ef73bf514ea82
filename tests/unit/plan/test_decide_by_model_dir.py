"""A resume decides a model dir at a time as the ledger is read (batch/plan/planner.py), and
must decide exactly as reading every record first would: the same decision, reason and
carried outcome for every job, the same changes, the same unreadable records. Where that
cannot hold (a record outside its model's dir, a selection, a changed sweep), it reads
every record first."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import attrs
import pytest
from helpers.builders import write_record

from batch.plan import planner
from batch.plan.planner import RunOptions, make_plan

MODELS = ("m1", "org/m2", "m3")
CASES = tuple(f"c{n}" for n in range(6))


def sweep_file(tmp_path: Path, **keys: Any) -> Path:
    body = {
        "name": "s",
        "cases": list(CASES),
        "models": list(MODELS),
        "command": ["true"],
        "output": "runs",
        "repeats": 2,
        **keys,
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(json.dumps(body), encoding="utf-8")
    return path


def ledger(tmp_path: Path, seed: int) -> Path:
    """A batch dir of random records: outcomes of every kind, several attempts of a pair,
    repeats past the sweep's count, cases and models it no longer has, unreadable ones."""
    rng = random.Random(seed)
    batch_dir = tmp_path / "runs" / "s-20260101T000000Z"
    (batch_dir / "batch-logs").mkdir(parents=True)
    for model in (*MODELS, "gone"):
        for case in (*CASES, "c-gone"):
            for repeat in (1, 2, 3):
                for attempt in range(1, rng.choice((0, 1, 1, 2, 3)) + 1):
                    outcome = rng.choice(("passed", "passed", "failed", "error"))
                    write_record(
                        batch_dir, case, model, outcome, at=rng.randrange(5), attempt=attempt,
                        repeat=repeat, duration=rng.random(),
                    )  # fmt: skip
    for n in range(rng.randrange(3)):
        write_record(batch_dir, f"c{n}", "m1", raw=b'{"test_case": "c', dir_name=f"torn-{n}")
    return batch_dir


def decided(plan: planner.Plan) -> list[Any]:
    return [attrs.asdict(job) for job in plan.jobs]


def both_ways(
    sweep: Path, options: RunOptions, monkeypatch: pytest.MonkeyPatch
) -> tuple[planner.Plan, planner.Plan, list[bool]]:
    """The plan decided as built (and whether it went a dir at a time), then with every
    record read first."""
    went: list[bool] = []
    real = planner._decide_by_model_dir

    def spy(*args: Any) -> bool:
        went.append(real(*args))
        return went[-1]

    with monkeypatch.context() as patch:
        patch.setattr(planner, "_decide_by_model_dir", spy)
        by_dir = make_plan(sweep, options)
    with monkeypatch.context() as patch:
        patch.setattr(planner, "_decide_by_model_dir", lambda *args: False)
        whole = make_plan(sweep, options)
    return by_dir, whole, went


def assert_same(a: planner.Plan, b: planner.Plan) -> None:
    assert decided(a) == decided(b)
    assert (a.carried, a.retried, a.to_run) == (b.carried, b.retried, b.to_run)
    assert a.changes == b.changes
    assert a.unreadable == b.unreadable
    assert a.snapshot_current == b.snapshot_current


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(
    "options",
    [
        RunOptions(resume=""),
        RunOptions(resume="", retry_failed=True),
        RunOptions(resume="", retry_categories=("infra_failure",), max_attempts=2),
        RunOptions(resume="", repeats=1),
    ],
    ids=["resume", "retry-failed", "retry-infra-budget", "repeats-lowered"],
)
def test_a_dir_at_a_time_decides_as_reading_every_record_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, options: RunOptions
) -> None:
    sweep = sweep_file(tmp_path)
    ledger(tmp_path, seed)
    by_dir, whole, went = both_ways(sweep, options, monkeypatch)
    assert went == [True]
    assert_same(by_dir, whole)
    assert by_dir.carried > 0 and by_dir.to_run > 0


def test_a_record_outside_its_models_dir_is_decided_after_every_record_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The newest record of (c1, m3) is in m1's dir: a dir at a time, m3's jobs would be
    # decided on the older one, in m3's own dir.
    sweep = sweep_file(tmp_path)
    batch_dir = ledger(tmp_path, 0)
    write_record(batch_dir, "c1", "m3", "failed", attempt=1)
    moved = write_record(batch_dir, "c1", "m3", "passed", attempt=9)
    shutil.move(moved, batch_dir / "m1" / moved.name)
    by_dir, whole, went = both_ways(sweep, RunOptions(resume=""), monkeypatch)
    assert went == [False]
    assert_same(by_dir, whole)
    (job,) = [job for job in by_dir.jobs if job.key == ("c1", "m3", 1)]
    assert (job.status, job.attempts) == ("passed", 9)
    assert job.run_dir == f"m1/{moved.name}"


def test_a_selection_reads_every_record_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep = sweep_file(tmp_path)
    ledger(tmp_path, 1)
    options = RunOptions(resume="", retry_failed=True, case_globs=("c1",))
    by_dir, whole, went = both_ways(sweep, options, monkeypatch)
    assert went == []
    assert_same(by_dir, whole)


def test_a_changed_sweep_reads_every_record_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its changes count what was recorded of each model and case.
    sweep = sweep_file(tmp_path)
    batch_dir = ledger(tmp_path, 2)
    (batch_dir / "sweep.yaml").write_text(
        json.dumps({"cases": ["c0"], "models": ["m1"], "command": ["false"]}), encoding="utf-8"
    )
    by_dir, whole, went = both_ways(sweep, RunOptions(resume=""), monkeypatch)
    assert went == []
    assert_same(by_dir, whole)
