"""The ledger record: reading run-meta.json (ours and other harnesses'), status, writing."""

from __future__ import annotations

import json
import os
import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import pytest
from helpers.builders import make_meta, start_run, write_record
from helpers.paths import REPO_ROOT, TEST_DATA

from run_support import ledger_cache, ledger_scan
from run_support.results import (
    NON_MODEL_FAILURE_CATEGORIES,
    InvalidRecord,
    RecordedRuns,
    RunMeta,
    is_infra_class_failure,
    job_status,
    load_recorded_runs,
    record_reason,
    record_status,
    run_meta_from_dict,
    run_meta_to_dict,
    timestamp_order,
    utc_stamp,
    write_result,
    write_run_meta,
)

ROOT = REPO_ROOT
LEDGER_DATA = TEST_DATA / "ledger"
RUN_META_SCHEMA = json.loads((ROOT / "docs" / "schemas" / "run-meta.schema.json").read_text())


def golden(name: str) -> bytes:
    return (LEDGER_DATA / name).read_bytes()


def read_one(tmp_path: Path, data: bytes | str) -> RunMeta:
    """Put ``data`` in a batch dir as the only record and read it back."""
    write_record(tmp_path, raw=data)
    recorded = load_recorded_runs(tmp_path)
    assert not recorded.unreadable, recorded.unreadable
    (meta,) = recorded.values()
    return meta


# --- our own records ----------------------------------------------------------------------


OURS = sorted(p.name for p in (LEDGER_DATA / "ours").glob("*.json"))


@pytest.mark.parametrize("name", OURS)
def test_our_golden_records_match_the_published_schema(name: str) -> None:
    jsonschema.validate(json.loads(golden(f"ours/{name}")), RUN_META_SCHEMA)


@pytest.mark.parametrize("name", OURS)
def test_rewriting_a_golden_record_reproduces_it_byte_for_byte(tmp_path: Path, name: str) -> None:
    meta = run_meta_from_dict(json.loads(golden(f"ours/{name}")))
    path = write_run_meta(tmp_path, meta, fsync=False)
    assert path.read_bytes() == golden(f"ours/{name}")


def test_a_golden_record_reads_as_written(tmp_path: Path) -> None:
    meta = read_one(tmp_path, golden("ours/passed.json"))
    assert (meta.test_case, meta.model, meta.outcome) == ("c01", "openai/gpt-4o", "passed")
    assert meta.duration_seconds == 61.88
    assert meta.failure_category is None
    assert meta.timestamp == "2026-11-30T03:15:00.123456Z"
    assert meta.result == {"score": 1.0}


def test_unknown_keys_and_steps_survive_a_rewrite(tmp_path: Path) -> None:
    meta = run_meta_from_dict(json.loads(golden("ours/steps-and-unknown-keys.json")))
    assert meta.extra == {"git_sha": "4f2a9c1", "host": "gpu-07"}
    assert [step["name"] for step in meta.steps or []] == ["eval", "judge"]
    again = json.loads(write_run_meta(tmp_path, meta, fsync=False).read_bytes())
    assert again["git_sha"] == "4f2a9c1" and again["steps"] == meta.steps


def test_what_the_writer_writes_matches_the_schema(tmp_path: Path) -> None:
    meta = RunMeta(test_case="c01", model="m", outcome="error", failure_category="task_data")
    meta.timestamp = utc_stamp()
    written = json.loads(write_run_meta(tmp_path, meta, fsync=False).read_bytes())
    jsonschema.validate(written, RUN_META_SCHEMA)
    assert list(written)[:3] == ["schema", "test_case", "model"]


def test_a_record_of_a_failed_run_without_a_category_does_not_match_the_schema() -> None:
    # The schema is a real check, not a formality: the writer's promises are in it.
    bad = make_meta(outcome="failed", category=None)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, RUN_META_SCHEMA)


