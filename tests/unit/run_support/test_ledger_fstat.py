"""The records' stats (run_support/ledger_fstat.py): one model dir's, as columns."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from helpers.builders import start_run, write_record

from run_support.ledger_fstat import Stats, stat_dir


@pytest.fixture
def batch_dir(tmp_path: Path) -> Path:
    for model in ("m1", "m2", "m3"):
        for n in range(5):
            write_record(tmp_path, f"c{n}", model, outcome=("passed", "failed")[n % 2])
    start_run(tmp_path, "c9", "m2")
    (tmp_path / "m3" / "notes.txt").write_text("a stray file, not a run dir")
    (tmp_path / "m1" / ".hidden").mkdir()
    return tmp_path


def test_a_model_dirs_stats_are_its_records_in_name_order(batch_dir: Path) -> None:
    found = stat_dir(batch_dir, "m2", Stats())

    assert found is not None
    assert found.names == sorted(p.name for p in (batch_dir / "m2").iterdir())
    killed = found.names.index(next(n for n in found.names if n.startswith("c9-")))
    assert found.failed == {killed: errno.ENOENT}
    for position, name in enumerate(found.names):
        if position == killed:
            continue
        st = os.stat(batch_dir / "m2" / name / "run-meta.json")
        row = (found.inodes, found.sizes, found.mtimes, found.ctimes, found.modes)
        expected = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)
        assert tuple(column[position] for column in row) == expected


def test_a_stray_file_fails_not_a_directory_and_hidden_names_are_skipped(
    batch_dir: Path,
) -> None:
    m3 = stat_dir(batch_dir, "m3", Stats())
    m1 = stat_dir(batch_dir, "m1", Stats())

    assert m3 is not None and m1 is not None
    assert m3.failed == {m3.names.index("notes.txt"): errno.ENOTDIR}
    assert ".hidden" not in m1.names and m1.failed == {}
    assert stat_dir(batch_dir, "gone", Stats()) is None
