"""Multi-step jobs: steps run in order in one run dir; the first failure ends the job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.fake_jobs import Batch, fake_agent_command

from batch.errors import SweepError
from batch.plan.jobs import Job
from batch.summary.write import job_row
from batch.sweep.features.steps import Step
from batch.sweep.load import load_sweep

PASSED = 'result={{"outcome": "passed", "score": 0.9}}'  # {{ }}: literal braces in a template


def step(name: str, *actions: str, **fields: Any) -> Step:
    return Step(name=name, command=tuple(fake_agent_command(*actions)), **fields)


@pytest.fixture
def batch(tmp_path: Path) -> Batch:
    return Batch(tmp_path)


def statuses(record: dict[str, Any]) -> list[tuple[str, str]]:
    return [(entry["name"], entry["status"]) for entry in record["steps"]]


def test_eval_then_judge_share_the_run_dir_and_each_step_is_recorded(batch: Batch) -> None:
    result = batch.run_steps(
        step("eval", "print=evaluating {case}", "touch={run_dir}/answer.json"),
        step("judge", "print=judging", PASSED),
    )
    record = batch.record(result)
    assert (record["outcome"], record["result"]) == ("passed", {"score": 0.9})
    assert statuses(record) == [("eval", "passed"), ("judge", "passed")]
    eval_entry, judge_entry = record["steps"]
    assert eval_entry["files"] == ["answer.json"] and judge_entry["files"] == ["result.json"]
    assert eval_entry["exit_code"] == 0 and eval_entry["duration_seconds"] > 0
    # Kept as written where each attempt differs, so attempts compare equal.
    assert eval_entry["command"][-1] == "touch={run_dir}/answer.json"
    assert eval_entry["command"][-2] == "print=evaluating c01"
    log = batch.log(result)
    assert log.index("--- batch: step eval") < log.index("evaluating c01")
    assert log.index("evaluating c01") < log.index("--- batch: step judge") < log.index("judging")


def test_a_failing_step_ends_the_job_and_later_steps_are_skipped(batch: Batch) -> None:
    result = batch.run_steps(step("eval", "exit=1"), step("judge", "touch=judge-ran"))
    record = batch.record(result)
    assert (record["outcome"], record["failure_category"]) == ("failed", "model_failure")
    assert statuses(record) == [("eval", "failed"), ("judge", "skipped")]
    assert record["exit_code"] == 1 and record["steps"][1]["duration_seconds"] is None
    assert result.reason == "step eval: exit code 1"
    assert not (batch.root / "judge-ran").exists()


def test_a_step_that_leaves_an_expected_file_missing_ends_the_job(batch: Batch) -> None:
    result = batch.run_steps(
        step("eval", "touch={run_dir}/answer.json", expect=("answer.json", "{case}.jsonl")),
        step("judge", "pass"),
    )
    record = batch.record(result)
    assert (record["outcome"], record["failure_category"]) == ("error", "infra_failure")
    assert record["steps"][0]["reason"] == "expected file(s) missing: c01.jsonl"
    assert statuses(record) == [("eval", "error"), ("judge", "skipped")]


def test_log_patterns_look_only_at_the_failing_steps_output(batch: Batch) -> None:
    quiet = batch.record(
        batch.run_steps(step("eval", "print=429 retried, fine"), step("judge", "exit=2"))
    )
    assert quiet["failure_category"] == "infra_failure"
    limited = batch.record(
        batch.run_steps(step("eval", "pass"), step("judge", "print=429", "exit=2"))
    )
    assert limited["failure_category"] == "api_or_credit"


def test_an_earlier_steps_result_json_does_not_decide_a_later_failure(batch: Batch) -> None:
    record = batch.record(batch.run_steps(step("eval", PASSED), step("judge", "exit=3")))
    assert (record["outcome"], record["failure_category"]) == ("error", "infra_failure")


def test_a_step_reporting_its_own_failure_is_believed(batch: Batch) -> None:
    credit = 'result={{"outcome": "error", "failure_category": "api_or_credit"}}'
    record = batch.record(batch.run_steps(step("eval", "pass"), step("judge", credit, "exit=3")))
    assert (record["outcome"], record["failure_category"]) == ("error", "api_or_credit")


def test_a_non_zero_exit_ends_the_job_even_when_the_step_reports_a_pass(batch: Batch) -> None:
    result = batch.run_steps(step("eval", PASSED, "exit=2"), step("judge", "touch=judge-ran"))
    record = batch.record(result)
    assert record["outcome"] == "passed"  # what the step reported (docs/ledger.md, rule 2)
    assert statuses(record) == [("eval", "passed"), ("judge", "skipped")]
    assert not (batch.root / "judge-ran").exists()


def test_a_step_past_its_own_timeout_is_stopped(batch: Batch) -> None:
    result = batch.run_steps(step("eval", "pass"), step("judge", "sleep=30", timeout=0.3))
    record = batch.record(result)
    assert (record["outcome"], record["stop_reason"]) == ("error", "timeout")
    assert statuses(record) == [("eval", "passed"), ("judge", "error")]
    assert record["duration_seconds"] < 10


def test_the_jobs_timeout_covers_all_its_steps(batch: Batch) -> None:
    job = Job("c01", "m", timeout=2.0)
    result = batch.run_steps(step("eval", "sleep=0.5"), step("judge", "sleep=30"), job=job)
    record = batch.record(result)
    assert statuses(record) == [("eval", "passed"), ("judge", "error")]
    # The reason names the limit that ran out: the job's, not what was left of it.
    assert record["steps"][1]["reason"] == "timeout after 2.0s"
    assert record["reason"] == "step judge: timeout after 2.0s"
    assert record["duration_seconds"] < 10


def test_the_summary_row_shows_each_steps_status_and_duration() -> None:
    entries = [
        {"name": "eval", "status": "reused", "duration_seconds": 6.0, "files": ["a"]},
        {"name": "judge", "status": "passed", "duration_seconds": 3.0, "exit_code": 0},
    ]
    row = job_row(Job("c01", "m", status="passed", steps=entries))
    assert row["steps"] == [
        {"name": "eval", "status": "reused", "duration_seconds": 6.0},
        {"name": "judge", "status": "passed", "duration_seconds": 3.0},
    ]
    assert "steps" not in job_row(Job("c01", "m"))


# --- the sweep key ---------------------------------------------------------------------------

STEPS = """\
cases: [{id: c01, params: {lang: en}}, {id: c02, params: {lang: fr}}]
models: [m]
steps:
  - name: eval
    command: [python, eval.py, "{case}", "{params.lang}"]
    timeout: 5m
    expect: [out.json]
  - name: judge
    command: [python, judge.py, "{run_dir}"]