# --- other harnesses' records -------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "outcome", "category", "duration"),
    [
        ("intercepted-true.json", "passed", None, 42.5),
        ("intercepted-false.json", "failed", "model_failure", 88.0),
        ("model-not-intercepted.json", "failed", "model_failure", 0.0),
        ("infra-failure-api.json", "error", "api_or_credit", 0.0),
        ("infra-failure-bare.json", "error", "infra_failure", 0.0),
        ("outcome-uppercase.json", "passed", None, 7.0),
        ("future-schema.json", "failed", "model_failure", 1000.0),
    ],
)
def test_a_foreign_record_reads_as_the_outcome_it_states(
    tmp_path: Path, name: str, outcome: str, category: str | None, duration: float
) -> None:
    meta = read_one(tmp_path, golden(f"foreign/{name}"))
    assert (meta.outcome, meta.failure_category, meta.duration_seconds) == (
        outcome,
        category,
        duration,
    )


def test_a_foreign_record_keeps_its_own_keys(tmp_path: Path) -> None:
    meta = read_one(tmp_path, golden("foreign/intercepted-true.json"))
    assert meta.model == "openrouter/qwen/qwen3-coder:free"
    assert meta.extra == {"intercepted": True, "corpus": "v2", "tokens": {"in": 1200, "out": 310}}


def test_fields_of_the_wrong_type_read_as_their_defaults(tmp_path: Path) -> None:
    meta = read_one(tmp_path, golden("foreign/outcome-uppercase.json"))
    # "attempt": "2", "result": "ok", "steps": "eval,judge" are not what schema 1 means:
    # the record names no attempt (it counts as the first, and orders below ours).
    assert (meta.attempt, meta.attempt_number, meta.result, meta.steps) == (None, 1, {}, None)
    assert meta.exit_code == 0


def test_steps_that_are_not_objects_are_kept_not_fatal(tmp_path: Path) -> None:
    # Regression: structuring ``steps`` as list[dict] raised on ["eval", 3] and aborted the
    # whole ledger read.
    write_record(tmp_path, "c01", "m", raw=make_meta("c01", "m", steps=["eval", 3]))
    write_record(tmp_path, "c02", "m")
    recorded = load_recorded_runs(tmp_path)
    assert recorded[("c01", "m", 1)].steps == ["eval", 3]
    assert ("c02", "m", 1) in recorded


# --- records that cannot be used ----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("truncated.json", "not valid JSON"),
        ("empty.json", "empty file"),
        ("whitespace.json", "empty file"),
        ("array.json", "not an object"),
        ("string.json", "not an object"),
        ("no-model.json", "'model'"),
        ("empty-test-case.json", "'test_case'"),
        ("numeric-test-case.json", "'test_case'"),
        ("no-outcome.json", "no outcome"),
        ("unknown-outcome.json", "unknown outcome 'timeout'"),
        ("category-not-string.json", "failure_category is list"),
        ("not-utf8.json", "not valid JSON"),
    ],
)
def test_an_unusable_record_is_skipped_and_reported_with_its_reason(
    tmp_path: Path, name: str, reason: str
) -> None:
    run_dir = write_record(tmp_path, "c01", "m", raw=golden(f"broken/{name}"))
    recorded = load_recorded_runs(tmp_path)
    assert dict(recorded) == {}
    ((path, why),) = recorded.unreadable
    assert path == f"{run_dir.relative_to(tmp_path).as_posix()}/run-meta.json"
    assert reason in why


def test_a_truncated_newest_record_leaves_the_older_one_in_force(tmp_path: Path) -> None:
    write_record(tmp_path, "c01", "m", outcome="failed", at=0)
    write_record(tmp_path, "c01", "m", at=60, raw=golden("broken/truncated.json"))
    recorded = load_recorded_runs(tmp_path)
    assert recorded[("c01", "m", 1)].outcome == "failed"
    assert len(recorded.unreadable) == 1


# --- the newest record per (case, model) ---------------------------------------------------


