"""The ledger cache on sshfs, whose inode numbers hold only within one mount: a remount with
nothing changed serves every record from the cache, and a record changed since it was
cached is parsed again, never served stale.

Records are aged by setting their mtime back a minute: sshfs reports the mtime (whole
seconds) as the ctime too, so they are past the racy window without a wait.
If sshfs cannot be mounted here, every test FAILS with the reason (``sshfs_mount``).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.builders import write_like_the_runner, write_record
from helpers.ledger_spy import spy_on_parsing

from run_support import ledger_cache, ledger_scan
from run_support.filesystems import inodes_per_mount
from run_support.results import load_recorded_runs

#: Brings the session fixtures ``sshfs_mount`` and ``remount_sshfs``.
pytest_plugins = ("helpers.sshfs_fixture",)

CASES = ("c01", "c02", "c03")


def aged_ledger(sshfs_mount: Path, tmp_path: Path) -> Path:
    """A batch dir on the mount with three records a minute old."""
    batch_dir = sshfs_mount / tmp_path.name / "batch"
    then = time.time() - 60
    for case in CASES:
        run_dir = write_record(batch_dir, case, "m", outcome="passed")
        os.utime(run_dir / "run-meta.json", (then, then))
    return batch_dir


def record_path(batch_dir: Path, case: str) -> Path:
    (path,) = batch_dir.glob(f"*/{case}-*/run-meta.json")
    return path


def index_inodes(batch_dir: Path) -> list[int]:
    """The inode each cached row keys its record by (0: by its path)."""
    path = ledger_cache.cache_path(batch_dir)
    assert path is not None
    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute("SELECT ino FROM records ORDER BY run_dir")]


def test_sshfs_is_told_apart_as_numbering_inodes_per_mount(
    sshfs_mount: Path, tmp_path: Path
) -> None:
    assert inodes_per_mount(sshfs_mount)
    assert not inodes_per_mount(tmp_path)


def test_a_remount_with_nothing_changed_serves_every_record_from_the_cache(
    sshfs_mount: Path,
    remount_sshfs: Callable[[], None],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    batch_dir = aged_ledger(sshfs_mount, tmp_path)
    first = load_recorded_runs(batch_dir)
    before = {case: os.stat(record_path(batch_dir, case)).st_ino for case in CASES}
    # Kept by path: no inode of this mount in the cache.
    assert index_inodes(batch_dir) == [0, 0, 0]

    remount_sshfs()
    after = {case: os.stat(record_path(batch_dir, case)).st_ino for case in CASES}
    parsed = spy_on_parsing(monkeypatch)
    again = load_recorded_runs(batch_dir)

    assert after != before  # the new mount numbered the files afresh
    assert parsed == []
    assert dict(again) == dict(first) == dict(load_recorded_runs(batch_dir, use_index=False))


def replace_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name("run-meta.json.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def rewrite_in_place(path: Path, data: bytes) -> None:
    with open(path, "r+b") as handle:
        handle.write(data)


@pytest.mark.parametrize("change", [replace_atomically, rewrite_in_place])
def test_a_record_changed_after_it_was_cached_is_parsed_again_in_a_new_mount(
    sshfs_mount: Path,
    remount_sshfs: Callable[[], None],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    change: Callable[[Path, bytes], None],
) -> None:
    # The same size, the same path, the same run dirs: only the mtime tells it changed.
    batch_dir = aged_ledger(sshfs_mount, tmp_path)
    load_recorded_runs(batch_dir)
    path = record_path(batch_dir, "c02")
    data = path.read_bytes()
    changed = data.replace(b'"passed"', b'"failed"')
    assert len(changed) == len(data) and changed != data
    change(path, changed)
    assert os.stat(path).st_size == len(data)

    remount_sshfs()
    parsed = spy_on_parsing(monkeypatch)
    again = load_recorded_runs(batch_dir)

    assert parsed == [str(path)]
    assert again[("c02", "m", 1)].outcome == "failed"
    assert dict(again) == dict(load_recorded_runs(batch_dir, use_index=False))


def test_a_writers_row_is_matched_on_the_inode_of_the_mount_that_wrote_it(
    sshfs_mount: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A record replaced in the second the driver wrote it, to the same size, with that
    # mtime: only the inode tells. The writer's signature was taken right after the write,
    # where the racy rule cannot apply, so its row is never matched by path alone.
    batch_dir = sshfs_mount / tmp_path.name / "batch"
    path = write_like_the_runner(batch_dir, "c01", "m", outcome="passed")
    written = os.stat(path)
    changed = path.read_bytes().replace(b'"passed"', b'"failed"')
    replace_atomically(path, changed)
    os.utime(path, ns=(written.st_atime_ns, written.st_mtime_ns))
    now = os.stat(path)
    assert (now.st_size, now.st_mtime_ns, now.st_ctime_ns) == (
        written.st_size,
        written.st_mtime_ns,
        written.st_ctime_ns,
    )

    parsed = spy_on_parsing(monkeypatch)
    found = load_recorded_runs(batch_dir)

    assert parsed == [str(path)]
    assert found[("c01", "m", 1)].outcome == "failed"


def test_a_read_of_the_writers_rows_keys_its_records_by_path_for_the_next_mount(
    sshfs_mount: Path,
    remount_sshfs: Callable[[], None],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A driver's records, cached with this mount's inodes; a read keys them by path.
    batch_dir = sshfs_mount / tmp_path.name / "batch"
    for case in CASES:
        write_like_the_runner(batch_dir, case, "m")
    # The racy window waited out, without the wait.
    monkeypatch.setattr(ledger_scan, "RACY_WINDOW_NS", -ledger_scan.RACY_WINDOW_NS)
    parsed = spy_on_parsing(monkeypatch)
    first = load_recorded_runs(batch_dir)
    assert parsed == []  # served by the writer's rows, in the mount that wrote them
    assert index_inodes(batch_dir) == [0, 0, 0]

    remount_sshfs()
    again = load_recorded_runs(batch_dir)

    assert parsed == []
    assert dict(again) == dict(first)
