"""The ledger journal: the index is current when the driver dies, and still never stale.

Records are written through ``write_run_meta`` exactly as the runner writes them (its run
dir layout, ``meta.run_dir`` naming it); ``reads`` counts the records a reader parsed from
their files rather than took from the index or the journal.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
from helpers.builders import write_like_the_runner

from run_support import ledger_index, ledger_journal, results
from run_support.names import INDEX_NAME, JOURNAL_NAME
from run_support.results import (
    RecordedRuns,
    RunMeta,
    load_recorded_runs,
    write_run_meta,
)

MODELS = ("prov/a", "prov/b")
CASES = tuple(f"c{n:02d}" for n in range(6))


def write_batch(batch_dir: Path) -> list[Path]:
    """A batch left by a driver that died: every record and the journal, no index."""
    paths = [write_like_the_runner(batch_dir, c, m) for m in MODELS for c in CASES]
    assert not (batch_dir / INDEX_NAME).exists()
    assert (batch_dir / JOURNAL_NAME).is_file()
    return paths


def fresh(batch_dir: Path) -> RecordedRuns:
    """What a reader without any cache makes of the batch dir."""
    return load_recorded_runs(batch_dir, use_index=False)


def served_from_cache(batch_dir: Path, reads: list[str]) -> RecordedRuns:
    """A read-only read that parses no record and finds what a reader without cache finds."""
    expected = fresh(batch_dir)
    reads.clear()
    found = load_recorded_runs(batch_dir, update_index=False)
    assert reads == []
    assert found == expected
    return found


def listing(batch_dir: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every hidden file of the batch dir with its inode, mtime and bytes."""
    return {
        p.name: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes())
        for p in batch_dir.iterdir()
        if p.name.startswith(".")
    }


def test_a_batch_the_driver_died_on_is_read_without_parsing_a_record(
    tmp_path: Path, reads: list[str]
) -> None:
    write_batch(tmp_path)
    expected = fresh(tmp_path)
    reads.clear()

    found = load_recorded_runs(tmp_path, update_index=False)

    assert reads == []
    assert found == expected
    assert len(found) == len(MODELS) * len(CASES)
    assert [m.run_dir for m in found.values()] == [m.run_dir for m in expected.values()]


def test_a_read_only_reader_writes_nothing_and_a_writing_one_folds_the_journal(
    tmp_path: Path, reads: list[str]
) -> None:
    write_batch(tmp_path)
    expected = fresh(tmp_path)
    before = listing(tmp_path)
    reads.clear()

    for _ in range(2):
        assert load_recorded_runs(tmp_path, update_index=False) == expected
    assert listing(tmp_path) == before

    assert load_recorded_runs(tmp_path) == expected
    assert (tmp_path / INDEX_NAME).is_file()
    assert not (tmp_path / JOURNAL_NAME).exists()
    assert load_recorded_runs(tmp_path) == expected
    assert reads == []


def test_a_record_written_after_the_fold_is_journaled_anew(
    tmp_path: Path, reads: list[str]
) -> None:
    write_batch(tmp_path)
    load_recorded_runs(tmp_path)  # folds
    write_like_the_runner(tmp_path, "c99", "prov/a", outcome="failed")

    found = served_from_cache(tmp_path, reads)

    assert found[("c99", "prov/a", 1)].outcome == "failed"


def test_a_torn_last_line_and_a_damaged_line_are_skipped(tmp_path: Path, reads: list[str]) -> None:
    paths = write_batch(tmp_path)
    journal = tmp_path / JOURNAL_NAME
    lines = journal.read_bytes().splitlines(keepends=True)
    # Line 3 with one byte changed (its checksum no longer matches), and the last line cut
    # mid-way, as a SIGKILL during the append leaves it.
    middle = len(lines[2]) // 2
    flipped = b"A" if lines[2][middle : middle + 1] != b"A" else b"B"
    damaged = lines[2][:middle] + flipped + lines[2][middle + 1 :]
    journal.write_bytes(b"".join([*lines[:2], damaged, *lines[3:-1], lines[-1][:40]]))
    reads.clear()

    found = load_recorded_runs(tmp_path, update_index=False)

    assert sorted(reads) == sorted([str(paths[2]), str(paths[-1])])
    assert found == fresh(tmp_path)
    assert all(meta.outcome == "passed" for meta in found.values())