def test_the_newest_record_wins_whatever_the_dir_names_say(tmp_path: Path) -> None:
    # Dir names sort the other way round from the timestamps.
    write_record(tmp_path, "c01", "m", outcome="error", at=0, dir_name="zzz-first-run")
    write_record(tmp_path, "c01", "m", outcome="passed", at=3600, dir_name="aaa-resumed-run")
    write_record(tmp_path, "c01", "m", outcome="failed", at=1800, dir_name="mmm-second-run")
    meta = load_recorded_runs(tmp_path)[("c01", "m", 1)]
    assert (meta.outcome, meta.run_dir) == ("passed", "m/aaa-resumed-run")


def test_the_higher_attempt_is_newest_even_when_its_host_clock_is_behind(
    tmp_path: Path,
) -> None:
    # The driver numbers attempts; a timestamp is only the clock of whichever host ran it.
    write_record(tmp_path, "c01", "m", outcome="error", attempt=1, at=3600, dir_name="a1")
    write_record(tmp_path, "c01", "m", outcome="passed", attempt=2, at=0, dir_name="a2")
    write_record(tmp_path, "c02", "m", outcome="passed", attempt=2, at=3600, dir_name="b2")
    write_record(tmp_path, "c02", "m", outcome="failed", attempt=3, at=0, dir_name="b3")
    # Another harness's record names no attempt: below every record that names one.
    foreign = make_meta("c03", "m", "passed", attempt=None, at=3600)  # type: ignore[arg-type]
    write_record(tmp_path, "c03", "m", raw=foreign, dir_name="z-foreign")
    write_record(tmp_path, "c03", "m", outcome="error", attempt=1, at=0, dir_name="a1")
    recorded = load_recorded_runs(tmp_path)
    assert recorded[("c03", "m", 1)].run_dir == "m/a1"
    assert (recorded[("c01", "m", 1)].outcome, recorded[("c01", "m", 1)].attempt) == ("passed", 2)
    assert (recorded[("c02", "m", 1)].outcome, recorded[("c02", "m", 1)].attempt) == ("failed", 3)


def test_equal_timestamps_go_to_the_greater_run_dir_name(tmp_path: Path) -> None:
    write_record(tmp_path, "c01", "m", outcome="failed", dir_name="c01-m-a2")
    write_record(tmp_path, "c01", "m", outcome="passed", dir_name="c01-m-a1")
    assert load_recorded_runs(tmp_path)[("c01", "m", 1)].run_dir == "m/c01-m-a2"


def test_a_record_without_a_timestamp_is_older_than_any_with_one(tmp_path: Path) -> None:
    write_record(tmp_path, "c01", "m", outcome="failed", timestamp="", dir_name="z")
    write_record(tmp_path, "c01", "m", outcome="passed", at=-(10**6), dir_name="a")
    assert load_recorded_runs(tmp_path)[("c01", "m", 1)].outcome == "passed"


@pytest.mark.parametrize("model", ["openai/gpt-4o", "qwen3:8b", "hf/org/name:q4_K_M"])
def test_models_with_slash_and_colon_are_keyed_by_their_own_names(
    tmp_path: Path, model: str
) -> None:
    run_dir = write_record(tmp_path, "c01", model, outcome="failed")
    assert "/" not in run_dir.parent.name and ":" not in run_dir.parent.name
    recorded = load_recorded_runs(tmp_path)
    assert list(recorded) == [("c01", model, 1)]


def test_identity_comes_from_the_record_not_the_directory(tmp_path: Path) -> None:
    write_record(tmp_path, "c01", "a/b", dir_name="a-b/renamed-by-hand")
    write_record(tmp_path, "c02", "a/b", dir_name="other-model/c02-misfiled")
    assert sorted(load_recorded_runs(tmp_path)) == [("c01", "a/b", 1), ("c02", "a/b", 1)]


def test_run_dir_is_where_the_record_was_found(tmp_path: Path) -> None:
    write_record(tmp_path, "c01", "m", dir_name="m/moved", run_dir="elsewhere/original")
    assert load_recorded_runs(tmp_path)[("c01", "m", 1)].run_dir == "m/moved"


