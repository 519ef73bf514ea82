"""Finding records, and the ledger index: it speeds reads up and never returns a stale record.

Most index tests need records older than the racy window (only those are cached), so one
module fixture writes a ledger per test and waits out the window once.
"""

from __future__ import annotations

import gc
import itertools
import json
import os
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.builders import make_meta, start_run, write_record

from run_support import ledger_fstat, ledger_index, ledger_scan, results
from run_support.ledger_index import INDEX_SCHEMA, RAW_JSON, Digest, gc_paused
from run_support.ledger_scan import RACY_WINDOW_NS, read_ledger_files
from run_support.names import INDEX_NAME
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
    "read_only",
    "update_off",
    "surrogate",
    "huge_int",
    "big_record",
    "other_digest",
    "damaged_garbage",
    "damaged_truncated",
    "damaged_bitflip",
    "damaged_json_v1",
    "damaged_shapes",
    "damaged_wrong_values",
    "incomplete_and_stray",
    "by_column",
    "by_column_racy",
]


STATS_WHERE = ["stats here", "stats in children"]


@pytest.fixture(scope="module", params=STATS_WHERE)
def stats_where(request: pytest.FixtureRequest) -> str:
    """Every test runs twice: with the stats taken by the reader, and by forked children
    (``run_support.ledger_fstat``; a real batch gets them past ``CHILD_MIN_BYTES``)."""
    return str(request.param)


@pytest.fixture(autouse=True)
def _stats_where(stats_where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if stats_where == "stats in children":
        monkeypatch.setattr(ledger_scan, "CHILD_MIN_BYTES", 0)
        monkeypatch.setattr(ledger_fstat, "_usable_cores", lambda: 2)
        monkeypatch.setattr(ledger_fstat, "_other_threads", lambda: False)


@pytest.fixture(scope="module")
def aged_ledgers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Path]]:
    """Per ``stats_where``, one batch dir per test, each with two records, all older than
    the racy window: written for both runs of the module at once, so it is waited out once."""
    ledgers = {}
    for where in STATS_WHERE:
        dirs = {}
        for name in AGED:
            batch_dir = tmp_path_factory.mktemp(name)
            write_record(batch_dir, "c01", "m", outcome="passed", at=0)
            write_record(batch_dir, "c02", "m", outcome="failed", at=0)
            dirs[name] = batch_dir
        special = dirs["surrogate"]
        write_record(special, "c03", "m", raw='{"test_case": "c03", "model": "m", '
                     '"outcome": "passed", "result": {"text": "\\ud800 cut"}}')  # fmt: skip
        write_record(dirs["huge_int"], "c03", "m", raw=make_meta("c03", "m", tokens=10**30))
        write_record(dirs["big_record"], "c03", "m", raw=make_meta("c03", "m", blob="x" * 5000))
        start_run(dirs["incomplete_and_stray"], "c03", "m")
        for n in range(3, 8):
            write_record(dirs["by_column"], f"c{n:02d}", "m", outcome="error", at=0)
            write_record(dirs["by_column_racy"], f"c{n:02d}", "m", outcome="error", at=0)
        ledgers[where] = dirs
    time.sleep(RACY_WINDOW_NS / 1e9 + 0.2)
    return ledgers


@pytest.fixture(scope="module")
def aged(aged_ledgers: dict[str, dict[str, Path]], stats_where: str) -> dict[str, Path]:
    """This run's batch dirs (see ``aged_ledgers``)."""
    return aged_ledgers[stats_where]


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
    # In this process, where the threads can be seen (a child spreads its stats the same).
    monkeypatch.setattr(ledger_scan, "CHILD_MIN_BYTES", 1 << 62)
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
    assert read_ledger_files(tmp_path / "file").model_dirs == []


def test_records_come_back_in_path_order_with_the_raw_json(tmp_path: Path) -> None:
    write_record(tmp_path, "c02", "b", dir_name="r2")
    write_record(tmp_path, "c01", "a", dir_name="r1")
    write_record(tmp_path, "c03", "b", dir_name="r1", raw="{")
    files = list(read_ledger_files(tmp_path).files())
    assert [(path, error is None) for path, _, error in files] == [
        ("a/r1", True),
        ("b/r1", False),
        ("b/r2", True),
    ]
    assert files[0][1]["test_case"] == "c01"