def test_garbage_in_the_journal_is_ignored(tmp_path: Path, reads: list[str]) -> None:
    write_batch(tmp_path)
    journal = tmp_path / JOURNAL_NAME
    garbage = b"\x00" * 100 + b"\nnot a line\n0000zzzz [1]\n" + b"x" * 100_000 + b"\n"
    journal.write_bytes(garbage + journal.read_bytes())
    expected = fresh(tmp_path)
    reads.clear()

    assert load_recorded_runs(tmp_path, update_index=False) == expected
    assert reads == []


def checksummed(payload: bytes) -> bytes:
    """A journal line of ``payload`` whose checksum matches (as only a forger makes one
    for a payload that is not a writer's)."""
    return b"%08x %s\n" % (zlib.crc32(payload), payload)


@pytest.mark.parametrize(
    "payload",
    [
        b'["%(id)s","prov_a","r1",1,2,3,4,{"cut":',  # the dir named, the rest not JSON
        b'["%(id)s","prov_a"]',  # too short
        b'["%(id)s","prov_a",7,1,2,3,4,null]',  # run dir not text
        b'["%(id)s",5,"r1",1,2,3,4,null]',  # dir not text
        b'["%(id)s","prov_\xff",1]',  # not ASCII
        b'["another/digest","prov_a","r1",1,2,3,4,null]',
        b'[ "%(id)s","prov_a","r1",1,2,3,4,null]',  # not how a writer spaces it
    ],
)
def test_a_line_with_a_good_checksum_but_no_entry_is_skipped(
    tmp_path: Path, reads: list[str], payload: bytes
) -> None:
    # Only the digest id and the dir are decoded as the journal is read; the rest of a line
    # when a scan reaches its dir. A line that then fails is skipped there, alone.
    write_batch(tmp_path)
    digest_id = results._RUN_META_DIGEST.id.encode()
    journal = tmp_path / JOURNAL_NAME
    journal.write_bytes(journal.read_bytes() + checksummed(payload % {b"id": digest_id}))
    served_from_cache(tmp_path, reads)


def test_a_dirs_lines_are_read_when_it_is_taken_and_a_later_line_wins(tmp_path: Path) -> None:
    digest = ledger_index.Digest(id="d", make=lambda raw: raw)
    journal = tmp_path / JOURNAL_NAME
    journal.write_bytes(
        checksummed(b'["d","a","r1",1,2,3,4,"old"]')
        + checksummed(b'["d","b","r1",1,2,3,4,"b"]')
        + checksummed(b'["e","a","r1",1,2,3,4,"another digest"]')
        + checksummed(b'["d","a","r1",1,2,3,5,"new"]')
        + checksummed(b'["d","a","r2",1,2,3,4')  # cut: skipped alone
        + b"00000000 torn"
    )
    lines, _ = ledger_journal.load_journal(journal, digest)
    # Replaced by a fold since: the lines are read from the file that was checked.
    journal.unlink()
    assert set(lines.keys()) == {"a", "b"}
    assert lines.take("a") == {"r1": (1, 2, 3, 5, "new")}
    assert lines.take("a") is None  # taken once
    assert dict(lines.items()) == {"b": {"r1": (1, 2, 3, 4, "b")}}
    assert not lines


def test_a_read_leaves_no_journal_open(tmp_path: Path) -> None:
    write_batch(tmp_path)
    writers = open_journals()  # the writer keeps its journal open for the next record
    found = load_recorded_runs(tmp_path, update_index=False)
    assert len(found) == len(MODELS) * len(CASES)
    assert open_journals() == writers


