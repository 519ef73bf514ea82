"""A clock never decides which record of a (case, model) is the newest: the attempt number
the driver assigned does, then the timestamp (docs/ledger.md, *Reading*).

A record stamped in the future (a Dask worker whose clock runs fast, a hand-edited record)
must not outrank a later attempt: ``--retry-failed`` would rerun a passed job every time
and ``--resume`` would carry the stale error. Through the real CLI, with the ledger index
in use and without it, and the ordering function itself.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from helpers.builders import make_meta, stamp, write_record
from hypothesis import given
from hypothesis import strategies as st

from run_support import ledger_cache, ledger_scan
from run_support.results import RunMeta, load_recorded_runs, record_order, utc_stamp

if TYPE_CHECKING:
    from conftest import BatchCli


def index_entries(batch_dir: Path) -> int:
    """How many records the ledger cache holds."""
    path = ledger_cache.cache_path(batch_dir)
    assert path is not None
    with sqlite3.connect(path) as db:
        (count,) = db.execute("SELECT count(*) FROM records").fetchone()
    return int(count)


def prepare_index(batch_dir: Path, use: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Leave a cache that holds every record (``use``), or none at all."""
    path = ledger_cache.cache_path(batch_dir)
    assert path is not None
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    if use:
        # Without the racy window, fresh records are cached too: no 2-second wait.
        with monkeypatch.context() as patch:
            patch.setattr(ledger_scan, "RACY_WINDOW_NS", 0)
            load_recorded_runs(batch_dir)
        assert index_entries(batch_dir) == len(list(batch_dir.glob("*/*/run-meta.json")))


@pytest.mark.parametrize("use_index", [False, True], ids=["no-index", "index"])
def test_a_future_timestamp_never_outranks_a_later_attempt(
    batch_cli: BatchCli, monkeypatch: pytest.MonkeyPatch, use_index: bool
) -> None:
    cli = batch_cli
    sweep = cli.write_sweep({"c1": [f"flaky={cli.dir}/flaky-c1"], "c2": []})
    assert cli.run(sweep, "--no-progress").returncode == 1  # c1: exit 2, infra_failure
    assert cli.runs_counted() == ["c1", "c2"]
    batch_dir = cli.only_batch_dir()

    # Attempt 1 ran on a host whose clock is a day fast.
    (error_path,) = batch_dir.glob("*/c1-*/run-meta.json")
    record = json.loads(error_path.read_text())
    assert (record["outcome"], record["attempt"]) == ("error", 1)
    ahead = utc_stamp(datetime.now(UTC) + timedelta(days=1))
    record["timestamp"] = record["finished_at"] = ahead
    error_path.write_text(json.dumps(record, indent=2))

    retried = cli.run(sweep, "--retry-failed", "--no-progress")
    assert retried.returncode == 0, retried.stdout + retried.stderr
    assert cli.runs_counted() == ["c1"]
    passed = [r for r in cli.records(batch_dir) if r["test_case"] == "c1" and r["attempt"] == 2]
    assert [r["outcome"] for r in passed] == ["passed"]
    assert passed[0]["timestamp"] < ahead  # older by the clock, newer by the attempt

    prepare_index(batch_dir, use_index, monkeypatch)
    again = cli.run(sweep, "--retry-failed", "--no-progress")
    assert again.returncode == 0, again.stdout + again.stderr
    assert cli.runs_counted() == []  # nothing to retry: c1's newest record passed
    assert "2 carried over, 0 to run" in again.stdout

    prepare_index(batch_dir, use_index, monkeypatch)
    resumed = cli.run(sweep, "--resume", "--no-progress")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert cli.runs_counted() == []
    rows = {row["case"]: row for row in cli.summary(batch_dir)["jobs"]}
    assert (rows["c1"]["status"], rows["c1"]["resumed"], rows["c1"]["attempts"]) == (
        "passed",
        True,
        2,
    )
    assert rows["c1"]["run_dir"] == passed[0]["run_dir"]

    # Every other reader of the ledger picks the same record.
    prepare_index(batch_dir, use_index, monkeypatch)
    status = json.loads(cli.run("status", batch_dir, "--format", "json").stdout)
    assert status["recorded"] == {"passed": 2, "failed": 0, "error": 0}
    stats = cli.run("stats", batch_dir, "--source", "records", "--format", "json")
    assert stats.returncode == 0, stats.stderr
    overall = json.loads(stats.stdout)["overall"]
    assert (overall["passed"], overall["error"]) == (2, 0)


# --- the ordering itself ------------------------------------------------------------------


def meta(attempt: int | None, at: float, run_dir: str = "m/run") -> RunMeta:
    return RunMeta("c01", "m", "passed", timestamp=stamp(at), attempt=attempt, run_dir=run_dir)


@given(
    attempts=st.lists(st.integers(1, 50), min_size=1, max_size=8, unique=True),
    seconds=st.lists(st.floats(-1e9, 1e9), min_size=8, max_size=8),
)
def test_the_highest_attempt_is_the_newest_whatever_the_clocks_say(
    attempts: list[int], seconds: list[float]
) -> None:
    records = [meta(a, at) for a, at in zip(attempts, seconds, strict=False)]
    assert max(records, key=record_order).attempt == max(attempts)


@given(
    attempt=st.integers(1, 50),
    ours_at=st.floats(-1e9, 1e9),
    foreign_at=st.floats(-1e9, 1e9),
)
def test_a_record_naming_no_attempt_is_older_than_any_that_names_one(
    attempt: int, ours_at: float, foreign_at: float
) -> None:
    ours, foreign = meta(attempt, ours_at, "m/a"), meta(None, foreign_at, "m/z")
    assert record_order(ours) > record_order(foreign)


@given(at=st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=2), attempt=st.none() | st.just(3))
def test_records_of_one_attempt_go_by_timestamp_then_run_dir(
    at: list[float], attempt: int | None
) -> None:
    first, second = meta(attempt, at[0], "m/a"), meta(attempt, at[1], "m/b")
    newest = max([first, second], key=record_order)
    if stamp(at[0]) == stamp(at[1]):
        assert newest is second  # the greater run dir path
    else:
        assert newest is (first if at[0] > at[1] else second)


@pytest.mark.parametrize("use_index", [False, True], ids=["no-index", "index"])
def test_the_ledger_reads_the_same_newest_record_with_and_without_its_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, use_index: bool
) -> None:
    write_record(tmp_path, "c01", "m", outcome="error", at=86400, attempt=1, dir_name="z-a1")
    write_record(tmp_path, "c01", "m", outcome="passed", at=0, attempt=2, dir_name="a-a2")
    # Another harness's record, later by the clock but naming no attempt.
    foreign = make_meta("c01", "m", outcome="failed", at=99999)
    del foreign["attempt"]
    write_record(tmp_path, "c01", "m", raw=foreign, dir_name="zz-foreign")
    write_record(tmp_path, "c02", "m", raw=foreign | {"test_case": "c02"}, dir_name="x")
    write_record(tmp_path, "c02", "m", outcome="error", at=0, dir_name="w")
    prepare_index(tmp_path, use_index, monkeypatch)

    recorded = load_recorded_runs(tmp_path, use_index=use_index)

    assert (recorded["c01", "m", 1].outcome, recorded["c01", "m", 1].run_dir) == (
        "passed",
        "m/a-a2",
    )
    assert (recorded["c02", "m", 1].outcome, recorded["c02", "m", 1].attempt) == ("error", 1)
