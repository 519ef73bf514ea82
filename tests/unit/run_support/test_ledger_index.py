"""The ledger index read a block at a time: each model dir's block decoded when the scan
reaches it, an unchanged block written back as it was read, and an index that stops
parsing part way used only up to there (the rest read from the records)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
from helpers.builders import write_record

from run_support import ledger_index, ledger_scan, results
from run_support.ledger_index import INDEX_SCHEMA, RAW_JSON, Encoded, IndexBlocks
from run_support.names import INDEX_NAME, JOURNAL_NAME
from run_support.results import RecordedRuns, load_recorded_runs

MODELS = ("ma", "mb", "mc")
#: The racy window, shortened here: these tests are about the index's layout, and each
#: waits it out to have its records cached.
WINDOW_NS = 100_000_000


@pytest.fixture(autouse=True)
def _short_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger_scan, "RACY_WINDOW_NS", WINDOW_NS)


@pytest.fixture(scope="module")
def aged_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three model dirs of two records each, older than the racy window (so cached)."""
    batch_dir = tmp_path_factory.mktemp("three-models")
    for model in MODELS:
        write_record(batch_dir, "c01", model, outcome="passed", at=0)
        write_record(batch_dir, "c02", model, outcome="failed", at=0)
    time.sleep(WINDOW_NS / 1e9 + 0.05)
    return batch_dir