def test_records_changed_behind_the_drivers_back_after_their_journal_line_are_seen(
    tmp_path: Path, reads: list[str]
) -> None:
    paths = write_batch(tmp_path)
    same_size, replaced, deleted, truncated = paths[0], paths[1], paths[2], paths[3]

    # In place, same size, mtime put back: only the ctime tells.
    st = same_size.stat()
    data = same_size.read_bytes()
    edited = data.replace(b'"passed"', b'"failed"')
    assert len(edited) == len(data) and edited != data
    with open(same_size, "r+b") as handle:
        handle.write(edited)
    os.utime(same_size, ns=(st.st_atime_ns, st.st_mtime_ns))
    # Another file put in its place.
    other = replaced.with_name("other.json")
    other.write_bytes(replaced.read_bytes().replace(b'"passed"', b'"error"'))
    os.replace(other, replaced)
    deleted.unlink()
    truncated.write_bytes(b"")
    reads.clear()

    found = load_recorded_runs(tmp_path, update_index=False)

    assert sorted(reads) == sorted(map(str, [same_size, replaced, truncated]))
    assert found == fresh(tmp_path)
    assert found[(CASES[0], MODELS[0], 1)].outcome == "failed"
    assert found[(CASES[1], MODELS[0], 1)].outcome == "error"
    assert (CASES[2], MODELS[0]) not in found
    assert str(deleted.parent.relative_to(tmp_path)) in found.incomplete
    assert (f"{truncated.parent.relative_to(tmp_path)}/run-meta.json", "empty file") in (
        found.unreadable
    )


def test_a_record_written_elsewhere_leaves_no_journal(tmp_path: Path) -> None:
    run_dir = tmp_path / "batch" / "model" / "run"
    run_dir.mkdir(parents=True)
    write_run_meta(run_dir, RunMeta(test_case="c", model="m", outcome="passed"))
    write_run_meta(tmp_path / "batch", RunMeta(test_case="c", model="m", outcome="passed"))

    assert [p.name for p in tmp_path.rglob(".*")] == []


def test_a_journal_that_is_a_fifo_or_a_symlink_is_neither_blocked_on_nor_followed(
    tmp_path: Path, reads: list[str]
) -> None:
    fifo_batch, link_batch = tmp_path / "fifo", tmp_path / "link"
    fifo_batch.mkdir()
    link_batch.mkdir()
    os.mkfifo(fifo_batch / JOURNAL_NAME)
    outside = tmp_path / "outside.txt"
    outside.write_text("mine\n")
    (link_batch / JOURNAL_NAME).symlink_to(outside)

    started = time.monotonic()
    for batch_dir in (fifo_batch, link_batch):
        write_like_the_runner(batch_dir, "c1", "prov/a")
        assert load_recorded_runs(batch_dir)[("c1", "prov/a", 1)].outcome == "passed"
    assert time.monotonic() - started < 10

    assert outside.read_text() == "mine\n"
    assert len(reads) == 2


_WRITER = """
import sys
from pathlib import Path
from helpers.builders import make_meta, run_path
from run_support.results import run_meta_from_dict, write_run_meta
batch_dir, model = Path(sys.argv[1]), sys.argv[2]
for n in range(150):
    case = f"c{n:03d}"
    run_dir = run_path(batch_dir, case, model)
    run_dir.mkdir(parents=True, exist_ok=True)
    rel = run_dir.relative_to(batch_dir).as_posix()
    meta = run_meta_from_dict(make_meta(case, model, run_dir=rel, result={"pad": "x" * 2000}))
    meta.run_dir = rel
    write_run_meta(run_dir, meta, fsync=False)
"""