def test_gc_paused_restores_the_collector_as_it_was() -> None:
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


# --- the index serves unchanged records ---------------------------------------------------


def test_unchanged_records_are_served_from_the_index(aged: dict[str, Path], reads: list) -> None:
    batch_dir = aged["served"]
    first = load_recorded_runs(batch_dir)
    assert len(reads) == 2 and (batch_dir / INDEX_NAME).exists()
    reads.clear()
    assert same(load_recorded_runs(batch_dir), first)
    assert reads == []


def test_on_a_local_disk_the_index_keys_each_record_on_its_inode(aged: dict[str, Path]) -> None:
    # As every other test here shows, a same-size replacement with its mtime put back is
    # caught by the inode and the ctime; on a local disk the index holds both.
    batch_dir = aged["served"]
    load_recorded_runs(batch_dir)
    (block,) = ledger_index.load_index(batch_dir / INDEX_NAME, results._RUN_META_DIGEST).values()
    stats = [os.stat(p) for p in sorted(batch_dir.glob("*/*/run-meta.json"))]
    assert block[1] == [st.st_ino for st in stats] and 0 not in block[1]
    assert block[4] == [st.st_ctime_ns for st in stats]


def test_a_warm_call_rewrites_nothing(aged: dict[str, Path]) -> None:
    batch_dir = aged["warm_no_rewrite"]
    load_recorded_runs(batch_dir)
    before = os.stat(batch_dir / INDEX_NAME)
    load_recorded_runs(batch_dir)
    after = os.stat(batch_dir / INDEX_NAME)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


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


# --- the index is never stale -------------------------------------------------------------


def mutate_and_compare(batch_dir: Path, mutate: Callable[[Path], None]) -> RecordedRuns:
    load_recorded_runs(batch_dir)  # builds the index with both records cached
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


# --- the index is optional ----------------------------------------------------------------


def test_a_batch_dir_where_the_index_cannot_be_written_still_reads(
    aged: dict[str, Path],
) -> None:
    batch_dir = aged["read_only"]
    # As root, a read-only directory would still be writable; a directory where the index
    # file should be fails the write the same way for everyone.
    (batch_dir / INDEX_NAME).mkdir()
    assert same(load_recorded_runs(batch_dir), fresh(batch_dir))
    assert (batch_dir / INDEX_NAME).is_dir()
    assert [p.name for p in batch_dir.iterdir() if p.name.endswith(".tmp")] == []


def test_update_index_off_never_writes_the_index(aged: dict[str, Path]) -> None:
    batch_dir = aged["update_off"]
    load_recorded_runs(batch_dir, update_index=False)
    assert not (batch_dir / INDEX_NAME).exists()
    load_recorded_runs(batch_dir)
    before = (batch_dir / INDEX_NAME).read_bytes()
    write_record(batch_dir, "c09", "m", at=99)
    os.truncate(record_path(batch_dir, "c01"), 10)
    assert same(load_recorded_runs(batch_dir, update_index=False), fresh(batch_dir))
    assert (batch_dir / INDEX_NAME).read_bytes() == before


def test_a_record_with_a_lone_surrogate_is_cached_and_read_back(
    aged: dict[str, Path], reads: list
) -> None:
    # Regression: writing such a record into the index raised UnicodeEncodeError and aborted
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


def test_an_index_built_by_another_reader_is_not_used(aged: dict[str, Path]) -> None:
    batch_dir = aged["other_digest"]
    read_ledger_files(batch_dir, digest=RAW_JSON)  # caches the raw JSON
    shouting = Digest(id="shout", make=lambda raw: {k: str(v).upper() for k, v in raw.items()})
    files = {
        path: value for path, value, _ in read_ledger_files(batch_dir, digest=shouting).files()
    }
    assert {value["outcome"] for value in files.values()} == {"PASSED", "FAILED"}


# --- a damaged index is ignored -----------------------------------------------------------


def index_bytes(header: dict[str, Any], body: bytes) -> bytes:
    return json.dumps(header).encode() + b"\n" + body


def forged(batch_dir: Path, blocks: Any) -> bytes:
    """An index in the current format, with a correct checksum, holding ``blocks``."""
    head, _, _ = (batch_dir / INDEX_NAME).read_bytes().partition(b"\n")
    header = json.loads(head)
    body = json.dumps(blocks).encode()
    return index_bytes(header | {"bytes": len(body), "crc32": zlib.crc32(body)}, body)