def test_recorded_runs_start_empty() -> None:
    recorded = RecordedRuns()
    assert (dict(recorded), recorded.unreadable, recorded.incomplete) == ({}, [], [])


@pytest.mark.parametrize("make", [lambda p: p, lambda p: p.mkdir() or p])
def test_an_absent_or_empty_batch_dir_has_no_records(tmp_path: Path, make: Any) -> None:
    batch_dir = make(tmp_path / "batch")
    recorded = load_recorded_runs(batch_dir)
    assert (dict(recorded), recorded.unreadable, recorded.incomplete) == ({}, [], [])


# --- status -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "category", "status"),
    [
        ("passed", None, "passed"),
        ("failed", "model_failure", "failed"),
        ("failed", "judge_rejected", "failed"),
        ("error", "infra_failure", "error"),
        ("error", "api_or_credit", "error"),
        ("error", "task_data", "error"),
        ("error", "build_instruction", "error"),
        ("failed", "api_or_credit", "error"),
        ("error", "model_failure", "failed"),
        ("error", "judge_rejected", "failed"),
    ],
)
def test_status_follows_the_failure_category(outcome: str, category: str, status: str) -> None:
    meta = run_meta_from_dict(make_meta(outcome=outcome, category=category))
    assert job_status(meta) == status
    assert is_infra_class_failure(meta) == (status == "error")


def test_the_sweeps_own_non_model_categories_decide_what_is_an_error() -> None:
    judged = run_meta_from_dict(make_meta(outcome="failed", category="judge_rejected"))
    infra = run_meta_from_dict(make_meta(outcome="error", category="infra_failure"))
    assert job_status(judged, {"judge_rejected"}) == "error"
    assert job_status(infra, {"judge_rejected"}) == "failed"


def test_a_records_status_comes_with_its_category_and_a_pass_has_none() -> None:
    judged = run_meta_from_dict(make_meta(outcome="failed", category="judge_rejected"))
    infra = run_meta_from_dict(make_meta(outcome="error", category="infra_failure"))
    passed = run_meta_from_dict(make_meta(outcome="passed", category=None))
    assert record_status(judged) == ("failed", "judge_rejected")
    assert record_status(judged, {"judge_rejected"}) == ("error", "judge_rejected")
    assert record_status(infra) == ("error", "infra_failure")
    # A category on a pass (a hand-made record) says nothing about a failure: never shown.
    assert record_status(attrs.evolve(passed, failure_category="infra_failure")) == ("passed", None)


def test_a_missing_category_follows_the_outcome() -> None:
    assert run_meta_from_dict(make_meta(outcome="failed", category=None)).failure_category == (
        "model_failure"
    )
    assert run_meta_from_dict(make_meta(outcome="error", category=None)).failure_category == (
        "infra_failure"
    )
    passed = run_meta_from_dict(make_meta(outcome="passed", category="infra_failure"))
    assert passed.failure_category is None


def test_the_default_non_model_categories_are_the_documented_four() -> None:
    documented = {"infra_failure", "api_or_credit", "task_data", "build_instruction"}
    assert documented == NON_MODEL_FAILURE_CATEGORIES


# --- duration_seconds ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [
        (61.88, 61.88),
        (7, 7.0),
        ("12.5", 12.5),
        ("n/a", 0.0),
        ("", 0.0),
        (None, 0.0),
        (True, 0.0),
        ([3], 0.0),
        ("inf", 0.0),
        ("nan", 0.0),
        pytest.param(10**400, 0.0, id="int-past-float-range"),
    ],
)
def test_an_unreadable_duration_reads_as_zero_and_keeps_the_outcome(
    raw: Any, seconds: float
) -> None:
    # 10**400: regression, float() raised OverflowError and aborted the ledger read.
    meta = run_meta_from_dict(make_meta(outcome="failed", duration=raw))
    assert (meta.duration_seconds, meta.outcome) == (seconds, "failed")


def test_a_missing_duration_reads_as_zero(tmp_path: Path) -> None:
    record = make_meta()
    del record["duration_seconds"]
    assert read_one(tmp_path, json.dumps(record)).duration_seconds == 0.0