def test_appends_from_several_processes_never_interleave(tmp_path: Path, reads: list[str]) -> None:
    tests_dir = Path(__file__).resolve().parents[3] / "tests"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tests_dir.parent), str(tests_dir)]))
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), f"prov/w{n}"], env=env)
        for n in range(3)
    ]
    assert [w.wait(timeout=120) for w in writers] == [0, 0, 0]
    lines = (tmp_path / JOURNAL_NAME).read_bytes().split(b"\n")

    assert lines.pop() == b""
    assert len(lines) == 450
    reads.clear()
    found = load_recorded_runs(tmp_path, update_index=False)
    assert reads == []
    assert len(found) == 450
    assert found == fresh(tmp_path)


@pytest.mark.parametrize("how", ["journal", "index", "fresh"])
def test_records_share_one_object_per_model_outcome_and_batch_id(tmp_path: Path, how: str) -> None:
    # 100,000 records name ten models: one string each, not one per record (memory).
    write_batch(tmp_path)
    if how == "index":
        load_recorded_runs(tmp_path)  # folds the journal into the index
    found = load_recorded_runs(tmp_path, use_index=how != "fresh", update_index=False)

    metas = [meta for (_, model, _), meta in found.items() if model == MODELS[0]]
    assert len(metas) == len(CASES)
    for field in ("model", "outcome", "batch_id"):
        assert len({id(getattr(meta, field)) for meta in metas}) == 1, field


def test_the_journal_is_opened_once_for_many_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    real = ledger_journal.safe_files.open_append_fd

    def counting(path: Path | str) -> int:
        opened.append(os.fspath(path))
        return real(path)

    monkeypatch.setattr(ledger_journal.safe_files, "open_append_fd", counting)
    write_batch(tmp_path)

    assert opened == [str(tmp_path / JOURNAL_NAME)]
    assert len((tmp_path / JOURNAL_NAME).read_bytes().splitlines()) == len(MODELS) * len(CASES)


def open_journals() -> list[str]:
    """The journals this process holds open, by the paths their descriptors name."""
    fds = Path("/proc/self/fd")
    named = (os.readlink(fds / fd) for fd in os.listdir(fds) if (fds / fd).is_symlink())
    return [name for name in named if name.endswith(JOURNAL_NAME)]


def test_a_closed_journal_leaves_nothing_open_and_the_next_record_reopens_it(
    tmp_path: Path, reads: list[str]
) -> None:
    # What lets a filesystem the driver wrote to be unmounted (tests remount sshfs).
    write_like_the_runner(tmp_path, "c01", "prov/a")
    assert open_journals() == [str(tmp_path / JOURNAL_NAME)]

    ledger_journal.close_journal()
    assert open_journals() == []
    write_like_the_runner(tmp_path, "c02", "prov/a")

    assert open_journals() == [str(tmp_path / JOURNAL_NAME)]
    assert len(served_from_cache(tmp_path, reads)) == 2


def test_a_record_written_after_another_writer_started_a_new_journal_goes_to_it(
    tmp_path: Path, reads: list[str]
) -> None:
    write_batch(tmp_path)
    load_recorded_runs(tmp_path)  # folds and removes the journal this process keeps open
    # Another writer (a Dask worker) appended first: the path names a new file.
    (tmp_path / JOURNAL_NAME).write_bytes(b"")
    write_like_the_runner(tmp_path, "c99", "prov/a", outcome="failed")
    reads.clear()

    found = load_recorded_runs(tmp_path, update_index=False)

    assert reads == []
    assert found[("c99", "prov/a", 1)].outcome == "failed"
    assert len((tmp_path / JOURNAL_NAME).read_bytes().splitlines()) == 1


