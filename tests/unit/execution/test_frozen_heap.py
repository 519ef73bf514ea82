"""The garbage collector leaves the run's long-lived objects alone while it runs, and gets
them back afterwards: a process that runs several sweeps frees what each left behind."""

from __future__ import annotations

import gc
import io
import json
import weakref
from pathlib import Path

import pytest

from batch.commands.plan import plan_main
from batch.commands.run import run_main
from batch.errors import BatchDirUnwritable
from batch.layout import SNAPSHOT
from batch.plan.planner import RunOptions


class Node:
    """A reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def _sweep_and_garbage(tmp_path: Path) -> tuple[Path, weakref.ref[Node]]:
    """A sweep of two jobs, and a reference cycle made garbage just now: only a collection
    finds it, and a sweep or a plan freezes it first."""
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        json.dumps({"cases": ["a", "b"], "models": ["m"], "command": ["true"], "output": "runs"})
    )
    gc.collect()
    cycle = Node()
    alive = weakref.ref(cycle)
    del cycle
    return sweep, alive


def test_garbage_made_before_a_sweep_is_collected_after_it(tmp_path: Path) -> None:
    sweep, alive = _sweep_and_garbage(tmp_path)
    out = io.StringIO()
    assert run_main(sweep, RunOptions(progress=False), out=out, err=out) == 0
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert alive() is None


def test_a_sweep_that_fails_after_planning_leaves_nothing_frozen(tmp_path: Path) -> None:
    # The driver freezes the plan as soon as it is built; a run that never reaches its first
    # job must still give it back to the collector.
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        json.dumps({"cases": ["a", "b"], "models": ["m"], "command": ["true"], "output": "runs"})
    )
    out = io.StringIO()
    assert run_main(sweep, RunOptions(progress=False), out=out, err=out) == 0
    (batch_dir,) = (tmp_path / "runs").iterdir()
    (batch_dir / SNAPSHOT).unlink()
    (batch_dir / SNAPSHOT).mkdir()  # the snapshot cannot be written: the run stops
    gc.collect()
    cycle = Node()
    alive = weakref.ref(cycle)
    del cycle

    with pytest.raises(BatchDirUnwritable):
        run_main(sweep, RunOptions(progress=False, resume=""), out=out, err=out)

    assert gc.get_freeze_count() == 0
    gc.collect()
    assert alive() is None


def test_a_plan_leaves_nothing_frozen_and_garbage_made_before_it_collectable(
    tmp_path: Path,
) -> None:
    # batch plan freezes what it built and thaws it as it returns (batch.commands.plan):
    # a process that plans, then goes on, still collects everything.
    sweep, alive = _sweep_and_garbage(tmp_path)
    out = io.StringIO()
    assert plan_main(sweep, RunOptions(), out=out, err=out) == 0
    assert "2 to run" in out.getvalue()
    assert gc.get_freeze_count() == 0
    assert gc.isenabled()
    gc.collect()
    assert alive() is None