"""


def load(tmp_path: Path, text: str):
    path = tmp_path / "sweep.yaml"
    path.write_text(text, encoding="utf-8")
    return load_sweep(path)


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(SweepError) as info:
        load(tmp_path, text)
    return str(info.value)


def test_steps_replace_the_command(tmp_path: Path) -> None:
    sweep = load(tmp_path, STEPS)
    assert sweep.command == ()
    assert sweep.steps == (
        Step("eval", ("python", "eval.py", "{case}", "{params.lang}"), 300.0, ("out.json",)),
        Step("judge", ("python", "judge.py", "{run_dir}")),
    )


BARE = "cases: [c]\nmodels: [m]\n"
BROKEN_STEPS = [
    (STEPS + "command: [x]\n", ":4:3: steps: replaces command; give one of them, not both"),
    (BARE, ":1:1: missing required key 'command' (or 'steps'"),
    (STEPS.replace("name: judge", "name: eval"), "steps[1].name: duplicate step name 'eval'"),
    (STEPS.replace("name: judge", "name: judge/llm"), "a step name is letters, digits"),
    (STEPS.replace("{run_dir}", "{rundir}"), "steps[1].command[2]: unknown placeholder"),
    (STEPS.replace("lang: fr", "lng: fr"), "steps[0].command[3]: {params.lang} is not set"),
    (STEPS.replace("[out.json]", "['{cse}.json']"), "steps[0].expect[0]: unknown placeholder"),
    (STEPS.replace("timeout: 5m", "timeout: 0"), "steps[0].timeout: must be more than 0"),
    (BARE + "steps: []\n", "steps: is empty"),
    (BARE + "steps: [{name: a}]\n", "steps[0]: missing required key 'command'"),
    (BARE + "steps: [{name: a, command: []}]\n", "steps[0].command: is empty"),
]


@pytest.mark.parametrize(("text", "fragment"), BROKEN_STEPS)
def test_broken_steps_are_located_errors(tmp_path: Path, text: str, fragment: str) -> None:
    assert fragment in error_of(tmp_path, text)