def test_a_deferred_fold_keeps_the_lines_appended_since_the_read(
    tmp_path: Path, reads: list[str]
) -> None:
    write_batch(tmp_path)
    before = listing(tmp_path)
    found = load_recorded_runs(tmp_path, defer_index=True)
    assert listing(tmp_path) == before  # nothing written until asked
    assert found.save_index is not None
    # The resume's first job finishes before the index is written.
    write_like_the_runner(tmp_path, "c99", "prov/a", outcome="failed")

    found.save_index()

    assert (tmp_path / INDEX_NAME).is_file()
    assert len((tmp_path / JOURNAL_NAME).read_bytes().splitlines()) == 1  # c99 only
    again = served_from_cache(tmp_path, reads)
    assert again[("c99", "prov/a", 1)].outcome == "failed"


# --- the writer's fold ----------------------------------------------------------------------


@pytest.fixture
def fold_often(monkeypatch: pytest.MonkeyPatch) -> int:
    """Writers fold the journal into the index every few records, not every 4 MiB."""
    monkeypatch.setattr(ledger_journal, "FOLD_MIN_BYTES", 2_000)
    return 2_000


def journal_lines(batch_dir: Path) -> int:
    journal = batch_dir / JOURNAL_NAME
    return len(journal.read_bytes().splitlines()) if journal.exists() else 0


def test_a_writer_folds_the_journal_into_the_index_as_it_grows(
    tmp_path: Path, reads: list[str], fold_often: int
) -> None:
    # A driver that dies after many records leaves most of them in the index, so the first
    # read after the crash has only the journal's last lines to decode.
    paths = [write_like_the_runner(tmp_path, c, m) for m in MODELS for c in CASES]

    assert (tmp_path / INDEX_NAME).is_file()
    assert journal_lines(tmp_path) < len(paths) // 2
    assert len(served_from_cache(tmp_path, reads)) == len(paths)


def test_a_writer_stops_folding_once_the_index_is_large_and_the_journal_keeps_the_rest(
    tmp_path: Path, reads: list[str], fold_often: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fold holds the whole index decoded: a driver of a large sweep must not do that at
    # every mark, so past FOLD_MAX_INDEX_BYTES the journal grows and a reader folds it.
    monkeypatch.setattr(ledger_journal, "FOLD_MAX_INDEX_BYTES", 1)
    first = [write_like_the_runner(tmp_path, c, m) for m in MODELS for c in CASES]
    assert (tmp_path / INDEX_NAME).is_file()
    index = (tmp_path / INDEX_NAME).read_bytes()
    after_fold = journal_lines(tmp_path)

    later = [write_like_the_runner(tmp_path, f"d{n:02d}", m) for m in MODELS for n in range(10)]

    assert (tmp_path / INDEX_NAME).read_bytes() == index
    assert journal_lines(tmp_path) == after_fold + len(later)
    assert len(served_from_cache(tmp_path, reads)) == len(first) + len(later)


def test_a_record_changed_after_the_writer_folded_it_is_seen(
    tmp_path: Path, reads: list[str], fold_often: int
) -> None:
    paths = [write_like_the_runner(tmp_path, c, m) for m in MODELS for c in CASES]
    assert (tmp_path / INDEX_NAME).is_file()
    first = paths[0]
    st = first.stat()
    data = first.read_bytes()
    edited = data.replace(b'"passed"', b'"failed"')
    assert len(edited) == len(data) and edited != data
    with open(first, "r+b") as handle:  # in place, same size, mtime put back
        handle.write(edited)
    os.utime(first, ns=(st.st_atime_ns, st.st_mtime_ns))
    reads.clear()

    found = load_recorded_runs(tmp_path, update_index=False)

    assert reads == [str(first)]
    assert found[(CASES[0], MODELS[0], 1)].outcome == "failed"
    assert found == fresh(tmp_path)


def test_no_fold_while_another_process_holds_the_journal_and_none_is_lost(
    tmp_path: Path, reads: list[str], fold_often: int
) -> None:
    write_like_the_runner(tmp_path, "c00", "prov/a")
    with open(tmp_path / JOURNAL_NAME, "rb") as held:
        # What another writer's fold (or a resume writing its index) holds meanwhile.
        fcntl.flock(held, fcntl.LOCK_EX)
        for case in CASES:
            write_like_the_runner(tmp_path, case, "prov/b")
        assert not (tmp_path / INDEX_NAME).exists()
        assert journal_lines(tmp_path) == 1 + len(CASES)
        deferred = load_recorded_runs(tmp_path, defer_index=True)
        assert deferred.save_index is not None
        deferred.save_index()  # the lock is taken: neither index nor fold
        assert not (tmp_path / INDEX_NAME).exists()
        assert journal_lines(tmp_path) == 1 + len(CASES)
    served_from_cache(tmp_path, reads)

    # Released: the writer folds again once the journal has grown past its next mark.
    for n in range(20):
        write_like_the_runner(tmp_path, f"d{n:02d}", "prov/a")
    assert (tmp_path / INDEX_NAME).is_file()
    served_from_cache(tmp_path, reads)


def test_writers_in_several_processes_fold_without_losing_a_record(
    tmp_path: Path, reads: list[str]
) -> None:
    tests_dir = Path(__file__).resolve().parents[3] / "tests"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tests_dir.parent), str(tests_dir)]))
    folding = "from run_support import ledger_journal\nledger_journal.FOLD_MIN_BYTES = 100_000\n"
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", folding + _WRITER, str(tmp_path), f"prov/w{n}"], env=env
        )
        for n in range(3)
    ]
    assert [w.wait(timeout=120) for w in writers] == [0, 0, 0]

    assert (tmp_path / INDEX_NAME).is_file()
    assert journal_lines(tmp_path) < 450 // 2
    expected = fresh(tmp_path)
    reads.clear()
    found = load_recorded_runs(tmp_path, update_index=False)
    # A line appended while another process folded can be lost to the cache (never
    # misread): its record is parsed instead.
    assert len(reads) < 450 // 2
    assert len(found) == 450
    assert found == expected


