"""The caches of batch dirs that are gone are removed, once a day, by the next read of any
batch dir (docs/ledger.md, "The ledger cache"); nothing else is."""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from run_support import ledger_cache
from run_support.results import load_recorded_runs


def _files(cache_dir: Path) -> set[str]:
    return {p.name for p in cache_dir.iterdir() if p.name.endswith(".sqlite")}


def _name(batch_dir: Path) -> str:
    path = ledger_cache.cache_path(batch_dir)
    assert path is not None
    return path.name


def test_a_gone_batch_dirs_cache_is_removed_once_a_day_and_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    cache_dir = tmp_path / "xdg" / "batch-ledger"
    batches = {name: tmp_path / name / "batch-1" for name in ("a", "b", "c")}
    for batch_dir in batches.values():
        (batch_dir / "m").mkdir(parents=True)
        load_recorded_runs(batch_dir)
    assert _files(cache_dir) == {_name(b) for b in batches.values()}
    # A file that is no database of ours, and a cache made before caches named their dir.
    (cache_dir / "foreign.sqlite").write_bytes(b"not a database")
    shutil.copy(cache_dir / _name(batches["c"]), cache_dir / "older.sqlite")
    with sqlite3.connect(cache_dir / "older.sqlite") as db:
        db.execute("DELETE FROM about WHERE key = 'batch_dir'")
    shutil.rmtree(tmp_path / "b")
    # Within the day since the last look: nothing is looked at.
    load_recorded_runs(batches["a"])
    assert _name(batches["b"]) in _files(cache_dir)
    # A day later, the next read removes the cache of "b", whose dir is gone, and only it.
    day_ago = time.time() - ledger_cache.PRUNE_EVERY_SECONDS - 60
    os.utime(cache_dir / ".pruned", (day_ago, day_ago))
    load_recorded_runs(batches["a"])
    assert _files(cache_dir) == {
        _name(batches["a"]), _name(batches["c"]), "foreign.sqlite", "older.sqlite"
    }  # fmt: skip
    assert not [p for p in cache_dir.iterdir() if p.name.startswith(_name(batches["b"]))]
    # "c" gone now: its cache stays until the next day's look.
    shutil.rmtree(tmp_path / "c")
    load_recorded_runs(batches["a"])
    assert _name(batches["c"]) in _files(cache_dir)
    assert ledger_cache.prune(
        cache_dir, now=time.time() + 2 * ledger_cache.PRUNE_EVERY_SECONDS
    ) == [cache_dir / _name(batches["c"])]


def test_a_batch_dir_that_cannot_be_told_gone_keeps_its_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its parent is a file now: the stat fails with ENOTDIR, not ENOENT; it may be a mount
    # point not mounted, or a path that comes back: the cache is left.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    cache_dir = tmp_path / "xdg" / "batch-ledger"
    batch_dir = tmp_path / "parent" / "batch-1"
    batch_dir.mkdir(parents=True)
    load_recorded_runs(batch_dir)
    shutil.rmtree(tmp_path / "parent")
    (tmp_path / "parent").write_text("a file now")
    assert (
        ledger_cache.prune(cache_dir, now=time.time() + 2 * ledger_cache.PRUNE_EVERY_SECONDS) == []
    )
    assert _name(batch_dir) in _files(cache_dir)
