"""The README's quickstart story, on the bundled example, through the real command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from helpers.paths import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "quickstart"


def batch(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "batch.cli", "sweep.yaml", "--no-progress", *args],
        cwd=directory,
        # The agent's think time, a tenth of a person's: the story is the same, 10 s sooner.
        env={**os.environ, "QUICKSTART_PACE": "0.1"},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def totals(directory: Path) -> dict[str, int]:
    (summary,) = directory.glob("runs/*/batch-summary.json")
    return json.loads(summary.read_text())["totals"]


def test_quickstart_runs_then_retry_failed_reruns_only_the_rate_limited_jobs(
    tmp_path: Path,
) -> None:
    example = tmp_path / "quickstart"
    shutil.copytree(EXAMPLE, example, ignore=shutil.ignore_patterns("runs"))

    first = batch(example)
    # The rate-limited model's first attempts end in error: exit 1, as the README says.
    assert first.returncode == 1, first.stderr
    # The guesser's wrong answers differ by case: the example raises no false alarm of a
    # crashed harness (its six identical reasons once did).
    assert "crashed harness" not in first.stdout + first.stderr
    assert totals(example) == {
        "passed": 18, "failed": 6, "error": 12, "skipped": 0, "pending": 0, "running": 0,
    }  # fmt: skip

    retried = batch(example, "--retry-failed")
    assert retried.returncode == 0, retried.stderr
    assert retried.stdout.count(" START ") == 12
    assert "mock/ratelimited" in retried.stdout and "mock/guesser (" not in retried.stdout
    assert totals(example) == {
        "passed": 30, "failed": 6, "error": 0, "skipped": 0, "pending": 0, "running": 0,
    }  # fmt: skip

    again = batch(example, "--resume")
    assert again.returncode == 0
    assert " START " not in again.stdout
