"""The records' stats, taken by forked children while the index loads
(run_support/ledger_fstat.py): the same answer as the reader's own, or none at all."""

from __future__ import annotations

import errno
import fcntl
import marshal
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.builders import start_run, write_record

from run_support import ledger_fstat, ledger_scan
from run_support.ledger_fstat import DirStats, PackedStats, Stats, start_stats, stat_dir
from run_support.results import RecordedRuns, load_recorded_runs

OTHER_THREADS = ledger_fstat._other_threads


@pytest.fixture(autouse=True)
def children_for_any_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger_scan, "CHILD_MIN_BYTES", 0)
    monkeypatch.setattr(ledger_fstat, "_usable_cores", lambda: 2)
    # Threads other tests left running in this process (a Dask client's) are not ours.
    monkeypatch.setattr(ledger_fstat, "_other_threads", lambda: False)


@pytest.fixture
def batch_dir(tmp_path: Path) -> Path:
    for model in ("m1", "m2", "m3"):
        for n in range(5):
            write_record(tmp_path, f"c{n}", model, outcome=("passed", "failed")[n % 2])
    start_run(tmp_path, "c9", "m2")
    (tmp_path / "m3" / "notes.txt").write_text("a stray file, not a run dir")
    (tmp_path / "m1" / ".hidden").mkdir()
    return tmp_path


def model_dirs(batch_dir: Path) -> list[str]:
    return sorted(p.name for p in batch_dir.iterdir() if p.is_dir() and p.name[0] != ".")


def in_process(batch_dir: Path) -> dict[str, DirStats | None]:
    stats = Stats()
    return {name: stat_dir(batch_dir, name, stats) for name in model_dirs(batch_dir)}


def collected(children: ledger_fstat.StatsInChildren) -> dict[str, DirStats] | None:
    """The children's answer, every model dir's stats as columns."""
    answer = children.collect()
    if answer is None:
        return None
    return {name: unpack(found) for name, found in answer.items()}


def unpack(found: DirStats | PackedStats) -> DirStats:
    return found.unpack() if isinstance(found, PackedStats) else found


def same(a: RecordedRuns, b: RecordedRuns) -> bool:
    return (dict(a), a.unreadable, a.incomplete) == (dict(b), b.unreadable, b.incomplete)


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


def test_the_children_answer_what_the_reader_would_find_itself(
    batch_dir: Path, no_children_left: Callable[[], bool]
) -> None:
    children = start_stats(batch_dir, model_dirs(batch_dir))

    assert children is not None
    assert collected(children) == in_process(batch_dir)
    assert no_children_left()


def test_a_child_that_dies_leaves_the_reader_to_stat_with_the_same_answer(
    batch_dir: Path, monkeypatch: pytest.MonkeyPatch, no_children_left: Callable[[], bool]
) -> None:
    expected = load_recorded_runs(batch_dir, use_index=False)
    load_recorded_runs(batch_dir)  # an index, so that the children are started
    monkeypatch.setattr(ledger_fstat, "_send", lambda *_: os.kill(os.getpid(), signal.SIGKILL))

    children = start_stats(batch_dir, model_dirs(batch_dir))
    assert children is not None and children.collect() is None
    assert same(load_recorded_runs(batch_dir), expected)
    assert no_children_left()


