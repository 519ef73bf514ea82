"""Finding records, and the ledger's cache: it speeds reads up and never returns a stale
record, whatever is done to its database.

Most cache tests need records older than the racy window (only those are cached), so one
module fixture writes a ledger per test and waits out the window once.
"""

from __future__ import annotations

import gc
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.builders import make_meta, start_run, write_record

from run_support import ledger_cache, ledger_scan
from run_support.ledger import Ledger
from run_support.ledger_scan import RACY_WINDOW_NS
from run_support.results import RecordedRuns, load_recorded_runs

AGED = [
    "truncate",
    "same_size",
    "same_size_old_mtime",
    "replace",
    "replace_same_size_old_mtime",
    "delete",
    "delete_run_dir",
    "newer_run",
    "served",
    "warm_no_rewrite",
    "unwritable",
    "surrogate",
    "huge_int",
    "big_record",
    "foreign_version",
    "other_reader",
    "damaged_garbage",
    "damaged_truncated",
    "damaged_bitflip",
    "locked",
    "damaged_wrong_values",
    "incomplete_and_stray",
    "every_change",
]


@pytest.fixture(scope="module")
def aged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One batch dir per test, each with two records, all older than the racy window."""
    dirs = {}
    for name in AGED:
        batch_dir = tmp_path_factory.mktemp(name)
        write_record(batch_dir, "c01", "m", outcome="passed", at=0)
        write_record(batch_dir, "c02", "m", outcome="failed", at=0)
        dirs[name] = batch_dir
    write_record(dirs["surrogate"], "c03", "m", raw='{"test_case": "c03", "model": "m", '
                 '"outcome": "passed", "result": {"text": "\\ud800 cut"}}')  # fmt: skip
    write_record(dirs["huge_int"], "c03", "m", raw=make_meta("c03", "m", tokens=10**30))
    write_record(dirs["huge_int"], "c04", "m", raw=make_meta("c04", "m", exit_code=10**30))
    write_record(dirs["big_record"], "c03", "m", raw=make_meta("c03", "m", blob="x" * 5000))
    start_run(dirs["incomplete_and_stray"], "c03", "m")
    for n in range(3, 8):
        write_record(dirs["every_change"], f"c{n:02d}", "m", outcome="error", at=0)
    time.sleep(RACY_WINDOW_NS / 1e9 + 0.2)
    return dirs


def cache_file(batch_dir: Path) -> Path:
    path = ledger_cache.cache_path(batch_dir)
    assert path is not None
    return path


def cached_rows(batch_dir: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(cache_file(batch_dir)) as db:
        return db.execute("SELECT * FROM records ORDER BY run_dir").fetchall()


def record_path(batch_dir: Path, case: str) -> Path:
    (path,) = batch_dir.glob(f"*/{case}-*/run-meta.json")
    return path


def fresh(batch_dir: Path) -> RecordedRuns:
    return load_recorded_runs(batch_dir, use_index=False)


def same(a: RecordedRuns, b: RecordedRuns) -> bool:
    return (dict(a), a.unreadable, a.incomplete) == (dict(b), b.unreadable, b.incomplete)


def rewrite_in_place(path: Path, old: bytes, new: bytes) -> None:
    data = path.read_bytes()
    assert len(old) == len(new) and old in data
    with open(path, "r+b") as handle:  # same inode, same size
        handle.write(data.replace(old, new))


# --- finding records ----------------------------------------------------------------------


def test_a_started_run_without_a_record_is_listed_as_incomplete(tmp_path: Path) -> None:
    write_record(tmp_path, "c01", "m")
    killed = start_run(tmp_path, "c02", "m")
    recorded = load_recorded_runs(tmp_path)
    assert list(recorded) == [("c01", "m", 1)]
    assert recorded.incomplete == [killed.relative_to(tmp_path).as_posix()]


def test_driver_files_hidden_dirs_and_stray_files_are_not_runs(tmp_path: Path) -> None:
    write_record(tmp_path, "c01", "m")
    (tmp_path / "batch-logs" / "old").mkdir(parents=True)
    (tmp_path / "batch-logs" / "events.jsonl").write_text("{}\n")
    (tmp_path / "batch-summary.json").write_text("{}")
    (tmp_path / ".trash" / "r").mkdir(parents=True)
    (tmp_path / "m" / ".partial").mkdir()
    (tmp_path / "m" / "notes.txt").write_text("not a run dir")
    recorded = load_recorded_runs(tmp_path)
    assert (list(recorded), recorded.incomplete, recorded.unreadable) == ([("c01", "m", 1)], [], [])


def test_a_slow_disk_spreads_the_stats_over_threads_with_the_same_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Slow stats are what a cold page cache looks like (each waits on the disk); real cold
    # reads need root and a dropped cache, so the wait is put into os.stat instead.
    for model in ("m1", "m2"):
        for n in range(200):
            write_record(tmp_path, f"c{n:03d}", model, outcome=("passed", "failed")[n % 2])
    start_run(tmp_path, "c999", "m2")
    (tmp_path / "m2" / "notes.txt").write_text("a stray file, not a run dir")
    expected = load_recorded_runs(tmp_path, use_index=False)

    real_stat = os.stat
    threads: set[str] = set()

    def slow_stat(*args: Any, **kwargs: Any) -> os.stat_result:
        threads.add(threading.current_thread().name)
        time.sleep(0.0002)
        return real_stat(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(os, "stat", slow_stat)
        recorded = load_recorded_runs(tmp_path, use_index=False)
    assert same(recorded, expected)
    assert len(recorded) == 400 and recorded.incomplete == expected.incomplete != []
    assert any(name.startswith("ledger-stat") for name in threads)
    assert not [t for t in threading.enumerate() if t.name.startswith("ledger-stat")]


def test_a_batch_dir_that_is_a_file_has_no_records(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    assert load_recorded_runs(tmp_path / "file") == {}
    assert not cache_file(tmp_path / "file").exists()


# --- the cache serves unchanged records --------------------------------------------------


def test_unchanged_records_are_served_from_the_cache(aged: dict[str, Path], reads: list) -> None:
    batch_dir = aged["served"]
    first = load_recorded_runs(batch_dir)
    assert len(reads) == 2 and cache_file(batch_dir).exists()
    reads.clear()
    assert same(load_recorded_runs(batch_dir), first)
    assert reads == []


def test_on_a_local_disk_the_cache_keys_each_record_on_its_inode(aged: dict[str, Path]) -> None:
    batch_dir = aged["served"]
    load_recorded_runs(batch_dir)
    stats = [os.stat(p) for p in sorted(batch_dir.glob("*/*/run-meta.json"))]
    rows = cached_rows(batch_dir)
    assert [row[2:6] for row in rows] == [
        (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) for st in stats
    ]


def test_the_cache_lives_outside_the_batch_dir_keyed_by_its_real_path(
    aged: dict[str, Path], tmp_path: Path
) -> None:
    batch_dir = aged["served"]
    load_recorded_runs(batch_dir)
    link = tmp_path / "link"
    link.symlink_to(batch_dir)
    assert cache_file(link) == cache_file(batch_dir)
    assert cache_file(batch_dir).parent == Path(os.environ["XDG_CACHE_HOME"]) / "batch-ledger"
    assert sorted(p.name for p in batch_dir.iterdir()) == ["m"]


def test_a_warm_read_writes_nothing(aged: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    batch_dir = aged["warm_no_rewrite"]
    load_recorded_runs(batch_dir)
    writes: list[Any] = []
    real = ledger_cache.Cache.write
    monkeypatch.setattr(
        ledger_cache.Cache, "write", lambda self, *args: writes.append(args) or real(self, *args)
    )
    load_recorded_runs(batch_dir)
    assert [(rows, gone) for _, rows, gone in writes if rows or gone] == []


def test_a_record_written_within_the_racy_window_is_never_cached(
    tmp_path: Path, reads: list
) -> None:
    write_record(tmp_path, "c01", "m", outcome="passed")
    load_recorded_runs(tmp_path)
    reads.clear()
    load_recorded_runs(tmp_path)
    assert len(reads) == 1  # read again: it was not cached
    # The same size, maybe the same clock tick: only the racy rule keeps this from being missed.
    rewrite_in_place(record_path(tmp_path, "c01"), b'"passed"', b'"failed"')
    assert load_recorded_runs(tmp_path)[("c01", "m", 1)].outcome == "failed"


# --- the cache is never stale -------------------------------------------------------------


def mutate_and_compare(batch_dir: Path, mutate: Callable[[Path], None]) -> RecordedRuns:
    load_recorded_runs(batch_dir)  # caches both records
    mutate(batch_dir)
    indexed = load_recorded_runs(batch_dir)
    assert same(indexed, fresh(batch_dir))
    return indexed


def test_a_record_truncated_in_place_is_seen_at_once(aged: dict[str, Path]) -> None:
    indexed = mutate_and_compare(aged["truncate"], lambda d: os.truncate(record_path(d, "c01"), 40))
    assert ("c01", "m", 1) not in indexed
    assert "not valid JSON" in indexed.unreadable[0][1]


def test_a_record_rewritten_in_place_with_the_same_size_is_seen(aged: dict[str, Path]) -> None:
    indexed = mutate_and_compare(
        aged["same_size"],
        lambda d: rewrite_in_place(record_path(d, "c01"), b'"passed"', b'"failed"'),
    )
    assert indexed[("c01", "m", 1)].outcome == "failed"


def keep_mtime(path: Path, change: Callable[[], None]) -> None:
    st = os.stat(path)
    change()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_same_size_rewrite_with_the_old_mtime_put_back_is_seen(aged: dict[str, Path]) -> None:
    def mutate(d: Path) -> None:
        path = record_path(d, "c01")
        keep_mtime(path, lambda: rewrite_in_place(path, b'"passed"', b'"failed"'))
        assert os.stat(path).st_size == len(path.read_bytes())

    indexed = mutate_and_compare(aged["same_size_old_mtime"], mutate)
    assert indexed[("c01", "m", 1)].outcome == "failed"


def replace_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name("tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def test_a_record_replaced_atomically_is_seen(aged: dict[str, Path]) -> None:
    def mutate(d: Path) -> None:
        replace_atomically(record_path(d, "c02"), json.dumps(make_meta("c02", "m")).encode())

    indexed = mutate_and_compare(aged["replace"], mutate)
    assert indexed[("c02", "m", 1)].outcome == "passed"


def test_an_atomic_same_size_replacement_with_the_old_mtime_is_seen(
    aged: dict[str, Path],
) -> None:
    def mutate(d: Path) -> None:
        path = record_path(d, "c01")
        data = path.read_bytes().replace(b'"passed"', b'"failed"')
        keep_mtime(path, lambda: replace_atomically(path, data))

    indexed = mutate_and_compare(aged["replace_same_size_old_mtime"], mutate)
    assert indexed[("c01", "m", 1)].outcome == "failed"


def test_a_deleted_record_leaves_an_incomplete_run(aged: dict[str, Path]) -> None:
    indexed = mutate_and_compare(aged["delete"], lambda d: record_path(d, "c01").unlink())
    assert list(indexed) == [("c02", "m", 1)]
    assert len(indexed.incomplete) == 1


def test_a_deleted_run_dir_is_gone(aged: dict[str, Path]) -> None:
    def mutate(d: Path) -> None:
        run_dir = record_path(d, "c01").parent
        for child in run_dir.iterdir():
            child.unlink()
        run_dir.rmdir()

    indexed = mutate_and_compare(aged["delete_run_dir"], mutate)
    assert list(indexed) == [("c02", "m", 1)] and indexed.incomplete == []


def test_a_newer_run_of_a_cached_pair_wins(aged: dict[str, Path]) -> None:
    indexed = mutate_and_compare(
        aged["newer_run"], lambda d: write_record(d, "c02", "m", outcome="passed", at=60)
    )
    assert indexed[("c02", "m", 1)].outcome == "passed"


def test_incomplete_runs_and_stray_files_beside_cached_records(aged: dict[str, Path]) -> None:
    def mutate(d: Path) -> None:
        (d / "m" / "stray.txt").write_text("x")

    indexed = mutate_and_compare(aged["incomplete_and_stray"], mutate)
    assert len(indexed) == 2 and len(indexed.incomplete) == 1


# --- the cache is optional, and no damage to it changes an answer -------------------------


def test_a_cache_dir_that_cannot_be_written_still_reads(
    aged: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reads: list
) -> None:
    # As root, a read-only directory would still be writable; a file where the cache dir
    # should be fails for everyone.
    batch_dir = aged["unwritable"]
    (tmp_path / "cache").write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first, second = load_recorded_runs(batch_dir), load_recorded_runs(batch_dir)
    assert len(reads) == 4  # every record read, every time, and no error
    assert same(first, fresh(batch_dir)) and same(second, first)


def test_a_record_with_a_lone_surrogate_is_cached_and_read_back(
    aged: dict[str, Path], reads: list
) -> None:
    # Regression: writing such a record into the cache raised UnicodeEncodeError and aborted
    # the whole read.
    batch_dir = aged["surrogate"]
    first = load_recorded_runs(batch_dir)
    assert first[("c03", "m", 1)].result == {"text": "\ud800 cut"}
    reads.clear()
    assert same(load_recorded_runs(batch_dir), first) and reads == []


def test_a_record_with_an_integer_past_64_bits_round_trips(aged: dict[str, Path]) -> None:
    batch_dir = aged["huge_int"]
    load_recorded_runs(batch_dir)
    indexed = load_recorded_runs(batch_dir)
    assert same(indexed, fresh(batch_dir))
    # As parsed: an int by the standard library, a float by orjson.
    assert indexed[("c03", "m", 1)].extra["tokens"] == pytest.approx(10**30)


def test_a_record_past_the_size_limit_is_read_every_time(
    aged: dict[str, Path], reads: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledger_scan, "MAX_CACHED_BYTES", 2000)
    batch_dir = aged["big_record"]
    load_recorded_runs(batch_dir)
    reads.clear()
    assert load_recorded_runs(batch_dir)[("c03", "m", 1)].extra["blob"] == "x" * 5000
    assert [Path(p).parent.name.split("-")[0] for p in reads] == ["c03"]


def damage_and_compare(batch_dir: Path, damage: Callable[[Path], None], reads: list) -> None:
    load_recorded_runs(batch_dir)
    with Ledger(batch_dir) as ledger:  # the database as a long-lived reader leaves it
        ledger.load()
    damage(cache_file(batch_dir))
    assert same(load_recorded_runs(batch_dir), fresh(batch_dir))
    # And the read after it is served again from a cache made anew.
    reads.clear()
    again = load_recorded_runs(batch_dir)
    assert reads == []
    assert same(again, fresh(batch_dir))


def test_a_cache_of_garbage_is_ignored_and_made_anew(aged: dict[str, Path], reads: list) -> None:
    def garbage(path: Path) -> None:
        path.write_bytes(os.urandom(path.stat().st_size))

    damage_and_compare(aged["damaged_garbage"], garbage, reads)


def test_a_truncated_cache_is_ignored_and_made_anew(aged: dict[str, Path], reads: list) -> None:
    def truncate(path: Path) -> None:
        os.truncate(path, path.stat().st_size // 2 + 10)

    damage_and_compare(aged["damaged_truncated"], truncate, reads)


def test_a_cache_with_damaged_pages_is_ignored(aged: dict[str, Path], reads: list) -> None:
    def flip(path: Path) -> None:
        data = bytearray(path.read_bytes())
        for at in range(100, len(data), 97):  # past SQLite's header: its pages' contents
            data[at] ^= 0x5A
        path.write_bytes(bytes(data))

    batch_dir = aged["damaged_bitflip"]
    load_recorded_runs(batch_dir)
    flip(cache_file(batch_dir))
    assert same(load_recorded_runs(batch_dir), fresh(batch_dir))
    assert same(load_recorded_runs(batch_dir), fresh(batch_dir))


def test_a_cache_of_another_version_is_made_anew(aged: dict[str, Path], reads: list) -> None:
    def older(path: Path) -> None:
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA user_version = 99")

    damage_and_compare(aged["foreign_version"], older, reads)


def test_a_cache_made_by_other_reading_rules_is_not_used(
    aged: dict[str, Path], reads: list
) -> None:
    def other_reader(path: Path) -> None:
        with sqlite3.connect(path) as db:
            # Rows another reader made of these very records, cached with their signatures.
            db.execute("UPDATE about SET value = 'other' WHERE key = 'reader'")
            db.execute("UPDATE records SET fields = replace(fields, '\"passed\"', '\"error\"')")

    damage_and_compare(aged["other_reader"], other_reader, reads)


def test_a_locked_cache_is_read_around(aged: dict[str, Path], reads: list) -> None:
    batch_dir = aged["locked"]
    load_recorded_runs(batch_dir)
    path = cache_file(batch_dir)
    # Another process holds it locked for writing, out of WAL mode: nobody can read it.
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode=DELETE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        reads.clear()
        assert same(load_recorded_runs(batch_dir), fresh(batch_dir))
        assert path.exists()  # left for its holder, not removed
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    reads.clear()
    again = load_recorded_runs(batch_dir)
    assert reads == [] and same(again, fresh(batch_dir))


def forge(batch_dir: Path, case: str, change: Callable[[list[Any]], Any]) -> None:
    """Change the cached fields of ``case``'s row, its signature left as it is."""
    with sqlite3.connect(cache_file(batch_dir)) as db:
        (fields,) = db.execute(
            "SELECT fields FROM records WHERE run_dir LIKE ?", (f"{case}-%",)
        ).fetchone()
        value = change(json.loads(fields))
        db.execute("UPDATE records SET fields = ? WHERE run_dir LIKE ?", (value, f"{case}-%"))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("test_case", "7"),
        ("test_case", '""'),
        ("model", '"\\udc80"'),
        ("outcome", '"weird"'),
        ("attempt", '"2"'),
        ("attempt", "0"),
        ("attempt", "true"),
        ("repeat", "0"),
        ("duration_seconds", "Infinity"),
        ("duration_seconds", "1" + "0" * 400),
        ("result", "[]"),
        ("usage_total", '"lots"'),
        ("steps", "{}"),
    ],
)
def test_a_forged_field_no_record_reads_as_is_read_afresh(
    aged: dict[str, Path], reads: list, field: str, value: str
) -> None:
    # A cached row with the right signature is no more trusted than its record: nothing in
    # it may be what no record reads as (docs/ledger.md, "What the cache trusts").
    batch_dir = aged["damaged_wrong_values"]
    load_recorded_runs(batch_dir)
    at = ledger_cache.STORED_FIELDS.index(field)

    def change(fields: list[Any]) -> bytes:
        text = [json.dumps(v) for v in fields]
        text[at] = value
        return ("[" + ",".join(text) + "]").encode()

    forge(batch_dir, "c01", change)
    reads.clear()
    got = load_recorded_runs(batch_dir)
    assert reads  # read afresh
    assert same(got, fresh(batch_dir))


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("fields", b"{"),
        ("fields", b"[1]"),
        ("fields", b"[]"),
        ("fields", "text, not a blob"),
        ("fields", b'["c01"],["c02"'),
        ("fields", None),
        ("error", 5),
        ("ino", "x"),
        ("run_dir", 5),
    ],
)
def test_a_forged_row_is_read_afresh(
    aged: dict[str, Path], reads: list, column: str, value: Any
) -> None:
    batch_dir = aged["damaged_wrong_values"]
    load_recorded_runs(batch_dir)
    with sqlite3.connect(cache_file(batch_dir)) as db:
        db.execute(f"UPDATE records SET {column} = ? WHERE run_dir LIKE 'c01-%'", (value,))
    reads.clear()
    got = load_recorded_runs(batch_dir)
    assert reads  # read afresh
    assert same(got, fresh(batch_dir))


