"""Reading a summary a row a line (batch.summary.stream): the same checked summary
as the whole parse, for the driver's shape and every other, without the file's text whole."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from helpers.builders import make_jobs, make_summary

from batch.layout import SUMMARY_NAME
from batch.summary.read import read_summary
from batch.summary.stream import stream_summary
from batch.summary.write import write_summary
from run_support import jsonio


def summary_dir(tmp_path: Path, rows: int = 6) -> Path:
    jobs = make_jobs([f"c{n:05d}" for n in range(rows // 2)], ["openai/gpt-4o", "modèle"])
    jobs[0].usage = {"requests": 2, "cost_usd": 0.5}
    jobs[1].steps = [{"name": "eval", "status": "failed", "duration_seconds": 1.0}]
    write_summary(
        tmp_path, make_summary(jobs, halt={"rule": "setup", "mode": "soon", "message": "m"})
    )
    return tmp_path


def test_the_drivers_summary_streams_to_what_the_whole_parse_reads(tmp_path: Path) -> None:
    batch_dir = summary_dir(tmp_path)
    assert stream_summary(batch_dir) == read_summary(batch_dir)


@pytest.mark.parametrize(
    "shape",
    [
        lambda summary: jsonio.dumps(summary, indent=True),  # rows indented: older drivers
        lambda summary: jsonio.dumps(summary),  # all on one line
        lambda summary: jsonio.dumps({**summary, "jobs": []}, indent=True),  # no rows
    ],
)
def test_a_summary_of_another_shape_is_parsed_whole(tmp_path: Path, shape: object) -> None:
    batch_dir = summary_dir(tmp_path)
    summary = read_summary(batch_dir)
    (batch_dir / SUMMARY_NAME).write_bytes(shape(summary))  # type: ignore[operator]
    assert stream_summary(batch_dir) == read_summary(batch_dir)


def test_a_bad_row_is_named_as_the_whole_parse_names_it(tmp_path: Path) -> None:
    batch_dir = summary_dir(tmp_path)
    path = batch_dir / SUMMARY_NAME
    path.write_bytes(path.read_bytes().replace(b'"attempts":0', b'"attempts":"x"', 1))
    with pytest.raises(ValueError, match="job 0: 'attempts' is a string"):
        stream_summary(batch_dir)


def test_a_summary_cut_short_is_not_json_either_way(tmp_path: Path) -> None:
    batch_dir = summary_dir(tmp_path)
    path = batch_dir / SUMMARY_NAME
    path.write_bytes(path.read_bytes()[:-200])
    with pytest.raises(ValueError):
        stream_summary(batch_dir)


def test_streaming_never_holds_the_files_text_whole(tmp_path: Path) -> None:
    """The whole parse holds the file's bytes and their decoded text at once beside the
    rows; the stream holds a line at a time: its peak is lower by at least the file's size."""
    batch_dir = summary_dir(tmp_path, rows=4000)
    size = (batch_dir / SUMMARY_NAME).stat().st_size

    def peak(read: object) -> int:
        tracemalloc.start()
        try:
            read(batch_dir)  # type: ignore[operator]
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert peak(stream_summary) < peak(read_summary) - size


@pytest.mark.parametrize("comma", [b"", b",,"], ids=["missing", "doubled"])
@pytest.mark.parametrize("row", [0, 255, 599], ids=["first", "chunk-end", "last"])
def test_a_comma_missing_or_doubled_after_a_row_is_refused_as_the_whole_parse_does(
    tmp_path: Path, comma: bytes, row: int
) -> None:
    """Rows are parsed in chunks of 256: a wrong comma where a chunk ends would otherwise
    go unseen, and a file no JSON reader takes would read as valid here."""
    batch_dir = summary_dir(tmp_path, rows=600)
    path = batch_dir / SUMMARY_NAME
    lines = path.read_bytes().split(b"\n")
    at = lines.index(b'  "jobs": [') + 1 + row
    lines[at] = lines[at].rstrip(b",") + comma if row < 599 else lines[at] + comma + b","
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(ValueError):
        read_summary(batch_dir)
    with pytest.raises(ValueError):
        stream_summary(batch_dir)
