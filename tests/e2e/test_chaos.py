"""Crash at any moment: SIGKILL the driver again and again during a sweep, resume, lose nothing.

The harness and its checks are ``bench/chaos.py`` (its docstring lists them); this runs its
short variant with a fixed seed. ``.venv/bin/python bench/chaos.py`` is the long one.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from helpers.paths import REPO_ROOT

BENCH = REPO_ROOT / "bench" / "chaos.py"


def load_chaos() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_chaos", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


chaos = load_chaos()


def test_sigkilled_five_times_the_sweep_still_ends_with_every_job_recorded_once(
    tmp_path: Path,
) -> None:
    # Eight at once: twice the jobs killed mid-run per kill, and the last resume ends sooner.
    # Ten kills of the same sweep: `bench/chaos.py --seed 20261130 --kills 10 --cases 16
    # --max-concurrent 8` (bench/README.md).
    result = chaos.run_chaos(tmp_path, seed=20261130, kills=5, cases=16, models=3, max_concurrent=8)

    # run_chaos raises ChaosViolation at the first broken guarantee; these say it really
    # was put to the test: five kills mid-sweep, each followed by a resume, and a clean end.
    assert result.kills == 5
    assert result.kills_with_summary >= 4
    assert result.resumes >= 5
    assert result.final_exit == 1  # the sweep has rate-limited and crashing jobs
    assert result.starts > result.jobs  # some jobs were killed mid-run and ran again
    assert result.takeover_warnings >= 3
    assert result.elapsed < 60


def test_killed_as_it_starts_forty_jobs_no_job_outlives_the_driver_or_runs_twice(
    tmp_path: Path,
) -> None:
    result = chaos.run_chaos(
        tmp_path, seed=20261130, kills=3, cases=14, models=3, max_concurrent=40, early=True
    )

    # Each kill landed within half a second of the driver's first job start, with up to 40
    # starting at once; run_chaos checked that no job process outlived the kill grace and
    # that no job with a record ran again.
    assert result.kills == 3
    assert result.starts > result.jobs  # jobs really were killed mid-run and ran again
    assert result.final_exit == 1


def test_the_checks_catch_a_job_that_ran_again(tmp_path: Path) -> None:
    batch_dir = tmp_path / "runs" / "chaos-20261130T031500Z"
    for n in (1, 2):
        run_dir = batch_dir / "m0--model" / f"run{n}"
        run_dir.mkdir(parents=True)
        (run_dir / "run-meta.json").write_text(
            '{"test_case": "c000", "model": "m0/model", "outcome": "passed", '
            f'"failure_category": null, "run_dir": "m0--model/run{n}"}}'
        )
    with pytest.raises(chaos.ChaosViolation, match="ran again"):
        chaos.read_records(batch_dir)


def test_the_checks_catch_a_summary_that_claims_more_than_the_ledger(tmp_path: Path) -> None:
    _, expected = chaos.write_sweep(tmp_path, cases=1, models=1, seed=1)
    ((case, model),) = expected
    (tmp_path / "batch-summary.json").write_text(
        f'{{"jobs": [{{"case": "{case}", "model": "{model}", "status": "passed"}}]}}'
    )
    with pytest.raises(chaos.ChaosViolation, match="its record says None"):
        chaos.check_summary(tmp_path, expected, {})