def test_a_huge_integer_duration_on_disk_does_not_abort_the_read(tmp_path: Path) -> None:
    text = json.dumps(make_meta("c01", "m", duration=0)).replace(
        '"duration_seconds": 0', '"duration_seconds": 1' + "0" * 400
    )
    assert read_one(tmp_path, text).duration_seconds == 0.0


# --- timestamps ---------------------------------------------------------------------------


def test_utc_stamp_is_iso_utc_with_microseconds_and_z() -> None:
    moment = datetime(2026, 11, 30, 4, 15, 0, 123, tzinfo=timezone(timedelta(hours=1)))
    assert utc_stamp(moment) == "2026-11-30T03:15:00.000123Z"


def test_timestamps_order_by_instant_not_by_text() -> None:
    assert timestamp_order("2026-11-30T04:00:00+02:00") < timestamp_order("2026-11-30T03:00:00Z")


def test_naive_timestamps_are_taken_as_utc() -> None:
    assert timestamp_order("2026-11-30 03:00:00") == datetime(2026, 11, 30, 3, tzinfo=UTC)


@pytest.mark.parametrize("stamp", ["", "yesterday", "2026-13-45T00:00:00Z"])
def test_unparsable_timestamps_sort_oldest(stamp: str) -> None:
    assert timestamp_order(stamp) < timestamp_order("0001-01-02T00:00:00Z")


# --- writing ------------------------------------------------------------------------------


def test_write_run_meta_leaves_no_temporary_file(tmp_path: Path) -> None:
    meta = run_meta_from_dict(make_meta())
    write_run_meta(tmp_path, meta)
    write_run_meta(tmp_path, meta)
    assert sorted(os.listdir(tmp_path)) == ["run-meta.json"]


def test_a_written_record_reads_back_equal(tmp_path: Path) -> None:
    meta = run_meta_from_dict(make_meta("c/1", "a:b", outcome="error", category="task_data"))
    meta.extra = {"note": "kept"}
    run_dir = tmp_path / "m" / "r"
    run_dir.mkdir(parents=True)
    write_run_meta(run_dir, meta)
    (again,) = load_recorded_runs(tmp_path).values()
    assert run_meta_to_dict(again) == run_meta_to_dict(meta) | {"run_dir": "m/r"}


def cached_run_dirs(batch_dir: Path) -> list[str]:
    path = ledger_cache.cache_path(batch_dir)
    assert path is not None
    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute("SELECT run_dir FROM records ORDER BY run_dir")]


def test_a_record_in_the_drivers_layout_is_put_in_the_ledger_cache(tmp_path: Path) -> None:
    laid_out = tmp_path / "m" / "c01-m-a1"
    laid_out.mkdir(parents=True)
    write_run_meta(laid_out, RunMeta("c01", "m", "passed", run_dir="m/c01-m-a1"))
    assert cached_run_dirs(tmp_path) == ["c01-m-a1"]
    # Not where the record says it is: not cached (the cache would key it wrongly).
    (tmp_path / "moved").mkdir()
    write_run_meta(tmp_path / "moved", RunMeta("c02", "m", "passed", run_dir="m/c02"))
    # A record that would not read back as one is written, but never cached.
    (tmp_path / "m" / "c03").mkdir()
    write_run_meta(tmp_path / "m" / "c03", RunMeta("c03", "", "passed", run_dir="m/c03"))
    assert cached_run_dirs(tmp_path) == ["c01-m-a1"]
    assert (tmp_path / "m" / "c03" / "run-meta.json").exists()


def test_write_result_reports_the_outcome_for_the_driver(tmp_path: Path) -> None:
    path = write_result(tmp_path, "failed", "judge_rejected", score=0.25)
    assert json.loads(path.read_text()) == {
        "outcome": "failed",
        "failure_category": "judge_rejected",
        "score": 0.25,
    }
    # Indented, as every file of the ledger, for a human reading it.
    assert path.read_text().startswith('{\n  "outcome": "failed",\n')


