"""batch-summary.json: every job's true status and duration, carried-over results included."""

from __future__ import annotations

import json
import os
import re
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import pytest
from helpers.builders import make_job, make_jobs, start_run, write_record
from helpers.paths import REPO_ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from batch.layout import SUMMARY_NAME
from batch.plan.jobs import STATUSES, Job
from batch.plan.resume import apply_resume
from batch.summary import write as summary_module
from batch.summary.read import check_summary, read_summary, summary_rows
from batch.summary.write import (
    SummaryLines,
    SummaryRow,
    ThrottledWriter,
    build_summary,
    count_statuses,
    write_summary,
)
from run_support import jsonio
from run_support.results import load_recorded_runs

ROOT = REPO_ROOT
SCHEMA = json.loads((ROOT / "docs" / "schemas" / "batch-summary.schema.json").read_text())


def summary_of(jobs: list[Job], state: str = "running", **fields: Any) -> dict[str, Any]:
    options: dict[str, Any] = {
        "batch_id": "batch-20261130T031500Z",
        "state": state,
        "started_at": "2026-11-30T03:15:00.000000Z",
        "finished_at": None if state == "running" else "2026-11-30T04:15:00.000000Z",
        "elapsed_seconds": 3600.0,
        "max_concurrent": 4,
    }
    return build_summary(jobs, **(options | fields))


def read_back(summary: dict[str, Any]) -> None:
    """What every reader does first: the checks of read_summary."""
    from batch.summary.read import check_summary

    check_summary(summary)


def rows_by_case(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["case"]: row for row in summary["jobs"]}


# --- carried-over results -----------------------------------------------------------------


def test_carried_status_and_duration_survive_into_the_summary(tmp_path: Path) -> None:
    # The bug this replaces: a resumed batch wrote every carried job as "skipped", 0 s.
    write_record(tmp_path, "c01", "m", outcome="passed", duration=61.88)
    write_record(tmp_path, "c02", "m", outcome="failed", duration=12.5)
    start_run(tmp_path, "c03", "m")  # killed mid-run: runs again
    plan = apply_resume(make_jobs(["c01", "c02", "c03"], ["m"]), load_recorded_runs(tmp_path))
    write_summary(tmp_path, summary_of(plan.jobs))

    summary = read_summary(tmp_path)
    jsonschema.validate(summary, SCHEMA)
    rows = rows_by_case(summary)
    assert (rows["c01"]["status"], rows["c01"]["duration_seconds"]) == ("passed", 61.88)
    assert (rows["c02"]["status"], rows["c02"]["duration_seconds"]) == ("failed", 12.5)
    assert rows["c02"]["failure_category"] == "model_failure"
    assert [rows[c]["resumed"] for c in ("c01", "c02", "c03")] == [True, True, False]
    assert (rows["c03"]["status"], rows["c03"]["duration_seconds"]) == ("pending", None)
    assert summary["totals"] == {
        "passed": 1,
        "failed": 1,
        "error": 0,
        "skipped": 0,
        "pending": 1,
        "running": 0,
    }


def test_a_carried_row_points_at_the_run_that_decided_it(tmp_path: Path) -> None:
    run_dir = write_record(tmp_path, "c01", "a/b", outcome="error", category="task_data", attempt=2)
    plan = apply_resume([make_job("c01", "a/b")], load_recorded_runs(tmp_path))
    (row,) = summary_of(plan.jobs)["jobs"]
    assert row["run_dir"] == run_dir.relative_to(tmp_path).as_posix()
    assert (row["status"], row["failure_category"], row["attempts"]) == ("error", "task_data", 2)


def test_a_job_finished_by_this_invocation_is_not_marked_resumed() -> None:
    job = make_job("c01", "m", status="failed", duration_seconds=3.0, attempts=1, run_dir="m/r")
    (row,) = summary_of([job])["jobs"]
    assert (row["resumed"], row["status"], row["duration_seconds"]) == (False, "failed", 3.0)


# --- totals -------------------------------------------------------------------------------


def test_every_total_is_present_when_there_are_no_jobs() -> None:
    summary = summary_of([])
    assert summary["totals"] == dict.fromkeys(STATUSES, 0)
    jsonschema.validate(summary, SCHEMA)