def test_a_forged_value_longer_than_any_cached_record_is_never_read_into_memory(
    aged: dict[str, Path], reads: list
) -> None:
    batch_dir = aged["damaged_wrong_values"]
    load_recorded_runs(batch_dir)
    with sqlite3.connect(cache_file(batch_dir)) as db:
        db.execute("UPDATE records SET fields = zeroblob(?)", (ledger_cache.MAX_VALUE_BYTES + 1,))
    assert same(load_recorded_runs(batch_dir), fresh(batch_dir))
    # The database holding it was made anew: the next read is served from it again.
    load_recorded_runs(batch_dir)
    reads.clear()
    again = load_recorded_runs(batch_dir)
    assert reads == [] and same(again, fresh(batch_dir))


def test_every_way_a_dir_differs_from_its_cached_rows_reads_as_uncached(
    aged: dict[str, Path], reads: list
) -> None:
    batch_dir = aged["every_change"]
    load_recorded_runs(batch_dir)
    rewrite_in_place(record_path(batch_dir, "c01"), b'"passed"', b'"failed"')
    os.truncate(record_path(batch_dir, "c02"), 30)
    write_record(batch_dir, "c08", "m")  # new, within the racy window
    fifo_dir = batch_dir / "m" / "c09-fifo"
    fifo_dir.mkdir()
    os.mkfifo(fifo_dir / "run-meta.json")
    write_record(batch_dir, "c10", "m", raw=make_meta("c10", "m", blob="x" * (1 << 20)))
    run_dir = record_path(batch_dir, "c03").parent
    for child in run_dir.iterdir():
        child.unlink()
    run_dir.rmdir()
    reads.clear()
    got = load_recorded_runs(batch_dir)
    assert sorted(Path(p).parent.name[:3] for p in reads) == ["c01", "c02", "c08", "c10"]
    assert same(got, fresh(batch_dir))
    assert not [row for row in cached_rows(batch_dir) if row[1].startswith("c03-")]