def test_write_result_uses_the_run_dir_the_driver_gave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BATCH_RUN_DIR", str(tmp_path))
    assert write_result(None, "passed") == tmp_path / "result.json"


def test_write_result_without_a_run_dir_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BATCH_RUN_DIR", raising=False)
    with pytest.raises(ValueError) as caught:
        write_result(None, "passed")
    assert str(caught.value) == "no run_dir given and $BATCH_RUN_DIR is not set"


def test_write_result_refuses_an_unknown_outcome(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as caught:
        write_result(tmp_path, "timeout")  # type: ignore[arg-type]
    assert str(caught.value) == (
        "outcome must be one of ['error', 'failed', 'passed'], not 'timeout'"
    )
    assert not (tmp_path / "result.json").exists()


def test_write_result_refuses_a_category_that_is_not_a_string(tmp_path: Path) -> None:
    with pytest.raises(TypeError) as caught:
        write_result(tmp_path, "failed", 3)  # type: ignore[arg-type]
    assert str(caught.value) == "failure_category must be a string or None"
    assert not (tmp_path / "result.json").exists()


def test_run_meta_from_dict_refuses_to_guess_an_identity() -> None:
    with pytest.raises(InvalidRecord, match="model"):
        run_meta_from_dict({"test_case": "c01", "intercepted": True})


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (["c01"], "record is a JSON list, not an object"),
        ({"model": "m", "outcome": "passed"}, "missing or non-string 'test_case'"),
        ({"test_case": 3, "model": "m", "outcome": "passed"}, "missing or non-string 'test_case'"),
        ({"test_case": "c01", "model": "", "outcome": "passed"}, "missing or non-string 'model'"),
        (
            {"test_case": "c01", "model": ["m"], "outcome": "passed"},
            "missing or non-string 'model'",
        ),
        (
            {"test_case": "c01", "model": "m\ud800", "outcome": "passed"},
            "'test_case' or 'model' is not valid Unicode text (a lone surrogate)",
        ),
        (
            {"test_case": "c\udfff", "model": "m", "outcome": "passed"},
            "'test_case' or 'model' is not valid Unicode text (a lone surrogate)",
        ),
        ({"test_case": "c01", "model": "m"}, "no outcome"),
        ({"test_case": "c01", "model": "m", "outcome": "timeout"}, "unknown outcome 'timeout'"),
        (
            {"test_case": "c01", "model": "m", "outcome": "failed", "failure_category": 3},
            "failure_category is int, not a string",
        ),
        (
            {"test_case": "c01", "model": "m", "outcome": "failed", "failure_category": "\ud800"},
            "failure_category is not valid Unicode text (a lone surrogate)",
        ),
    ],
)
def test_an_unusable_record_says_exactly_why(raw: Any, why: str) -> None:
    with pytest.raises(InvalidRecord) as caught:
        run_meta_from_dict(raw)
    assert str(caught.value) == why


@pytest.mark.parametrize(
    ("flags", "category"),
    [
        ({"infra_failure": True, "failure_category": "api_or_credit"}, "api_or_credit"),
        ({"intercepted": False, "failure_category": "wrong_answer"}, "wrong_answer"),
        ({"model_not_intercepted": True, "failure_category": "wrong_answer"}, "wrong_answer"),
    ],
)
def test_a_foreign_flag_keeps_the_category_the_record_names(
    flags: dict[str, Any], category: str
) -> None:
    meta = run_meta_from_dict({"test_case": "c01", "model": "m", **flags})
    assert meta.failure_category == category


@pytest.mark.parametrize("duration", [float("nan"), float("inf"), float("-inf")])
def test_a_duration_that_is_not_a_finite_number_reads_as_zero(duration: float) -> None:
    raw = {"test_case": "c01", "model": "m", "outcome": "passed", "duration_seconds": duration}
    assert run_meta_from_dict(raw).duration_seconds == 0.0
    assert run_meta_from_dict({**raw, "duration_seconds": 2.5}).duration_seconds == 2.5


