"""Repeats in the plan, as plain data: the sweep key, the job matrix's order, run dir names,
decisions per (case, model, repeat), what a lowered count leaves out, the sweep diff, and
the record's ``repeat`` as read and written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.builders import make_job, make_meta, write_record

from batch.layout import run_dir_name
from batch.plan.matrix import build_jobs
from batch.plan.planner import beyond_repeats
from batch.plan.resume import apply_resume
from batch.plan.sweep_diff import sweep_changes
from batch.sweep.load import SweepError, load_sweep
from run_support.results import (
    RunMeta,
    load_recorded_runs,
    record_score,
    run_meta_from_dict,
    run_meta_to_dict,
)


def sweep_file(tmp_path: Path, **keys: Any) -> Path:
    body = {"cases": ["c1", "c2"], "models": ["a", "b"], "command": ["true"], **keys}
    path = tmp_path / "sweep.yaml"
    path.write_text(json.dumps(body), encoding="utf-8")
    return path


def order(tmp_path: Path, option: int | None = None, **keys: Any) -> list[tuple[str, str, int]]:
    """The jobs' keys in start order; ``option``: ``--repeats``."""
    sweep = load_sweep(sweep_file(tmp_path, **keys))
    return [job.key for job in build_jobs(sweep, repeats=option)]


# --- the key and the matrix --------------------------------------------------------------


def test_interleave_runs_whole_passes_repeat_outermost(tmp_path: Path) -> None:
    assert order(tmp_path, repeats=2) == [
        ("c1", "a", 1), ("c1", "b", 1), ("c2", "a", 1), ("c2", "b", 1),
        ("c1", "a", 2), ("c1", "b", 2), ("c2", "a", 2), ("c2", "b", 2),
    ]  # fmt: skip


def test_model_major_keeps_a_models_repeats_in_its_block(tmp_path: Path) -> None:
    assert order(tmp_path, repeats=2, order="model-major") == [
        ("c1", "a", 1), ("c2", "a", 1), ("c1", "a", 2), ("c2", "a", 2),
        ("c1", "b", 1), ("c2", "b", 1), ("c1", "b", 2), ("c2", "b", 2),
    ]  # fmt: skip


def test_a_models_own_repeats_beat_the_sweeps_and_the_option_beats_both(tmp_path: Path) -> None:
    models = [{"id": "a", "repeats": 3}, "b"]
    own = order(tmp_path, models=models, repeats=2)
    assert sorted(k for k in own if k[1] == "a") == [
        (c, "a", r) for c in ("c1", "c2") for r in (1, 2, 3)
    ]
    assert sorted(k for k in own if k[1] == "b") == [
        (c, "b", r) for c in ("c1", "c2") for r in (1, 2)
    ]
    forced = order(tmp_path, 1, models=models, repeats=2)
    assert {k[2] for k in forced} == {1} and len(forced) == 4


def test_without_repeats_every_job_is_repeat_1_as_before(tmp_path: Path) -> None:
    assert order(tmp_path) == [("c1", "a", 1), ("c1", "b", 1), ("c2", "a", 1), ("c2", "b", 1)]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "repeats: must be at least 1, got 0"),
        (2.5, "repeats: expected an integer (at least 1), got a number (2.5)"),
        (True, "repeats: expected an integer (at least 1)"),
        ("3", "repeats: expected an integer (at least 1)"),
        (10_001, "repeats: must be at most 10,000, got 10,001"),
        (10**400, "repeats: must be at most 10,000, got a larger number"),
    ],
    ids=["zero", "fraction", "bool", "text", "over", "huge"],
)
def test_a_bad_repeats_is_an_error_naming_the_file_and_place(
    tmp_path: Path, value: object, message: str
) -> None:
    path = sweep_file(tmp_path, repeats=0)
    text = path.read_text().replace('"repeats": 0', f'"repeats": {json.dumps(value)}')
    path.write_text(text)
    with pytest.raises(SweepError) as raised:
        load_sweep(path)
    assert str(path.name) in str(raised.value) and message in str(raised.value), raised.value


def test_a_bad_model_repeats_names_the_model_entry(tmp_path: Path) -> None:
    path = sweep_file(tmp_path, models=[{"id": "a", "repeats": -1}])
    with pytest.raises(SweepError, match=r"sweep\.yaml:1:\d+: .*repeats"):
        load_sweep(path)


def test_a_later_repeat_names_its_run_dir_and_repeat_1_is_named_as_before() -> None:
    assert run_dir_name("c1", "o/m", "T", 2) == "c1-o--m-T-a2"
    assert run_dir_name("c1", "o/m", "T", 2, repeat=1) == "c1-o--m-T-a2"
    assert run_dir_name("c1", "o/m", "T", 1, repeat=7) == "c1-o--m-T-r7-a1"


# --- decisions per triple ----------------------------------------------------------------


def meta(outcome: str = "passed", repeat: int = 1, **fields: Any) -> RunMeta:
    raw = make_meta("c1", "m", outcome, **fields)
    if repeat != 1:
        raw["repeat"] = repeat
    return run_meta_from_dict(raw)