# --- writers and readers at once -------------------------------------------------------------


def test_a_record_the_driver_wrote_is_served_without_a_parse(tmp_path: Path, reads: list) -> None:
    from run_support.results import RunMeta, write_run_meta

    for n in range(3):
        run_dir = tmp_path / "m" / f"c{n}-m-a1"
        run_dir.mkdir(parents=True)
        meta = RunMeta(f"c{n}", "m", "passed", run_dir=f"m/{run_dir.name}", result={"n": n})
        write_run_meta(run_dir, meta, fsync=False)
    cached = load_recorded_runs(tmp_path)
    assert reads == []
    assert same(cached, fresh(tmp_path))


WRITER = """
import sys
from pathlib import Path
from run_support.results import RunMeta, write_run_meta
batch_dir, count = Path(sys.argv[1]), int(sys.argv[2])
for n in range(count):
    run_dir = batch_dir / "m" / f"c{n:04d}-m-a1"
    run_dir.mkdir(parents=True)
    write_run_meta(run_dir, RunMeta(f"c{n:04d}", "m", "passed", run_dir=f"m/{run_dir.name}"),
                   fsync=False)
"""


def test_two_readers_beside_a_writing_driver_see_what_a_plain_read_sees(tmp_path: Path) -> None:
    # A driver writing records (each one put in the cache as it is written), a resume and a
    # status reading the same batch meanwhile: each read is what a read without the cache
    # gives of the records there were, and once the writer is done, all agree.
    count = 300
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(count)], env=env)
    problems: list[str] = []

    def reader() -> None:
        try:
            while writer.poll() is None:
                got = load_recorded_runs(tmp_path)
                # Never more than the files: each record it names is one there now.
                for meta in got.values():
                    assert (tmp_path / str(meta.run_dir) / "run-meta.json").is_file()
        except Exception as exc:
            problems.append(repr(exc))

    readers = [threading.Thread(target=reader) for _ in range(2)]
    for thread in readers:
        thread.start()
    assert writer.wait(120) == 0
    for thread in readers:
        thread.join()
    assert problems == []
    final = load_recorded_runs(tmp_path)
    assert same(final, fresh(tmp_path)) and len(final) == count