def damage_and_compare(batch_dir: Path, damage: Callable[[bytes], bytes]) -> None:
    load_recorded_runs(batch_dir)
    index = batch_dir / INDEX_NAME
    index.write_bytes(damage(index.read_bytes()))
    assert same(load_recorded_runs(batch_dir), fresh(batch_dir))
    # And the next call repairs it.
    assert same(load_recorded_runs(batch_dir), fresh(batch_dir))


def test_an_index_of_garbage_is_ignored(aged: dict[str, Path]) -> None:
    damage_and_compare(aged["damaged_garbage"], lambda data: os.urandom(len(data)))


def test_a_truncated_index_is_ignored(aged: dict[str, Path]) -> None:
    damage_and_compare(aged["damaged_truncated"], lambda data: data[: len(data) // 2])


def test_an_index_with_a_flipped_byte_is_ignored(aged: dict[str, Path], reads: list) -> None:
    def flip(data: bytes) -> bytes:
        at = len(data) - 20
        return data[:at] + bytes([data[at] ^ 0x20]) + data[at + 1 :]

    damage_and_compare(aged["damaged_bitflip"], flip)
    assert len(reads) >= 4  # both records read again after the damage was found


def test_a_damaged_index_from_an_older_version_is_ignored(aged: dict[str, Path]) -> None:
    # Regression: entries that were not lists raised TypeError and aborted the read.
    old = {"schema": 1, "entries": {"m/r/run-meta.json": 5, "m/s/run-meta.json": {"a": 1}}}
    damage_and_compare(aged["damaged_json_v1"], lambda _: json.dumps(old).encode())


@pytest.mark.parametrize(
    "blocks",
    [
        [1, 2, 3],
        {"m": 5},
        {"m": [[], [], []]},
        {"m": [["x"], [1], [2], [3], [4], [5], []]},
        {"m": [[1], [2], [3], [4], [5], [6], [7]]},
    ],
)
def test_an_index_of_the_wrong_shape_is_ignored(aged: dict[str, Path], blocks: Any) -> None:
    batch_dir = aged["damaged_shapes"]
    load_recorded_runs(batch_dir)
    (batch_dir / INDEX_NAME).write_bytes(forged(batch_dir, blocks))
    assert same(load_recorded_runs(batch_dir), fresh(batch_dir))


def cached_block(batch_dir: Path) -> list[list[Any]]:
    body = (batch_dir / INDEX_NAME).read_bytes().partition(b"\n")[2]
    return json.loads(body)["m"]


@pytest.mark.parametrize(
    ("column", "value"),
    [(5, ["not", "the", "right", "shape"]), (5, None), (6, 7), (5, "passed")],
)
def test_forged_entries_with_matching_signatures_are_read_afresh(
    aged: dict[str, Path], column: int, value: Any
) -> None:
    batch_dir = aged["damaged_wrong_values"]
    load_recorded_runs(batch_dir)
    block = cached_block(batch_dir)
    block[column][0] = value
    (batch_dir / INDEX_NAME).write_bytes(forged(batch_dir, {"m": block}))
    assert same(load_recorded_runs(batch_dir), fresh(batch_dir))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("test_case", 7),
        ("test_case", ""),
        ("model", "\ud800"),
        ("outcome", "weird"),
        ("attempt", "2"),
        ("attempt", 0),
        ("attempt", True),
        ("duration_seconds", 10**400),
        ("result", []),
        ("usage_total", "lots"),
    ],
)
def test_a_forged_digest_no_record_reads_as_is_read_afresh(
    aged: dict[str, Path], field: str, value: Any
) -> None:
    # A cache entry with the right signature is no more trusted than its record: nothing
    # in it may be what no record reads as (docs/ledger.md, "What the cache trusts").
    batch_dir = aged["damaged_wrong_values"]
    load_recorded_runs(batch_dir)
    block = cached_block(batch_dir)
    block[5][0][results._ALL_FIELDS.index(field)] = value
    (batch_dir / INDEX_NAME).write_bytes(forged(batch_dir, {"m": block}))
    assert same(load_recorded_runs(batch_dir), fresh(batch_dir))


GOOD = ["c01", *[None] * (len(results._ALL_FIELDS) - 1)]  # a digest's shape


