"""``events.jsonl`` rotated and compressed past a size, and every reader of the events
reading across the rotation: the report's invocations, ``batch view``'s follower and a
control's answer."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batch import event_segments
from batch.event_segments import Lines, all_lines, mark, rotated, segment_name
from batch.execution.events import EventLog, compress
from batch.stats.source import read_invocations
from batch.steering import Control, answer_after
from batch.view.follow import BatchFollower

#: A segment of about three events.
SMALL = 300


def event_log(batch_dir: Path) -> EventLog:
    (batch_dir / "batch-logs").mkdir(parents=True, exist_ok=True)
    return EventLog(batch_dir / "batch-logs" / "events.jsonl", segment_bytes=SMALL)


def finishes(log: EventLog, cases: range, model: str = "a") -> None:
    for i in cases:
        log.emit("start", case=f"c{i}", model=model, attempt=1)
        log.emit("finish", case=f"c{i}", model=model, status="passed", duration_seconds=1.0)


def test_past_its_size_the_log_is_rotated_and_compressed_and_read_whole(tmp_path: Path) -> None:
    log = event_log(tmp_path)
    log.emit("batch_start", jobs=40)
    finishes(log, range(40))
    log.emit("batch_end", state="complete")
    log.close()  # waits for the compression
    logs = tmp_path / "batch-logs"
    segments = rotated(logs)
    assert len(segments) > 10 and all(path.suffix == ".gz" for path in segments.values())
    assert list(segments) == list(range(1, len(segments) + 1))
    assert not [name for name in os.listdir(logs) if name.endswith((".partial", "0.jsonl"))]
    assert (logs / "events.jsonl").stat().st_size < SMALL
    events = [json.loads(line) for line in all_lines(logs)]
    assert [e["event"] for e in events] == ["batch_start"] + ["start", "finish"] * 40 + [
        "batch_end"
    ]
    assert [e["case"] for e in events if e["event"] == "finish"] == [f"c{i}" for i in range(40)]


def test_a_driver_killed_while_compressing_loses_no_event(tmp_path: Path) -> None:
    logs = tmp_path / "batch-logs"
    logs.mkdir()
    lines = [json.dumps({"t": "2026-12-01T07:00:00Z", "event": "start", "case": f"c{i}"})
             for i in range(3)]  # fmt: skip
    # Segment 1 compressed, but its plain copy not yet removed; segment 2 not compressed.
    (logs / segment_name(1)).write_text(lines[0] + "\n")
    compress(logs / segment_name(1))
    (logs / segment_name(1)).write_text(lines[0] + "\n")
    (logs / segment_name(2)).write_text(lines[1] + "\n")
    (logs / (segment_name(2) + ".gz.partial")).write_bytes(b"\x1f\x8b torn")
    (logs / "events.jsonl").write_text(lines[2] + "\n")
    assert [line.decode() for line in all_lines(logs)] == lines
    EventLog(logs / "events.jsonl").close()  # the next driver compresses what was left
    assert sorted(p.name for p in rotated(logs).values()) == [
        segment_name(1, True),
        segment_name(2, True),
    ]
    assert gzip.decompress((logs / segment_name(2, True)).read_bytes()).decode() == lines[1] + "\n"
    assert [line.decode() for line in all_lines(logs)] == lines


def test_the_invocations_span_the_rotated_segments(tmp_path: Path) -> None:
    logs = tmp_path / "batch-logs"
    logs.mkdir()
    start = '{"t": "2026-12-01T07:00:00Z", "event": "batch_start"}\n'
    (logs / segment_name(1)).write_text(start)
    compress(logs / segment_name(1))
    (logs / "events.jsonl").write_text(
        '{"t": "2026-12-01T07:01:00Z", "event": "batch_end", "state": "complete"}\n'
    )
    (run,) = read_invocations(tmp_path)
    assert (run.seconds, run.state) == (60.0, "complete")


def test_the_views_follower_keeps_every_event_across_a_rotation(tmp_path: Path) -> None:
    (tmp_path / "batch-summary.json").write_text(
        json.dumps(
            {
                "schema": 1,
                "state": "running",
                "jobs": [
                    {
                        "case": f"c{i}",
                        "model": "a",
                        "status": "pending",
                        "duration_seconds": None,
                        "attempts": 0,
                        "run_dir": None,
                    }
                    for i in range(30)
                ],
            }
        )
    )
    log = event_log(tmp_path)
    log.emit("batch_start", jobs=30)
    finishes(log, range(5))
    follower = BatchFollower(tmp_path)
    while follower.poll():
        pass
    assert follower.view.overview(0)["totals"]["passed"] == 5
    finishes(log, range(5, 20))  # several rotations between two polls
    log.emit("start", case="c20", model="a", attempt=1)
    while follower.poll():
        pass
    totals = follower.view.overview(0)["totals"]
    assert (totals["passed"], totals["running"]) == (20, 1)
    log.close()
    assert len(rotated(tmp_path / "batch-logs")) > 5
    # A view opened later reads the compressed segments from the first.
    late = BatchFollower(tmp_path)
    while late.poll():
        pass
    assert late.view.overview(0)["totals"]["passed"] == 20


def test_a_controls_answer_is_found_across_a_rotation(tmp_path: Path) -> None:
    logs = tmp_path / "batch-logs"
    control = Control("pause")
    for before, after in ((0, 10), (10, 0)):  # answered in the old segment, in a new one
        log = event_log(tmp_path)
        finishes(log, range(3))
        start = mark(logs)
        finishes(log, range(before))
        log.emit("control", action="pause", outcome="done")
        finishes(log, range(after))
        log.close()
        assert mark(logs).segment > start.segment  # rotated since the mark
        answer = answer_after(logs, start, control)
        assert answer is not None and answer["outcome"] == "done", (before, after)
        for path in logs.iterdir():
            path.unlink()


@given(
    st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=20),
    st.lists(st.integers(1, 50), min_size=1, max_size=10),
)
def test_lines_cut_from_any_chunks_are_the_whole_texts_lines(
    lines: list[bytes], cuts: list[int]
) -> None:
    text = b"".join(line + b"\n" for line in lines) + b"torn"
    splitter = Lines(max_line=20)
    got: list[bytes] = []
    start, n = 0, 0
    while start < len(text):
        size = cuts[n % len(cuts)]
        got += splitter.feed(text[start : start + size])
        start, n = start + size, n + 1
    # Reference: every ended line, but the empty ones and those past the bound.
    assert got == [line for line in lines if 0 < len(line) <= 20]


def test_a_segment_compressed_between_the_listing_and_the_open_is_read_not_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listing saw events-1.jsonl; by the open it was events-1.jsonl.gz. Its events are
    read under the new name (they were skipped, and the view's counts fell short)."""
    log = event_log(tmp_path)
    log.emit("batch_start", jobs=20)
    finishes(log, range(20))
    log.close()  # waits for the compression
    logs = tmp_path / "batch-logs"
    real = event_segments.rotated
    calls = []

    def stale_once(directory: Path) -> dict[int, Path]:
        found = real(directory)
        calls.append(1)
        if len(calls) == 1:  # the listing made before segment 1 was compressed
            return {**found, 1: found[1].with_suffix("")}
        return found

    monkeypatch.setattr(event_segments, "rotated", stale_once)
    finished = [
        json.loads(line)["case"]
        for line in event_segments.all_lines(logs)
        if json.loads(line)["event"] == "finish"
    ]
    assert finished == [f"c{i}" for i in range(20)]
