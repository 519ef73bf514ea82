"""A test session stops every system component it started (issue: a first hour without
stumbles, round four: the suite left munged, slurmctld and slurmd running after it ended).

A real inner pytest session runs one test that uses the real ``local_slurm`` fixture; once
that session has ended, no process of its Slurm is left and its state dir is gone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from helpers.paths import REPO_ROOT

INNER = """
import os
pytest_plugins = ("helpers.slurm_fixture",)

def test_uses_slurm(local_slurm):
    with open(os.environ["SLURM_CONF_OUT"], "w") as out:
        out.write(str(local_slurm.conf))
"""


def processes_naming(text: str) -> list[int]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if any(text in arg for arg in process.info["cmdline"] or ()):
            found.append(process.pid)
    return found


@pytest.mark.xdist_group("slurm")
def test_a_test_session_stops_the_slurm_it_started_and_removes_its_state(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(INNER)
    out = tmp_path / "conf.txt"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-n0",
            "-p",
            "no:cacheprovider",
            "-c",
            str(REPO_ROOT / "pyproject.toml"),
            "--rootdir",
            str(REPO_ROOT),
            str(tmp_path / "test_inner.py"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "SLURM_CONF_OUT": str(out)},
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    state = Path(out.read_text()).parent
    assert state != Path("/tmp/batch-ledger-slurm"), "the session used the shared state dir"
    assert not state.exists(), f"{state} left behind"
    assert processes_naming(str(state)) == [], "a daemon of the session's Slurm is still running"