def test_a_damaged_answer_is_not_used(batch_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def garbage(fd: int, *_: object) -> None:
        os.write(fd, b"\xff not marshal")

    monkeypatch.setattr(ledger_fstat, "_send", garbage)

    children = start_stats(batch_dir, model_dirs(batch_dir))
    assert children is not None and children.collect() is None
    assert same(load_recorded_runs(batch_dir), load_recorded_runs(batch_dir, use_index=False))


def test_the_readers_signal_handlers_never_run_in_a_child(
    batch_dir: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A driver's SIGTERM handler writes the batch's files: in a child it must not run.
    marker = tmp_path_factory.mktemp("marker") / "handler-ran"
    real_send = ledger_fstat._send

    def signalled_first(*args: object) -> None:
        os.kill(os.getpid(), signal.SIGUSR1)
        time.sleep(0.2)
        real_send(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(ledger_fstat, "_send", signalled_first)
    previous = signal.signal(signal.SIGUSR1, lambda *_: marker.write_text("ran"))
    try:
        children = start_stats(batch_dir, model_dirs(batch_dir))
        assert children is not None and children.collect() is None  # SIGUSR1 ended them
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert not marker.exists()


def test_an_interrupted_read_ends_and_reaps_its_children(
    batch_dir: Path, monkeypatch: pytest.MonkeyPatch, no_children_left: Callable[[], bool]
) -> None:
    load_recorded_runs(batch_dir)

    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ledger_scan, "open_index", interrupted)
    with pytest.raises(KeyboardInterrupt):
        load_recorded_runs(batch_dir)
    assert no_children_left()


def test_no_child_is_forked_beside_running_threads(
    batch_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledger_fstat, "_other_threads", OTHER_THREADS)
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert start_stats(batch_dir, model_dirs(batch_dir)) is None
    finally:
        stop.set()
        thread.join()


def test_one_core_forks_no_child(batch_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger_fstat, "_usable_cores", lambda: 1)
    assert start_stats(batch_dir, model_dirs(batch_dir)) is None


def test_a_child_holds_nothing_of_the_readers_open_files(
    batch_dir: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A driver holds its batch lock (an flock) while it reads the ledger. Killed then, its
    # lock must be free for the next driver at once, not once its children are done.
    lock_path = tmp_path_factory.mktemp("lock") / ".batch.lock"
    lock_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    at_work = lock_path.parent / "at-work"
    real_send = ledger_fstat._send

    def slow(*args: object) -> None:
        with open(at_work, "a") as note:  # each child, once it is past its set-up
            note.write("x")
        time.sleep(1.0)
        real_send(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(ledger_fstat, "_send", slow)
    children = start_stats(batch_dir, model_dirs(batch_dir))
    assert children is not None
    try:
        deadline = time.monotonic() + 10
        while not (at_work.exists() and len(at_work.read_text()) == ledger_fstat.CHILDREN):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os.close(lock_fd)  # the driver is gone; its children are still at work
        next_driver = os.open(lock_path, os.O_RDWR)
        try:
            fcntl.flock(next_driver, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(next_driver)
        assert collected(children) == in_process(batch_dir)
    finally:
        children.close()


def test_a_model_dir_missing_from_the_answer_is_statted_by_the_reader(
    batch_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = load_recorded_runs(batch_dir, use_index=False)
    load_recorded_runs(batch_dir)
    real_stat_dir = ledger_fstat.stat_dir

    def not_m2(batch: Path, model_dir: str, stats: Stats) -> DirStats | None:
        return None if model_dir == "m2" else real_stat_dir(batch, model_dir, stats)

    # In the children only: the reader's own stat_dir is ledger_scan's name for it.
    monkeypatch.setattr(ledger_fstat, "stat_dir", not_m2)
    children = start_stats(batch_dir, model_dirs(batch_dir))
    assert children is not None
    assert set(children.collect() or {}) == {"m1", "m3"}

    assert same(load_recorded_runs(batch_dir), expected)


def test_names_no_encoding_can_decode_come_back_from_the_children_as_they_are(
    batch_dir: Path, no_children_left: Callable[[], bool]
) -> None:
    # Packed as one string of file system bytes: a name that is not UTF-8, or holds a
    # newline or a space, must come back as os.listdir gives it.
    record = next((batch_dir / "m1").glob("*/run-meta.json")).read_bytes()
    for name in (b"c7-\xff\xfe-not-utf8", b"c8 with\nnewline", "c9-caf\u00e9".encode()):
        run_dir = os.path.join(os.fsencode(batch_dir / "m1"), name)
        os.mkdir(run_dir)
        with open(os.path.join(run_dir, b"run-meta.json"), "wb") as handle:
            handle.write(record)

    children = start_stats(batch_dir, model_dirs(batch_dir))

    assert children is not None
    answer = collected(children)
    assert answer == in_process(batch_dir)
    assert answer is not None and "c7-\udcff\udcfe-not-utf8" in answer["m1"].names
    assert no_children_left()


def test_stats_a_machine_integer_cannot_hold_are_sent_as_they_are(batch_dir: Path) -> None:
    found = stat_dir(batch_dir, "m1", Stats())
    assert found is not None
    huge = found._replace(inodes=[2**64 - 1 - i for i in range(len(found.names))])

    for stats in (found, huge):
        sent = ledger_fstat._answer(marshal.dumps({"m1": ledger_fstat._packed(stats)}))
        assert sent is not None and unpack(sent["m1"]) == stats


@pytest.mark.parametrize(
    "packed",
    [
        (b"a\0b", b"\0" * 40, {}),  # numbers for one record less than the names
        (b"a", b"\0" * 41, {}),  # not a whole number of numbers
        ("a", b"\0" * 40, {}),
        (b"a", b"\0" * 40),
        [b"a", b"\0" * 40, {}],
    ],
)
def test_a_damaged_packed_answer_is_not_used(packed: object) -> None:
    assert ledger_fstat._answer(marshal.dumps({"m1": (b"a", b"\0" * 40, {})})) is not None
    assert ledger_fstat._answer(marshal.dumps({"m1": packed})) is None