def test_totals_equal_the_row_counts() -> None:
    statuses = ["passed", "passed", "failed", "error", "skipped", "pending", "running", "error"]
    jobs = [make_job(f"c{i}", "m", status=status) for i, status in enumerate(statuses)]
    summary = summary_of(jobs)
    for status in STATUSES:
        assert summary["totals"][status] == sum(row["status"] == status for row in summary["jobs"])
    assert count_statuses(jobs) == summary["totals"]


# --- the document -------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["running", "complete", "interrupted"])
def test_every_state_matches_the_published_schema(state: str) -> None:
    jobs = [
        make_job("c1", "m", status="passed", duration_seconds=1.0, resumed=True, attempts=1),
        make_job("c2", "m", status="running", attempts=1, run_dir="m/r"),
        make_job("c3", "m", status="skipped"),
        make_job("c4", "m", status="error", failure_category="api_or_credit", attempts=2),
    ]
    jsonschema.validate(summary_of(jobs, state), SCHEMA)


@pytest.mark.parametrize(
    "damage",
    [
        lambda s: s["totals"].pop("skipped"),
        lambda s: s["jobs"][0].pop("resumed"),
        lambda s: s["jobs"][0].update(status="carried"),
        lambda s: s.update(state="paused"),
        lambda s: s.update(schema=2),
    ],
)
def test_the_schema_rejects_a_summary_that_breaks_the_format(damage: Any) -> None:
    summary = summary_of([make_job("c1", "m")])
    damage(summary)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(summary, SCHEMA)


def test_durations_are_rounded_to_the_millisecond() -> None:
    (row,) = summary_of([make_job(status="passed", duration_seconds=1.23456789)])["jobs"]
    assert row["duration_seconds"] == 1.235


def test_keys_of_a_row_are_the_documented_ones_in_order() -> None:
    (row,) = summary_of([make_job()])["jobs"]
    assert list(row) == [
        "case",
        "model",
        "status",
        "duration_seconds",
        "resumed",
        "failure_category",
        "attempts",
        "run_dir",
    ]


def test_the_row_type_has_the_keys_the_writer_writes_in_its_order() -> None:
    steps = [{"name": "eval", "status": "passed", "duration_seconds": 6.0}]
    # Every optional key set: steps, skip_reason (a retry a policy did not start), usage,
    # reason, a repeat past the first and a score.
    job = make_job(
        status="error",
        steps=steps,
        skip_reason="breaker open: 5 consecutive x",
        usage={"requests": 1},
        reason="exit code 2",
        repeat=2,
        score=0.5,
    )
    (row,) = summary_of([job])["jobs"]
    assert list(row) == list(SummaryRow.__annotations__)


def test_a_row_has_skip_reason_only_when_a_policy_skipped_the_job() -> None:
    skipped = make_job(case="c01", status="skipped", skip_reason="breaker open: 5 consecutive x")
    summary = summary_of([skipped, make_job(case="c02", status="passed")])
    assert [row.get("skip_reason") for row in summary["jobs"]] == [
        "breaker open: 5 consecutive x",
        None,
    ]
    assert "skip_reason" not in summary["jobs"][1]
    read_back(summary)
    jsonschema.validate(summary, SCHEMA)


def test_a_halted_summary_has_a_top_level_halt_and_others_have_none() -> None:
    halt = {"rule": "setup", "mode": "soon", "message": "first 8 jobs all ended in x"}
    halted = summary_of([make_job(status="skipped")], "halted", halt=halt)
    assert halted["state"] == "halted"
    assert halted["halt"] == halt
    read_back(halted)
    jsonschema.validate(halted, SCHEMA)
    assert "halt" not in summary_of([make_job()])


