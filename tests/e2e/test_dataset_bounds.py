"""A JSONL dataset is read with bounds (issue 27, item 3), through the real ``batch plan``.

A gzip file of blank lines around its rows is read in memory that follows the rows kept; a
FIFO or a symlink to ``/dev/zero`` in the dataset's place, and a line past the documented
limit, are one located line and exit status 2, at once.
"""

from __future__ import annotations

import gzip
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.paths import REPO_ROOT

from batch.sweep.dataset import MAX_LINE_BYTES

#: The address space ``batch plan`` gets: some 400 MB above what it needs to start. Reading
#: the 100 MB of blank lines below as one list of lines took a gigabyte.
ADDRESS_SPACE = 700 << 20


def _plan(tmp_path: Path, dataset: str) -> subprocess.CompletedProcess[str]:
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"name: ds\ncases: {{jsonl: {dataset}, id: task_id}}\nmodels: [m]\ncommand: [echo]\n"
    )
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    return subprocess.run(
        [sys.executable, "-m", "batch.cli", "plan", sweep.name],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": path},
        preexec_fn=limit,
        timeout=30,  # before: a FIFO or /dev/zero never returned
    )


def test_a_gzip_bomb_of_blank_lines_is_read_in_memory_that_follows_the_rows(
    tmp_path: Path,
) -> None:
    with gzip.open(tmp_path / "bomb.jsonl.gz", "wb") as out:
        out.write(b'{"task_id": "first"}\n')
        for _ in range(100):
            out.write(b"\n" * (1 << 20))
        out.write(b'{"task_id": "last"}\n')
    assert (tmp_path / "bomb.jsonl.gz").stat().st_size < 200_000
    done = _plan(tmp_path, "bomb.jsonl.gz")
    assert done.returncode == 0, done.stderr  # before: MemoryError, exit 1
    assert "2 to run" in done.stdout


@pytest.mark.parametrize(
    ("make", "what"),
    [
        (lambda path: os.mkfifo(path), "a FIFO"),
        (lambda path: os.symlink("/dev/zero", path), "a character device"),
    ],
    ids=["fifo", "dev-zero"],
)
def test_a_dataset_that_is_no_regular_file_is_one_line_exit_2(
    tmp_path: Path, make: object, what: str
) -> None:
    make(tmp_path / "data.jsonl")  # type: ignore[operator]
    done = _plan(tmp_path, "data.jsonl")
    assert done.returncode == 2
    assert done.stderr == (
        f"data.jsonl: cannot read the dataset: it is {what}, not a regular file\n"
    )


def test_a_line_past_the_limit_is_a_located_error_exit_2(tmp_path: Path) -> None:
    long_row = b'{"task_id": "big", "x": "' + b"y" * MAX_LINE_BYTES + b'"}\n'
    (tmp_path / "data.jsonl").write_bytes(b'{"task_id": "a"}\n\n' + long_row)
    done = _plan(tmp_path, "data.jsonl")
    assert done.returncode == 2
    assert done.stderr == (
        "data.jsonl:3:1: longer than 16,777,216 bytes (a line is one case); not read\n"
    )
