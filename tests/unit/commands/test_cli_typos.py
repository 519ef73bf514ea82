"""A first word that is neither a command nor a file: the error says which command was
likely meant and lists them all, instead of reading it as a sweep file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from batch.suggest import closest

BIN = Path(sys.executable).parent
COMMANDS = ["check", "plan", "report", "run", "stats", "status"]


def _batch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "batch"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=os.environ,
    )


def test_a_mistyped_command_names_the_one_meant_and_lists_them(tmp_path: Path) -> None:
    result = _batch("stauts", cwd=tmp_path)
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert "no such command 'stauts' (did you mean 'status'?)" in last
    # `control`, steer's earlier name, still works but is not offered.
    assert "check, plan, report, run, stats, status, steer, view" in last
    assert "cannot read the sweep file" not in result.stderr


def test_an_unknown_word_before_a_sweep_file_is_not_an_extra_argument(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text("name: x\n")
    result = _batch("frobnicate", "good.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert "no such command 'frobnicate', and no sweep file" in result.stderr
    assert "unexpected extra argument" not in result.stderr
    assert "did you mean" not in result.stderr


def test_a_sweep_file_without_a_dot_still_runs_as_a_sweep(tmp_path: Path) -> None:
    # Same shape as a command word, but a file of that name is here: it is the sweep.
    (tmp_path / "nightly").write_text("name: [\n")
    result = _batch("nightly", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("nightly:"), result.stderr
    assert "no such command" not in result.stderr


def test_a_missing_sweep_file_with_a_suffix_is_still_a_missing_sweep(tmp_path: Path) -> None:
    result = _batch("sweep.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert "sweep.yaml: cannot read the sweep file" in result.stderr


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("stauts", "status"),  # a swap beats a deletion at the same distance
        ("stat", "stats"),
        ("reprot", "report"),
        ("chek", "check"),
        ("plna", "plan"),
        ("runn", "run"),
        ("statuss", "status"),
        ("frobnicate", None),
        ("xyz", None),
    ],
)
def test_closest_command(typo: str, meant: str | None) -> None:
    assert closest(typo, COMMANDS) == meant