def test_a_line_a_writer_appends_to_the_old_journal_while_a_fold_replaces_it_is_kept(
    tmp_path: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_batch(tmp_path)
    found = load_recorded_runs(tmp_path, defer_index=True)
    assert found.save_index is not None
    write_like_the_runner(tmp_path, "c98", "prov/a")  # after the read: the fold keeps it
    late_record = write_like_the_runner(tmp_path, "c99", "prov/a")
    journal = tmp_path / JOURNAL_NAME
    data = journal.read_bytes()
    late_line = data.splitlines(keepends=True)[-1]
    os.truncate(journal, len(data) - len(late_line))
    real = ledger_journal.atomic_write_bytes

    def replacing(path: Path | str, data: bytes, **options: Any) -> None:
        real(path, data, **options)
        if Path(path) == journal:
            # A writer that found the old journal at the path just before the replace.
            with open(old_journal, "ab") as old:
                old.write(late_line)

    old_journal = tmp_path / "old-journal"
    os.link(journal, old_journal)  # the old file, still reachable after the replace
    monkeypatch.setattr(ledger_journal, "atomic_write_bytes", replacing)

    found.save_index()

    assert journal_lines(tmp_path) == 2  # c98's line and c99's
    again = served_from_cache(tmp_path, reads)
    assert (
        again[("c99", "prov/a", 1)].run_dir == late_record.parent.relative_to(tmp_path).as_posix()
    )


def test_a_writer_that_cannot_write_the_index_keeps_every_line_in_the_journal(
    tmp_path: Path, reads: list[str], fold_often: int
) -> None:
    (tmp_path / INDEX_NAME).mkdir()  # what a fold would replace cannot be
    paths = [write_like_the_runner(tmp_path, c, m) for m in MODELS for c in CASES]

    assert (tmp_path / INDEX_NAME).is_dir()
    assert journal_lines(tmp_path) == len(paths)
    served_from_cache(tmp_path, reads)