@pytest.mark.parametrize(
    "values",
    [
        [],
        [GOOD, list(GOOD)],
        [GOOD, tuple(GOOD)],
        [GOOD, GOOD[:-1]],
        [GOOD, [*GOOD, None]],
        [GOOD, [1, *GOOD[1:]]],
        [GOOD, [None, *GOOD[1:]]],
        [GOOD, []],
        [GOOD, None],
        [GOOD, "c01"],
        [[b"c01", *GOOD[1:]]],
    ],
)
def test_a_block_of_entries_is_checked_as_each_entry_would_be(values: list[Any]) -> None:
    # The index's entries are checked a block at a time (_are_digests): exactly as one by one.
    assert results._are_digests(values) == all(map(results._is_digest, values))


def test_a_block_compared_a_column_at_a_time_reads_as_record_by_record(
    aged: dict[str, Path],
) -> None:
    # Every way a model dir's records can differ from its cached block, at once.
    batch_dir = aged["by_column"]
    load_recorded_runs(batch_dir)
    rewrite_in_place(record_path(batch_dir, "c01"), b'"passed"', b'"failed"')
    os.truncate(record_path(batch_dir, "c02"), 30)
    write_record(batch_dir, "c08", "m")  # new, within the racy window
    fifo_dir = batch_dir / "m" / "c09-fifo"
    fifo_dir.mkdir()
    os.mkfifo(fifo_dir / "run-meta.json")
    write_record(batch_dir, "c10", "m", raw=make_meta("c10", "m", blob="x" * (1 << 20)))
    block = ledger_index.load_index(batch_dir / INDEX_NAME, results._RUN_META_DIGEST)["m"]
    block[5][2] = ["forged"]  # c03's entry, of the wrong shape, its signature intact
    found = ledger_fstat.stat_dir(batch_dir, "m", ledger_fstat.Stats())
    assert found is not None and not found.failed
    cached_dirs, columns = ledger_index.aligned(block, found.names)

    now = time.time_ns()
    # by_path: as on a filesystem that numbers inodes per mount (the block keeps inode 0).
    for cacheable_before, by_path in itertools.product(
        (now - RACY_WINDOW_NS, now + RACY_WINDOW_NS), (False, True)
    ):
        args = (batch_dir, "m", found, cached_dirs, columns, results._RUN_META_DIGEST)
        by_column = ledger_scan._scan_by_column(*args, cacheable_before, by_path)
        incomplete: list[str] = []
        one_by_one = ledger_scan._scan_one_by_one(*args, cacheable_before, incomplete, by_path)
        assert by_column == one_by_one and incomplete == []
        # c01, c02, c03, c08 and c10 read; the FIFO not; the block changed.
        assert by_column[2:] == (True, 5)
        assert set(by_column[1][1]) <= ({0} if by_path else set(found.inodes))


def test_a_record_added_within_the_racy_window_leaves_the_block_unchanged(
    aged: dict[str, Path],
) -> None:
    # Read, not cached, and nothing else differs: no index to write, column by column too.
    batch_dir = aged["by_column_racy"]
    load_recorded_runs(batch_dir)
    write_record(batch_dir, "c08", "m")
    block = ledger_index.load_index(batch_dir / INDEX_NAME, results._RUN_META_DIGEST)["m"]
    found = ledger_fstat.stat_dir(batch_dir, "m", ledger_fstat.Stats())
    assert found is not None
    cached_dirs, columns = ledger_index.aligned(block, found.names)
    args = (batch_dir, "m", found, cached_dirs, columns, results._RUN_META_DIGEST)
    cacheable_before = time.time_ns() - RACY_WINDOW_NS

    by_column = ledger_scan._scan_by_column(*args, cacheable_before, False)

    assert by_column == ledger_scan._scan_one_by_one(*args, cacheable_before, [], False)
    assert by_column[1] == block and by_column[2:] == (False, 1)


def test_the_index_header_names_its_format(aged: dict[str, Path]) -> None:
    batch_dir = aged["served"]
    load_recorded_runs(batch_dir)
    head = json.loads((batch_dir / INDEX_NAME).read_bytes().partition(b"\n")[0])
    assert head["schema"] == INDEX_SCHEMA and head["digest"].startswith("run-meta/1/")


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
