"""``batch status|stats|report`` given the output root, or any directory that is not a
batch dir: one line naming the batch dirs inside (newest first), exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from batch.errors import ExitStatus


def batch(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "batch.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def make_batch_dir(root: Path, name: str) -> Path:
    path = root / name
    (path / "batch-logs").mkdir(parents=True)
    return path


@pytest.mark.parametrize("command", ["status", "stats", "report"])
def test_the_output_root_names_its_batch_dirs_newest_first(tmp_path: Path, command: str) -> None:
    runs = tmp_path / "runs"
    old = make_batch_dir(runs, "big-20261129T230000Z")
    new = make_batch_dir(runs, "big-v2-20261130T010000Z")
    newest = make_batch_dir(runs, "big-20261130T010000Z-11")
    make_batch_dir(runs, "big-20261130T010000Z-9")
    (runs / "checks").mkdir()  # what `batch check` leaves beside them: not a batch dir

    done = batch(command, runs)

    assert done.returncode == ExitStatus.USAGE
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.endswith(
        f"{runs}: not a batch dir; the batch dirs in it, newest first: {newest}, "
        f"{runs / 'big-20261130T010000Z-9'}, {new}, {old}"
    )
    assert not (runs / "report.html").exists()


def test_a_directory_with_no_batch_dir_in_it_says_so(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    done = batch("status", tmp_path)
    assert done.returncode == ExitStatus.USAGE
    assert done.stderr == (
        f"error: {tmp_path}: not a batch dir "
        "(no batch-summary.json, sweep.yaml, batch-logs/ or run records)\n"
    )


def test_more_than_five_batch_dirs_are_counted_not_listed(tmp_path: Path) -> None:
    for hour in range(10, 17):
        make_batch_dir(tmp_path, f"s-20261130T{hour}0000Z")
    done = batch("stats", tmp_path)
    assert done.returncode == ExitStatus.USAGE
    assert done.stderr.rstrip().endswith(f"{tmp_path / 's-20261130T120000Z'} and 2 more")