def test_each_repeat_is_decided_by_its_own_record() -> None:
    jobs = [make_job("c1", "m", repeat=r) for r in (1, 2, 3)]
    recorded = {("c1", "m", 1): meta("failed"), ("c1", "m", 3): meta("error", 3)}
    plan = apply_resume(jobs, recorded, retry_failed=True)
    # Repeat 1: the model failed it, a sample that stays; 2: no record; 3: an infra error.
    assert [(job.repeat, job.decision) for job in plan.jobs] == [
        (1, "carry"), (2, "run"), (3, "retry"),
    ]  # fmt: skip
    assert [job.status for job in plan.jobs] == ["failed", "pending", "pending"]


def test_a_record_of_another_repeat_never_decides_a_job() -> None:
    plan = apply_resume([make_job("c1", "m", repeat=2)], {("c1", "m", 1): meta("passed")})
    assert plan.jobs[0].decision == "run"


def test_records_past_a_lowered_count_are_named_per_model(tmp_path: Path) -> None:
    sweep = load_sweep(sweep_file(tmp_path, models=["a", "b"], repeats=2))
    recorded = {
        ("c1", "a", 3): meta(), ("c2", "a", 3): meta(), ("c1", "a", 4): meta(),
        ("c1", "b", 2): meta(), ("gone", "a", 5): meta(),
    }  # fmt: skip
    lines = beyond_repeats(sweep, recorded)  # type: ignore[arg-type]
    assert len(lines) == 1 and lines[0].startswith("a: 3 recorded runs of repeats past 2"), lines


# --- the sweep diff ----------------------------------------------------------------------


def snapshot(count: int | None = None, **model_keys: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "cases": [{"id": c, "params": {}} for c in ("c1", "c2", "c3")],
        "models": [{"id": "a", **model_keys}],
        "command": ["agent"],
    }
    if count is not None:
        data["repeats"] = count
    return data


def test_a_changed_count_is_one_line_old_to_new() -> None:
    assert sweep_changes(snapshot(), snapshot(3)) == ["repeats changed: 1 → 3"]
    assert sweep_changes(snapshot(3), snapshot(3, repeats=5)) == [
        "repeats changed for model a: 3 → 5"
    ]
    assert sweep_changes(snapshot(3), snapshot(3)) == []


def test_an_added_model_or_case_counts_its_repeats_as_jobs() -> None:
    old, new = snapshot(2), snapshot(2)
    new["models"].append({"id": "b", "repeats": 4})
    new["cases"].append({"id": "c4", "params": {}})
    assert sweep_changes(old, new) == ["+ model b (16 jobs)", "+ case c4 (6 jobs)"]


# --- the record ----------------------------------------------------------------------------


def test_a_record_without_repeat_is_repeat_1_and_1_is_never_written() -> None:
    assert meta().repeat == 1
    assert "repeat" not in run_meta_to_dict(meta())
    assert run_meta_to_dict(meta(repeat=4))["repeat"] == 4
    assert meta(repeat=4).key == ("c1", "m", 4)


@pytest.mark.parametrize("bad", [0, -2, 2.5, "2", True, None, [2]])
def test_a_record_with_a_repeat_that_is_no_whole_number_from_1_is_skipped(
    tmp_path: Path, bad: object
) -> None:
    write_record(tmp_path, "c1", "m", dir_name="good", attempt=1)
    write_record(tmp_path, "c1", "m", dir_name="bad", attempt=2, repeat=bad)
    recorded = load_recorded_runs(tmp_path)
    # Not guessed into repeat 1 (where it would outrank the good record) nor anywhere else.
    assert list(recorded) == [("c1", "m", 1)] and recorded["c1", "m", 1].run_dir.endswith("good")
    assert [path.rsplit("/", 2)[-2] for path, _ in recorded.unreadable] == ["bad"]


def test_records_of_each_repeat_are_kept_apart_and_the_newest_wins_per_triple(
    tmp_path: Path,
) -> None:
    write_record(tmp_path, "c1", "m", "failed", dir_name="r1a1", attempt=1)
    write_record(tmp_path, "c1", "m", "error", dir_name="r2a1", attempt=1, repeat=2)
    write_record(tmp_path, "c1", "m", "passed", dir_name="r2a2", attempt=2, repeat=2)
    recorded = load_recorded_runs(tmp_path)
    assert {key: m.outcome for key, m in recorded.items()} == {
        ("c1", "m", 1): "failed",
        ("c1", "m", 2): "passed",
    }


@pytest.mark.parametrize(
    ("score", "kept"),
    [(0.5, 0.5), (3, 3.0), (-1e15, -1e15), (1e16, None), (float("nan"), None),
     (True, None), ("0.5", None), (None, None), (10**400, None)],
)  # fmt: skip
def test_a_score_is_kept_only_as_a_finite_number_within_bounds(score: object, kept: object) -> None:
    record = meta(result={"score": score})
    assert record_score(record) == kept