def test_a_record_keeps_its_schema_and_a_timestamp_that_is_not_text_reads_as_empty() -> None:
    raw = {"test_case": "c01", "model": "m", "outcome": "passed"}
    assert run_meta_from_dict({**raw, "schema": 2}).schema == 2
    assert run_meta_from_dict({**raw, "schema": "2"}).schema == 1
    assert run_meta_from_dict({**raw, "timestamp": 1733000000}).timestamp == ""


def test_a_foreign_key_named_extra_is_kept_as_one_of_its_own() -> None:
    meta = run_meta_from_dict({"test_case": "c01", "model": "m", "outcome": "passed", "extra": 5})
    assert meta.extra == {"extra": 5}
    assert run_meta_to_dict(meta)["extra"] == 5


def test_a_record_built_from_its_identity_and_outcome_alone() -> None:
    # What the runner relies on when it fills in only what it knows: a first attempt.
    meta = RunMeta("c01", "m", "passed")
    assert meta.key == ("c01", "m", 1)
    assert run_meta_to_dict(meta) == {
        "schema": 1, "test_case": "c01", "model": "m", "timestamp": "", "finished_at": None,
        "duration_seconds": 0.0, "outcome": "passed", "failure_category": None,
        "stop_reason": None, "exit_code": None, "attempt": 1, "batch_id": None,
        "run_dir": None, "result": {},
    }  # fmt: skip


def test_a_pass_is_never_a_non_model_failure_whatever_its_category() -> None:
    meta = RunMeta("c01", "m", "passed", failure_category="api_or_credit")
    assert not is_infra_class_failure(meta)
    assert job_status(meta) == "passed"


@pytest.mark.parametrize(
    "text",
    [
        '{"test_case": "c01", "model": "m", "outcome": "passed", "duration_seconds": NaN}',
        '\ufeff{"test_case": "c01", "model": "m", "outcome": "passed"}',
    ],
    ids=["nan", "bom"],
)
def test_json_that_python_writes_or_tolerates_reads_whichever_parser_is_installed(
    tmp_path: Path, text: str
) -> None:
    # Python's json.dumps writes NaN; editors add byte-order marks. orjson refuses both, so
    # the reader falls back to the standard library rather than dropping the record.
    assert read_one(tmp_path, text).outcome == "passed"


# --- reason and usage (additive keys) -----------------------------------------------------


def test_reason_and_usage_read_back_and_are_written_only_when_set(tmp_path: Path) -> None:
    meta = read_one(tmp_path, golden("ours/failed-with-reason-and-usage.json"))
    assert meta.reason == "result.json says failed: wrong answer"
    assert meta.usage == {
        "input_tokens": 1200,
        "output_tokens": 300,
        "requests": 2,
        "cost_usd": 0.0125,
    }
    assert meta.usage_total is not None and meta.usage_total["cost_usd"] == 0.025
    # A pass without usage has none of the three keys: it reads as it did before them.
    passed = run_meta_to_dict(run_meta_from_dict(make_meta()))
    assert not {"reason", "usage", "usage_total"} & passed.keys()


def test_a_boolean_exit_code_or_attempt_is_not_read_as_1(tmp_path: Path) -> None:
    meta = read_one(tmp_path, json.dumps(make_meta(outcome="failed", exit_code=True, attempt=True)))
    assert (meta.exit_code, meta.attempt, meta.outcome) == (None, None, "failed")
    assert record_reason(meta) is None  # no "exit code True", no "exit code 1"