def test_a_reader_gets_the_rows_of_a_summary_with_the_checks_of_check_summary() -> None:
    summary = summary_of([make_job(case="c01"), make_job(case="c02")])
    assert [row["case"] for row in summary_rows(summary)] == ["c01", "c02"]
    for jobs, message in [
        (None, "not a batch summary (no 'jobs' list)"),
        (["c01"], "job 0: is a string, not an object"),
        ([{"case": "c01", "model": "m"}], "job 0 needs string 'case', 'model' and 'status'"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            summary_rows({"jobs": jobs})


# --- writing and reading ------------------------------------------------------------------


def test_a_failed_write_leaves_the_previous_summary_whole(tmp_path: Path) -> None:
    write_summary(tmp_path, summary_of([make_job("c1", "m")]))
    before = (tmp_path / SUMMARY_NAME).read_bytes()
    broken = summary_of([make_job("c1", "m")]) | {"oops": object()}
    with pytest.raises(TypeError):
        write_summary(tmp_path, broken)
    assert (tmp_path / SUMMARY_NAME).read_bytes() == before
    assert os.listdir(tmp_path) == [SUMMARY_NAME]


def test_a_rewrite_replaces_the_summary(tmp_path: Path) -> None:
    job = make_job("c1", "m")
    write_summary(tmp_path, summary_of([job]))
    write_summary(tmp_path, summary_of([attrs.evolve(job, status="passed")], "complete"))
    summary = read_summary(tmp_path)
    assert (summary["state"], summary["totals"]["passed"]) == ("complete", 1)


def test_reading_a_missing_summary_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_summary(tmp_path)


@pytest.mark.parametrize("text", ['{"jobs": [', "[]", '{"jobs": {}}', ""])
def test_reading_something_that_is_not_a_summary_raises_value_error(
    tmp_path: Path, text: str
) -> None:
    (tmp_path / SUMMARY_NAME).write_text(text)
    with pytest.raises(ValueError):
        read_summary(tmp_path)


# --- throttling ---------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_throttled_writer_writes_at_most_once_per_interval() -> None:
    clock, writes = FakeClock(), []
    writer = ThrottledWriter(lambda: writes.append(clock.now), interval=2.0, clock=clock)
    writer.changed()  # the first change is written at once
    clock.now += 0.5
    writer.changed()
    clock.now += 1.0
    writer.changed()
    assert (writes, writer.dirty) == ([1000.0], True)
    clock.now += 0.5
    writer.changed()
    assert (writes, writer.dirty) == ([1000.0, 1002.0], False)


def test_a_slow_rewrite_spaces_out_the_next_beyond_the_interval() -> None:
    # A 20,000-row summary on a busy machine: a rewrite that takes 0.5 s must not recur
    # every 2 s, or the driver's cost per job grows with the sweep.
    clock, writes = FakeClock(), []

    def slow_write() -> None:
        writes.append(clock.now)
        clock.now += 0.5

    writer = ThrottledWriter(slow_write, interval=2.0, clock=clock)
    writer.changed()
    clock.now += 2.0
    writer.changed()
    assert (writes, writer.dirty, writer.due()) == ([1000.0], True, False)
    clock.now += 7.5
    assert not writer.due()
    clock.now += 0.5  # 20 times the last write's 0.5 s after it ended
    writer.changed()
    assert writes == [1000.0, 1010.5]


def test_an_interval_of_zero_writes_every_change_however_slow() -> None:
    clock, writes = FakeClock(), []

    def slow_write() -> None:
        writes.append(clock.now)
        clock.now += 0.5

    writer = ThrottledWriter(slow_write, interval=0.0, clock=clock)
    writer.changed()
    writer.changed()
    assert writes == [1000.0, 1000.5]


def test_throttled_writer_flush_always_writes() -> None:
    clock, writes = FakeClock(), []
    writer = ThrottledWriter(lambda: writes.append(clock.now), interval=60.0, clock=clock)
    writer.changed()
    clock.now += 1
    writer.changed()
    writer.flush()
    assert (writes, writer.dirty) == ([1000.0, 1001.0], False)


def test_a_multi_step_row_lists_its_steps_and_matches_the_schema() -> None:
    steps = [
        {"name": "eval", "status": "passed", "duration_seconds": 6.0, "exit_code": 0},
        {"name": "judge", "status": "failed", "duration_seconds": 3.0, "exit_code": 1},
    ]
    summary = summary_of([make_job(status="failed", duration_seconds=9.0, steps=steps)])
    jsonschema.validate(summary, SCHEMA)
    assert summary["jobs"][0]["steps"] == [
        {"name": "eval", "status": "passed", "duration_seconds": 6.0},
        {"name": "judge", "status": "failed", "duration_seconds": 3.0},
    ]
    (plain,) = summary_of([make_job()])["jobs"]
    assert "steps" not in plain


def test_a_row_has_usage_when_reported_and_a_reason_only_when_not_passed() -> None:
    spent = {"input_tokens": 10, "cost_usd": 0.01}
    jobs = [
        make_job(case="c01", status="passed", usage=spent, reason="stale"),
        make_job(case="c02", status="error", reason="timeout after 1m00s"),
        make_job(case="c03", status="failed"),
    ]
    summary = summary_of(jobs)
    jsonschema.validate(summary, SCHEMA)
    first, second, third = summary["jobs"]
    assert first["usage"] == spent and "reason" not in first
    assert second["reason"] == "timeout after 1m00s" and "usage" not in second
    assert not {"usage", "reason"} & third.keys()


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("usage", 5, "job 0: 'usage' is an integer, not an object or null"),
        ("reason", ["x"], "job 0: 'reason' is a list, not a string or null"),
    ],
)
def test_a_row_with_usage_or_reason_of_the_wrong_type_is_refused(
    key: str, value: Any, message: str
) -> None:
    summary = summary_of([make_job()])
    summary["jobs"][0][key] = value
    with pytest.raises(ValueError, match=re.escape(message)):
        check_summary(summary)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(summary, SCHEMA)


