"""The summary stays valid, and streamable a row a line, when the driver is killed outright
at any moment of a sweep, and the resumes after it finish the sweep with no job run twice.

The suite's size: 150 jobs with every change written (``summary_interval: 0``), so kills
land among rewrites (after 40 and 125 passed; the last resume runs the rest);
bench/million.py does the same at 200,000 jobs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from helpers.fake_jobs import wait_until
from helpers.paths import REPO_ROOT

from batch.summary.read import read_summary
from batch.summary.stream import stream_summary

JOBS = 150


def start_driver(directory: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "batch.cli", "sweep.yaml", "--no-progress", *args],
        cwd=directory,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def passed(batch_dir: Path) -> int:
    try:
        return int(json.loads((batch_dir / "batch-summary.json").read_bytes())["totals"]["passed"])
    except (OSError, ValueError):
        return 0


def passed_any(directory: Path) -> int:
    return max((passed(batch_dir) for batch_dir in (directory / "runs").glob("*")), default=0)


def assert_valid_line_per_row(batch_dir: Path) -> dict[str, object]:
    text = (batch_dir / "batch-summary.json").read_bytes()
    whole = json.loads(text)
    assert stream_summary(batch_dir) == read_summary(batch_dir) == whole
    lines = text.splitlines()
    start = lines.index(b'  "jobs": [')
    assert [json.loads(line.rstrip(b",")) for line in lines[start + 1 : start + 1 + JOBS]] == (
        whole["jobs"]
    )
    return whole


def test_a_driver_killed_at_any_moment_leaves_a_valid_summary_and_resumes_exactly(
    tmp_path: Path,
) -> None:
    sweep = {
        "name": "kill",
        "cases": [f"c{n:04d}" for n in range(JOBS)],
        "models": ["m"],
        "command": ["true"],
        "max_concurrent": 4,
        "summary_interval": "0s",
    }
    (tmp_path / "sweep.yaml").write_text(json.dumps(sweep), encoding="utf-8")
    seen = 0
    for kill_after in (40, 125):
        driver = start_driver(tmp_path, *(["--resume"] if seen else []))
        try:
            assert wait_until(lambda n=kill_after: passed_any(tmp_path) >= n, timeout=120)
        finally:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
        (batch_dir,) = (tmp_path / "runs").iterdir()
        summary = assert_valid_line_per_row(batch_dir)
        assert summary["state"] == "running"  # what a killed driver leaves
        seen = passed(batch_dir)
        assert seen >= kill_after
    finished = start_driver(tmp_path, "--resume")
    assert finished.wait(timeout=300) == 0
    summary = assert_valid_line_per_row(batch_dir)
    assert summary["state"] == "complete"
    assert summary["totals"]["passed"] == JOBS
    # Nothing ran twice: one run dir per job (a job killed mid-run has no record and is run
    # again in a run dir of its own, so at most the kills' running jobs can add one each).
    run_dirs = list((batch_dir / "m").iterdir())
    assert JOBS <= len(run_dirs) <= JOBS + 2 * 4
    # And exactly one record per job: a job recorded before a kill is never run again.
    recorded = Counter(
        json.loads(path.read_bytes())["test_case"] for path in batch_dir.glob("m/*/run-meta.json")
    )
    assert recorded == dict.fromkeys(sweep["cases"], 1)