def test_reason_and_usage_of_the_wrong_type_read_as_absent(tmp_path: Path) -> None:
    meta = read_one(tmp_path, json.dumps(make_meta(outcome="error", reason=3, usage="lots")))
    assert (meta.reason, meta.usage, meta.usage_total) == (None, None, None)
    assert meta.outcome == "error"


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"outcome": "passed", "reason": "stale"}, None),
        ({"reason": "exit code 1: boom"}, "exit code 1: boom"),
        (
            {"result": {"classification_error": "invalid result.json: not JSON"}},
            "invalid result.json: not JSON",
        ),
        ({"result": {"start_error": "cannot start 'x'"}, "exit_code": None}, "cannot start 'x'"),
        # A note that is not a string, or empty, tells nothing: the next one does.
        (
            {
                "result": {
                    "record_error": {"code": 3},
                    "classification_error": "",
                    "start_error": "x",
                }
            },
            "x",
        ),
        ({"result": {"record_error": 3}, "exit_code": 2}, "exit code 2"),
        ({"result": {"record_error": "cannot write run-meta.json"}}, "cannot write run-meta.json"),
        ({"stop_reason": "timeout", "exit_code": -15}, "timeout"),
        ({"stop_reason": "signal", "exit_code": -9}, "killed by signal 9"),
        ({"exit_code": 3}, "exit code 3"),
        ({"exit_code": 0}, "exit code 0"),  # an error despite exit 0 (no signal killed it)
        ({"exit_code": None, "stop_reason": None}, None),
    ],
)
def test_a_records_reason_is_its_own_or_what_its_other_keys_tell(
    fields: dict[str, Any], reason: str | None
) -> None:
    """Records written before reasons were kept still say why, from what they hold."""
    raw = make_meta(outcome="error")
    raw.update(fields)
    assert record_reason(run_meta_from_dict(raw)) == reason


# --- the ledger index follows the reader ----------------------------------------------------


def test_a_changed_reader_retires_the_cache_an_older_one_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache keeps records as run_support/run_meta.py reads them: it is made anew by a
    reader whose rules differ, so an upgrade never serves records read by the old rules."""
    source = Path(ledger_cache.__file__).with_name("run_meta.py").read_bytes()
    copy = tmp_path / "pkg"
    copy.mkdir()
    (copy / "run_meta.py").write_bytes(source)
    monkeypatch.setattr(ledger_cache, "__file__", str(copy / "ledger_cache.py"))
    same = ledger_cache._reader_id()
    assert same == ledger_cache.READER  # an unchanged reader keeps its cache
    (copy / "run_meta.py").write_bytes(source + b"\n# a new foreign shape\n")
    assert ledger_cache._reader_id() != same
    (copy / "run_meta.py").unlink()
    # No source to hash: every read makes the cache afresh.
    assert ledger_cache._reader_id() != ledger_cache._reader_id()


# --- the ledger cache, as the reader uses it by default -------------------------------------


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records read from disk (not served by the cache); records count as aged at once, as
    after the cache's racy window (tests/unit/run_support/test_ledger_scan.py waits it out)."""
    monkeypatch.setattr(ledger_scan, "RACY_WINDOW_NS", -(10**15))
    seen: list[str] = []
    real = ledger_scan.read_record

    def counting(path: str) -> Any:
        seen.append(path)
        return real(path)

    monkeypatch.setattr(ledger_scan, "read_record", counting)
    return seen


def test_by_default_the_reader_keeps_the_cache_and_serves_from_it(
    tmp_path: Path, reads: list[str]
) -> None:
    write_record(tmp_path, "c01", "m")
    started = start_run(tmp_path, "c02", "m")
    first = load_recorded_runs(tmp_path)
    assert cached_run_dirs(tmp_path) != []
    assert first.incomplete == [started.relative_to(tmp_path).as_posix()]
    assert len(reads) == 1
    again = load_recorded_runs(tmp_path)
    assert len(reads) == 1  # nothing read again
    assert (dict(again), again.incomplete) == (dict(first), first.incomplete)


def test_without_the_cache_every_record_is_read_and_none_cached(
    tmp_path: Path, reads: list[str]
) -> None:
    write_record(tmp_path, "c01", "m")
    load_recorded_runs(tmp_path, use_index=False)
    load_recorded_runs(tmp_path, use_index=False)
    assert len(reads) == 2
    path = ledger_cache.cache_path(tmp_path)
    assert path is not None and not path.exists()