@pytest.fixture
def batch_dir(aged_ledger: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "batch"
    shutil.copytree(aged_ledger, copy)  # new inodes and ctimes: the first read indexes it
    return copy


def fresh(batch_dir: Path) -> RecordedRuns:
    return load_recorded_runs(batch_dir, use_index=False)


def same(a: RecordedRuns, b: RecordedRuns) -> bool:
    return (dict(a), a.unreadable, a.incomplete) == (dict(b), b.unreadable, b.incomplete)


def indexed(batch_dir: Path) -> None:
    """Index ``batch_dir`` once it is old enough to be cached."""
    time.sleep(WINDOW_NS / 1e9 + 0.05)
    load_recorded_runs(batch_dir)


def index_with_body(batch_dir: Path, body: bytes) -> None:
    """Replace the index's body with ``body``, under a header that matches it."""
    head = json.loads((batch_dir / INDEX_NAME).read_bytes().partition(b"\n")[0])
    head |= {"bytes": len(body), "crc32": zlib.crc32(body)}
    (batch_dir / INDEX_NAME).write_bytes(json.dumps(head).encode() + b"\n" + body)


def body_of(batch_dir: Path) -> bytes:
    return (batch_dir / INDEX_NAME).read_bytes().partition(b"\n")[2]


# --- IndexBlocks on its own ---------------------------------------------------------------


def blocks_of(text: str) -> IndexBlocks:
    return IndexBlocks(ledger_index._text_entries(text))


def test_blocks_are_taken_in_order_each_with_its_text_as_read() -> None:
    index = blocks_of('{"a":[1,2], "b" : {"x":3},"c":[]}')
    block, encoded = index.take("a")
    assert block == [1, 2]
    assert encoded is not None and encoded.text[encoded.start : encoded.end] == "[1,2]"
    block, encoded = index.take("b")
    assert block == {"x": 3}
    assert encoded is not None and encoded.text[encoded.start : encoded.end] == '{"x":3}'
    assert index.take("c")[0] == []
    assert index.untouched()


def test_a_dir_the_index_has_no_block_for_decodes_nothing_ahead() -> None:
    index = blocks_of('{"b":[1],"d":[2]}')
    assert index.take("a") == (None, None)
    assert index._ahead == {}  # "b" is past "a": not decoded yet
    assert index.take("b")[0] == [1]
    assert index.take("c") == (None, None)
    assert index.take("d")[0] == [2]
    assert index.untouched()


def test_a_block_asked_for_out_of_order_is_still_found() -> None:
    index = blocks_of('{"a":[1],"b":[2],"c":[3]}')
    assert index.take("c")[0] == [3]
    assert index.take("a")[0] == [1]
    assert not index.untouched()  # "b" was never asked for: the index has more than the dirs


def test_a_block_no_dir_asked_for_leaves_the_index_touched() -> None:
    index = blocks_of('{"a":[1],"z":[2]}')
    assert index.take("a")[0] == [1]
    assert not index.untouched()


@pytest.mark.parametrize(
    "text",
    ['{"a":[1],"b":[2', '{"a":[1],"b" [2]}', '{"a":[1],7:[2]}', '{"a":[1];"b":[2]}'],
)
def test_an_index_that_stops_parsing_serves_only_what_came_before(text: str) -> None:
    index = blocks_of(text)
    assert index.take("a")[0] == [1]
    assert index.take("b") == (None, None)
    assert not index.untouched()


@pytest.mark.parametrize("text", ["[1,2]", '"a"', '{"a":[1]} junk', "", "{"])
def test_a_body_that_is_not_an_object_of_blocks_gives_none(text: str) -> None:
    index = blocks_of(text)
    assert index.take("a")[0] in (None, [1])
    assert text == "" or not index.untouched()


def test_load_index_gives_every_block_or_none() -> None:
    assert ledger_index.load_index(Path("/nonexistent/index"), RAW_JSON) == {}


# --- the index written back ---------------------------------------------------------------


def test_save_writes_an_encoded_block_as_it_was_read(tmp_path: Path) -> None:
    text = '{"a":[1, 2 ,3]}'
    path = tmp_path / "index"
    saved = ledger_index.save_index(path, RAW_JSON, {"a": Encoded(text, 5, 14), "b": [[4], [5]]})
    assert saved
    head, _, body = path.read_bytes().partition(b"\n")
    assert body == b'{\n"a":[1, 2 ,3],\n"b":[[4],[5]]\n}'
    header = json.loads(head)
    assert header == {
        "schema": INDEX_SCHEMA,
        "digest": RAW_JSON.id,
        "bytes": len(body),
        "crc32": zlib.crc32(body),
    }
    assert ledger_index.load_index(path, RAW_JSON) == {"a": [1, 2, 3], "b": [[4], [5]]}


def test_an_empty_index_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "index"
    assert ledger_index.save_index(path, RAW_JSON, {})
    assert path.read_bytes().partition(b"\n")[2] == b"{\n}"
    assert ledger_index.load_index(path, RAW_JSON) == {}


# --- the scan over several model dirs ------------------------------------------------------


def test_a_warm_read_of_several_dirs_is_served_whole_and_rewrites_nothing(
    batch_dir: Path, reads: list[str]
) -> None:
    indexed(batch_dir)
    before = (batch_dir / INDEX_NAME).stat()
    expected = fresh(batch_dir)
    reads.clear()
    assert same(load_recorded_runs(batch_dir), expected)
    assert reads == []
    after = (batch_dir / INDEX_NAME).stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_changed_dir_rewrites_its_block_and_keeps_the_others_byte_for_byte(
    batch_dir: Path, reads: list[str]
) -> None:
    indexed(batch_dir)
    old = json.loads(body_of(batch_dir))
    write_record(batch_dir, "c03", "mb", outcome="passed", at=5)
    indexed(batch_dir)
    new = json.loads(body_of(batch_dir))
    assert new["ma"] == old["ma"] and new["mc"] == old["mc"]
    assert len(new["mb"][0]) == 3
    expected = fresh(batch_dir)
    reads.clear()
    assert same(load_recorded_runs(batch_dir), expected)
    assert reads == []


def test_an_unchanged_block_is_written_back_as_it_was_read(batch_dir: Path) -> None:
    indexed(batch_dir)
    body = json.loads(body_of(batch_dir))
    # The same blocks, spaced as no encoder writes them: a save keeps an untouched one so.
    spaced = (
        b"{"
        + b", ".join(
            json.dumps(model).encode() + b": " + json.dumps(body[model], indent=1).encode()
            for model in MODELS
        )
        + b"}"
    )
    index_with_body(batch_dir, spaced)
    write_record(batch_dir, "c03", "mc", outcome="passed", at=5)
    indexed(batch_dir)
    assert json.dumps(body["ma"], indent=1).encode() in body_of(batch_dir)
    assert json.dumps(body["mb"], indent=1).encode() in body_of(batch_dir)
    assert same(load_recorded_runs(batch_dir), fresh(batch_dir))


def test_a_block_for_a_removed_dir_is_dropped_from_the_index(batch_dir: Path) -> None:
    indexed(batch_dir)
    shutil.rmtree(batch_dir / "mc")
    assert same(load_recorded_runs(batch_dir), fresh(batch_dir))
    assert set(json.loads(body_of(batch_dir))) == {"ma", "mb"}


def test_an_index_broken_after_its_first_block_serves_that_block_only(
    batch_dir: Path, reads: list[str]
) -> None:
    indexed(batch_dir)
    body = json.loads(body_of(batch_dir))
    first = b'{"ma":' + json.dumps(body["ma"]).encode()
    index_with_body(batch_dir, first + b',"mb":[[')  # checksum right, the rest cut off
    expected = fresh(batch_dir)
    reads.clear()
    assert same(load_recorded_runs(batch_dir), expected)
    assert sorted(Path(path).parts[-3] for path in reads) == ["mb", "mb", "mc", "mc"]
    # And the index is whole again.
    assert set(json.loads(body_of(batch_dir))) == set(MODELS)


def test_an_index_in_another_order_is_read_right_and_rewritten_in_order(
    batch_dir: Path, reads: list[str]
) -> None:
    # Written in name order, as the scan asks; one that is not (no writer of ours makes
    # one) is used as far as it is in order, and written back in order.
    indexed(batch_dir)
    body = json.loads(body_of(batch_dir))
    backwards = {model: body[model] for model in reversed(MODELS)}
    index_with_body(batch_dir, json.dumps(backwards).encode())
    expected = fresh(batch_dir)
    assert same(load_recorded_runs(batch_dir), expected)
    assert list(json.loads(body_of(batch_dir))) == list(MODELS)
    reads.clear()
    assert same(load_recorded_runs(batch_dir), expected)
    assert reads == []


def test_the_journal_folds_into_a_block_read_a_dir_at_a_time(batch_dir: Path) -> None:
    indexed(batch_dir)
    # A record written the driver's way appends a journal line for its dir.
    meta = results.RunMeta(
        test_case="c09", model="mb", outcome="passed", timestamp="t", run_dir="mb/c09-mb-x-a1"
    )
    run_dir = batch_dir / "mb" / "c09-mb-x-a1"
    run_dir.mkdir()
    results.write_run_meta(run_dir, meta)
    assert (batch_dir / JOURNAL_NAME).exists()
    indexed(batch_dir)
    assert not (batch_dir / JOURNAL_NAME).exists()
    assert len(json.loads(body_of(batch_dir))["mb"][0]) == 3
    assert same(load_recorded_runs(batch_dir), fresh(batch_dir))


# --- a block to a line ---------------------------------------------------------------------


def index_fds(batch_dir: Path) -> list[str]:
    fds = Path("/proc/self/fd")
    return [
        fd.name for fd in fds.iterdir()
        if Path(os.readlink(fd) if fd.exists() else "").name == INDEX_NAME
    ]  # fmt: skip


def test_the_index_is_written_a_block_to_a_line(batch_dir: Path) -> None:
    # So a reader holds one line at a time, not the body as text.
    indexed(batch_dir)
    lines = body_of(batch_dir).split(b"\n")
    assert lines[0] == b"{" and lines[-1] == b"}"
    assert [json.loads(b"{" + line.rstrip(b",") + b"}").keys() for line in lines[1:-1]] == [
        {model} for model in MODELS
    ]


def test_an_index_of_lines_broken_after_its_first_block_serves_that_block_only(
    batch_dir: Path, reads: list[str]
) -> None:
    indexed(batch_dir)
    first, second = body_of(batch_dir).split(b"\n")[1:3]
    index_with_body(batch_dir, b"{\n" + first + b"\n" + second[:20])  # checksum right
    expected = fresh(batch_dir)
    reads.clear()
    assert same(load_recorded_runs(batch_dir), expected)
    assert sorted(Path(path).parts[-3] for path in reads) == ["mb", "mb", "mc", "mc"]
    assert set(json.loads(body_of(batch_dir))) == set(MODELS)


@pytest.mark.parametrize(
    "damage",
    [
        lambda body: body[:-1],  # no closing brace
        lambda body: body + b"\n",  # something after it
        lambda body: body.replace(b",\n", b",\n\n", 1),  # an empty line
        lambda body: body.replace(b"\n}", b"}"),  # the last block and the brace on one line
    ],
)
def test_an_index_of_lines_laid_out_otherwise_is_never_misread(
    batch_dir: Path, damage: Any
) -> None:
    indexed(batch_dir)
    index_with_body(batch_dir, damage(body_of(batch_dir)))
    assert same(load_recorded_runs(batch_dir, update_index=False), fresh(batch_dir))


def test_an_unchanged_block_is_written_back_from_the_index_as_it_was_when_read(
    batch_dir: Path,
) -> None:
    # A deferred save writes an unchanged dir's block from the file the read checked, even
    # if the index was replaced since.
    indexed(batch_dir)
    old = json.loads(body_of(batch_dir))
    write_record(batch_dir, "c03", "mb", outcome="passed", at=5)
    time.sleep(WINDOW_NS / 1e9 + 0.05)
    found = load_recorded_runs(batch_dir, defer_index=True)
    assert found.save_index is not None
    replacement = batch_dir / "replacement"
    replacement.write_bytes(b"not an index")
    os.replace(replacement, batch_dir / INDEX_NAME)
    found.save_index()
    new = json.loads(body_of(batch_dir))
    assert new["ma"] == old["ma"] and new["mc"] == old["mc"] and len(new["mb"][0]) == 3
    del found
    assert index_fds(batch_dir) == []
    assert same(load_recorded_runs(batch_dir), fresh(batch_dir))


def test_a_read_leaves_no_index_open(batch_dir: Path) -> None:
    indexed(batch_dir)
    load_recorded_runs(batch_dir)
    assert index_fds(batch_dir) == []


def test_blocks_are_written_in_name_order_whatever_order_they_are_given(tmp_path: Path) -> None:
    # A writer's fold adds a new dir's block after the others; the scan asks in name order
    # and takes a later name to mean "no block", so an index out of order would be parsed.
    path = tmp_path / "index"
    assert ledger_index.save_index(path, RAW_JSON, {"b": [2], "c": [3], "a": [1]})
    index = ledger_index.open_index(path, RAW_JSON)
    assert [index.take(name)[0] for name in ("a", "b", "c")] == [[1], [2], [3]]
    assert index.untouched()


# --- the blocks a deferred save writes, put aside ------------------------------------------


def deferred_after_a_change(batch_dir: Path) -> RecordedRuns:
    indexed(batch_dir)
    write_record(batch_dir, "c03", "mb", outcome="passed", at=5)
    time.sleep(WINDOW_NS / 1e9 + 0.05)
    found = load_recorded_runs(batch_dir, defer_index=True)
    assert found.save_index is not None
    return found


def test_a_changed_block_waits_for_the_save_in_an_unnamed_file(batch_dir: Path) -> None:
    found = deferred_after_a_change(batch_dir)
    assert found.save_index is not None
    names = {INDEX_NAME, *MODELS}
    assert {path.name for path in batch_dir.iterdir()} == names  # the file has no name
    held = [os.readlink(fd) for fd in Path("/proc/self/fd").iterdir() if fd.exists()]
    assert [name for name in held if name.startswith(f"{batch_dir}/#")] != []
    found.save_index()
    assert {path.name for path in batch_dir.iterdir()} == names
    assert len(json.loads(body_of(batch_dir))["mb"][0]) == 3
    assert same(load_recorded_runs(batch_dir), fresh(batch_dir))


@pytest.mark.parametrize("failing", ["open", "pwrite"])
def test_where_no_unnamed_file_can_be_made_or_written_the_block_waits_in_memory(
    batch_dir: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    # A filesystem without O_TMPFILE (NFS, sshfs), or a full disk.
    real_open, real_pwrite = os.open, os.pwrite

    def no_tmpfile(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if failing == "open" and flags & os.O_TMPFILE == os.O_TMPFILE:
            raise OSError(errno.EOPNOTSUPP, "no O_TMPFILE here")
        return real_open(path, flags, *args, **kwargs)

    def full(fd: int, data: bytes, offset: int) -> int:
        if failing == "pwrite":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(ledger_index.os, "open", no_tmpfile)
    monkeypatch.setattr(ledger_index.os, "pwrite", full)
    found = deferred_after_a_change(batch_dir)
    assert found.save_index is not None
    found.save_index()
    monkeypatch.undo()
    assert len(json.loads(body_of(batch_dir))["mb"][0]) == 3
    assert same(load_recorded_runs(batch_dir), fresh(batch_dir))
