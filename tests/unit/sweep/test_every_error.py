"""A sweep file with several mistakes: one run names every one of them, each
``file:line:col: message`` on its own line, in file order, and exits 2."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from batch.errors import SweepError
from batch.sweep.load import MAX_REPORTED_ERRORS, load_sweep

BIN = Path(sys.executable).parent
FIVE_TYPOS = """\
name: typos
cases: [c1, c2]
modles: [a, b]
command: "python3 agent.py {case}"
timeout: 5 minutes
max_concurent: 4
retries: -1
"""


def test_five_typos_are_five_located_lines_in_one_run(tmp_path: Path) -> None:
    (tmp_path / "sweep.yaml").write_text(FIVE_TYPOS)
    done = subprocess.run(
        [str(BIN / "batch"), "plan", "sweep.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ,
    )
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert [re.match(r"sweep\.yaml:(\d+):\d+: ", line)[1] for line in lines] == [  # type: ignore[index]
        "3",
        "4",
        "5",
        "6",
        "7",
    ], done.stderr
    assert "unknown key 'modles' (did you mean 'models'?)" in lines[0]
    assert "command: must be a list of arguments" in lines[1]
    assert "timeout: unknown unit 'minutes'" in lines[2]
    assert "unknown key 'max_concurent' (did you mean 'max_concurrent'?)" in lines[3]
    assert "retries: must be at least 0, got -1" in lines[4]
    # The misspelt 'models' is not reported a second time as missing.
    assert "missing required key" not in done.stderr
    assert not (tmp_path / "runs").exists()


def test_a_missing_key_and_a_bad_value_are_both_reported(tmp_path: Path) -> None:
    (tmp_path / "sweep.yaml").write_text("cases: [c1]\ncommand: [x]\nmax_concurrent: 0\n")
    with pytest.raises(SweepError) as caught:
        load_sweep(tmp_path / "sweep.yaml")
    assert [line.split(": ", 1)[1] for line in caught.value.lines()] == [
        "missing required key 'models'",
        "max_concurrent: must be at least 1, got 0",
    ]


def test_checks_across_keys_wait_for_sound_keys(tmp_path: Path) -> None:
    # {params.x} cannot be checked against cases that did not load: no second-hand error.
    (tmp_path / "sweep.yaml").write_text(
        "cases: {dir: nowhere, glob: '*'}\nmodels: [m]\ncommand: [x, '{params.x}']\n"
    )
    with pytest.raises(SweepError) as caught:
        load_sweep(tmp_path / "sweep.yaml")
    assert len(caught.value.lines()) == 1
    assert "cases.dir" in caught.value.lines()[0]


def test_past_the_limit_the_rest_are_counted(tmp_path: Path) -> None:
    extra = MAX_REPORTED_ERRORS + 5
    keys = "".join(f"unknown_{i}: 1\n" for i in range(extra))
    (tmp_path / "sweep.yaml").write_text("cases: [c]\nmodels: [m]\ncommand: [x]\n" + keys)
    with pytest.raises(SweepError) as caught:
        load_sweep(tmp_path / "sweep.yaml")
    lines = caught.value.lines()
    assert len(lines) == MAX_REPORTED_ERRORS + 1
    assert lines[-1] == "... and 5 more problems in the sweep file"
    assert lines[0].startswith(f"{tmp_path / 'sweep.yaml'}:4:1: unknown key 'unknown_0'")