@pytest.mark.parametrize("piece_rows", [1, 2, 4096])
def test_the_summary_is_valid_json_with_one_row_per_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, piece_rows: int
) -> None:
    """Each job row is on a line of its own (a reader streams them, docs/summary.md), and the
    file reads back as the very summary written, odd text included, however many rows each
    piece of the write holds."""
    monkeypatch.setattr(summary_module, "PIECE_ROWS", piece_rows)
    jobs = make_jobs(["c01", "c02", "line\nbreak"], ["openai/gpt-4o", "modèle"])
    jobs[3].steps = [{"name": "eval", "status": "failed", "duration_seconds": 1.0}]
    jobs[4].usage = {"requests": 2, "cost_usd": 0.5}
    summary = summary_of(jobs)
    write_summary(tmp_path, summary)
    text = (tmp_path / SUMMARY_NAME).read_text(encoding="utf-8")
    assert json.loads(text) == summary
    lines = text.splitlines()
    start = lines.index('  "jobs": [')
    rows = lines[start + 1 : start + 1 + len(jobs)]
    assert [json.loads(line.removesuffix(",")) for line in rows] == summary["jobs"]
    assert lines[start + 1 + len(jobs)].startswith("  ]")


def test_a_summary_without_jobs_is_written_as_the_encoder_writes_it(tmp_path: Path) -> None:
    summary = summary_of([])
    write_summary(tmp_path, summary)
    assert (tmp_path / SUMMARY_NAME).read_bytes() == jsonio.dumps(summary, indent=True)


# --- the rows of a running sweep, encoded again only for the jobs that changed ------------

_CHANGES = st.sampled_from(["start", "pass", "fail", "usage", "steps", "skip", "all"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(min_value=0, max_value=5), _CHANGES), max_size=25))
def test_kept_lines_write_every_rewrite_as_the_whole_summary_would(
    tmp_path_factory: pytest.TempPathFactory, changes: list[tuple[int, str]]
) -> None:
    """A running sweep's summary, its rows' text kept between rewrites and each encoded again
    once its job is marked changed, is byte for byte the summary made from every job afresh."""
    jobs = make_jobs(["c01", "c02", "c03"], ["m1", "m2"])
    kept, fresh = tmp_path_factory.mktemp("kept"), tmp_path_factory.mktemp("fresh")
    lines = SummaryLines(jobs)
    for position, change in [(0, "all"), *changes]:
        job = jobs[position]
        if change == "start":
            job.status, job.attempts = "running", (job.attempts or 0) + 1
        elif change == "pass":
            job.status, job.duration_seconds = "passed", 0.5 + position
        elif change == "fail":
            job.status, job.failure_category, job.reason = "failed", "model_failure", "exit 1"
        elif change == "usage":
            job.usage = {"requests": position + 1, "cost_usd": 0.25}
        elif change == "steps":
            job.steps = [{"name": "eval", "status": "passed", "duration_seconds": 1.0}]
        elif change == "skip":
            job.status, job.skip_reason = "skipped", "halted: 3 failures"
        lines.changed(None if change == "all" else job)
        write_summary(kept, summary_of(jobs, with_rows=False), lines)
        write_summary(fresh, summary_of(jobs))
        assert (kept / SUMMARY_NAME).read_bytes() == (fresh / SUMMARY_NAME).read_bytes()