@pytest.fixture
def no_gc_leak() -> Iterator[None]:
    yield
    assert gc.isenabled()


def test_the_collector_is_back_on_after_a_read(tmp_path: Path, no_gc_leak: None) -> None:
    write_record(tmp_path, raw="{")
    load_recorded_runs(tmp_path)


def test_a_fifo_in_place_of_a_record_is_unreadable_not_a_hang(tmp_path: Path) -> None:
    # Opening a FIFO for reading blocks until a writer comes: resume, plan and status hung.
    run_dir = tmp_path / "m" / "c1-m-20261130T000000000000Z-a1"
    run_dir.mkdir(parents=True)
    os.mkfifo(run_dir / "run-meta.json")
    recorded = load_recorded_runs(tmp_path)
    assert dict(recorded) == {}
    assert recorded.unreadable == [(f"m/{run_dir.name}/run-meta.json", "not a regular file")]


def test_names_no_encoding_can_decode_are_read_the_same_with_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A model dir and a run dir whose names are not UTF-8 (read with surrogateescape), and a
    # lone surrogate in a record: SQLite takes no such text; the read must not fail on them.
    monkeypatch.setattr(ledger_scan, "RACY_WINDOW_NS", -(10**15))
    odd_run = os.fsdecode(b"r\xfe")
    write_record(tmp_path, "c01", "m", dir_name=os.fsdecode(b"model\xff/") + odd_run)
    write_record(tmp_path, "c02", "m", dir_name=os.fsdecode(b"m/r\xfe"), reason="\udc80 cut")
    write_record(tmp_path, "c03", "m")
    first, second = load_recorded_runs(tmp_path), load_recorded_runs(tmp_path)
    assert same(first, fresh(tmp_path)) and same(second, first)
    assert sorted(case for case, _, _ in first) == ["c01", "c02", "c03"]