def test_kept_lines_encode_again_only_the_jobs_marked_changed() -> None:
    """A rewrite costs what changed: an unmarked job's line is the one made before, and
    ``changed()`` with a job not of the list encodes every line again."""
    jobs = make_jobs(["c01", "c02"], ["m"])
    lines = SummaryLines(jobs)
    first = list(lines.texts())
    jobs[0].status, jobs[1].status = "running", "running"
    lines.changed(jobs[0])
    second = list(lines.texts())
    assert [json.loads(text)["status"] for text in second] == ["running", "pending"]
    assert second[1] is first[1]
    lines.changed(make_job("c09", "m"))  # not one of the list's jobs: every line again
    assert [json.loads(text)["status"] for text in lines.texts()] == ["running", "running"]


def test_kept_lines_hold_nothing_per_job_but_the_line_and_never_two_lines_of_a_job() -> None:
    """What a running sweep's driver keeps per job (docs/design.md): the line alone, and the
    last summary's encoding of every row afresh never holds the old lines beside the new."""
    jobs = [
        make_job(f"c{n:04d}", "m", status="passed", run_dir=f"m/c{n:04d}-a1") for n in range(2000)
    ]
    tracemalloc.start()
    try:
        lines = SummaryLines(jobs)
        assert tracemalloc.get_traced_memory()[0] < 1000  # no map from job to position
        size = sum(map(sys.getsizeof, lines.texts()))
        lines.changed()
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        lines.texts()
        assert tracemalloc.get_traced_memory()[1] - before < size * 0.3  # not a second copy
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("piece_rows", [1, 2, 4096])
def test_the_last_summary_encodes_each_row_as_it_writes_and_keeps_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, piece_rows: int
) -> None:
    """The summary an invocation ends with is byte for byte the one made from every job
    afresh, however many rows a piece holds; its lines are not kept (a complete batch of a
    million jobs resumed holds no line of any), and a rewrite after it is still exact."""
    monkeypatch.setattr(summary_module, "PIECE_ROWS", piece_rows)
    jobs = make_jobs(["c01", "c02", "line\nbreak"], ["openai/gpt-4o", "modèle"])
    jobs[1].status, jobs[1].duration_seconds = "passed", 2.0
    lines = SummaryLines(jobs)
    kept, fresh = tmp_path / "kept", tmp_path / "fresh"
    kept.mkdir(), fresh.mkdir()
    write_summary(kept, summary_of(jobs, with_rows=False), lines)  # lines kept
    jobs[2].status = "running"
    lines.changed(jobs[2])
    write_summary(kept, summary_of(jobs, with_rows=False), lines, last=True)
    write_summary(fresh, summary_of(jobs))
    assert (kept / SUMMARY_NAME).read_bytes() == (fresh / SUMMARY_NAME).read_bytes()
    jobs[0].status = "failed"
    lines.changed(jobs[0])
    write_summary(kept, summary_of(jobs, with_rows=False), lines)
    write_summary(fresh, summary_of(jobs))
    assert (kept / SUMMARY_NAME).read_bytes() == (fresh / SUMMARY_NAME).read_bytes()


def test_the_last_summary_holds_no_line_of_every_job_while_it_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(summary_module, "PIECE_ROWS", 64)
    jobs = [
        make_job(f"c{n:04d}", "m", status="passed", run_dir=f"m/c{n:04d}-a1") for n in range(2000)
    ]
    lines = SummaryLines(jobs)
    size = sum(map(sys.getsizeof, lines.texts()))
    tracemalloc.start()
    try:
        write_summary(tmp_path, summary_of(jobs, with_rows=False), lines, last=True)
        assert tracemalloc.get_traced_memory()[1] < size * 0.3  # a piece at a time
    finally:
        tracemalloc.stop()
