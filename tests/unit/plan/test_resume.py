"""Resume decisions: which jobs run again and which keep their recorded outcome (docs/resume.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from helpers.builders import UNSET, make_job, make_jobs, make_meta, start_run, write_record

from batch.plan.jobs import Job
from batch.plan.resume import apply_resume, decide, retry_set
from batch.policies.attempts import AttemptBudget
from run_support.results import (
    NON_MODEL_FAILURE_CATEGORIES,
    RunMeta,
    load_recorded_runs,
    run_meta_from_dict,
)


def record(outcome: str = "passed", category: str | None = None, **fields: Any) -> RunMeta:
    """A record of c01 x m as the ledger reads it; no category means the outcome's default."""
    meta = run_meta_from_dict(make_meta("c01", "m", outcome, category or UNSET, **fields))
    meta.run_dir = "m/c01-m-run"
    return meta


def decision(meta: RunMeta | None, **options: Any) -> str:
    recorded = {} if meta is None else {("c01", "m", 1): meta}
    return apply_resume([make_job("c01", "m")], recorded, **options).jobs[0].decision


# --- the decision table -------------------------------------------------------------------

TABLE = [
    # newest record                     --resume  --resume --retry-failed
    (None, "run", "run"),
    (("passed", None), "carry", "carry"),
    (("failed", "model_failure"), "carry", "carry"),
    (("failed", "judge_rejected"), "carry", "carry"),
    (("error", "infra_failure"), "carry", "retry"),
    (("error", "api_or_credit"), "carry", "retry"),
    (("error", "task_data"), "carry", "retry"),
    (("error", "build_instruction"), "carry", "retry"),
    # Written before the outcome followed a log pattern's category: still a non-model error.
    (("failed", "api_or_credit"), "carry", "retry"),
]


@pytest.mark.parametrize(("newest", "resume", "retry_failed"), TABLE)
def test_the_decision_table(
    newest: tuple[str, str | None] | None, resume: str, retry_failed: str
) -> None:
    meta = None if newest is None else record(*newest)
    assert decision(meta) == resume
    assert decision(meta, retry_failed=True) == retry_failed


def test_a_job_with_a_started_run_dir_but_no_record_runs_again(tmp_path: Path) -> None:
    start_run(tmp_path, "c01", "m")  # output.log, no run-meta.json: killed mid-run
    write_record(tmp_path, "c02", "m")
    plan = apply_resume(make_jobs(["c01", "c02"], ["m"]), load_recorded_runs(tmp_path))
    assert [(job.case, job.decision) for job in plan.jobs] == [("c01", "run"), ("c02", "carry")]
    assert plan.jobs[0].decision_reason == "no recorded outcome"


def test_a_finished_job_does_not_run_again(tmp_path: Path) -> None:
    write_record(tmp_path, "c01", "m", outcome="failed")
    plan = apply_resume([make_job("c01", "m")], load_recorded_runs(tmp_path))
    assert (plan.carried, plan.to_run) == (1, 0)
    assert not plan.jobs[0].needs_run


def test_a_job_whose_only_record_is_truncated_runs_again(tmp_path: Path) -> None:
    write_record(tmp_path, "c01", "m", raw='{"test_case": "c01", "model": "m", "outc')
    recorded = load_recorded_runs(tmp_path)
    plan = apply_resume([make_job("c01", "m")], recorded)
    assert plan.jobs[0].decision == "run" and len(recorded.unreadable) == 1


def test_a_record_from_another_harness_is_carried(tmp_path: Path) -> None:
    foreign = {"test_case": "t1", "model": "org/model:tag", "intercepted": True}
    write_record(tmp_path, "t1", "org/model:tag", raw=foreign | {"duration_seconds": "4"})
    plan = apply_resume([make_job("t1", "org/model:tag")], load_recorded_runs(tmp_path))
    job = plan.jobs[0]
    assert (job.decision, job.status, job.duration_seconds) == ("carry", "passed", 4.0)


@pytest.mark.parametrize("model", ["openai/gpt-4o", "qwen3:8b"])
def test_slash_and_colon_model_names_find_their_records(tmp_path: Path, model: str) -> None:
    write_record(tmp_path, "c01", model, outcome="failed")
    plan = apply_resume([make_job("c01", model)], load_recorded_runs(tmp_path))
    assert plan.jobs[0].decision == "carry"


@pytest.mark.parametrize("make", [lambda p: p / "absent", lambda p: p])
def test_an_empty_or_absent_batch_dir_runs_everything(
    tmp_path: Path, make: Callable[[Path], Path]
) -> None:
    batch_dir = make(tmp_path)
    plan = apply_resume(make_jobs(["c01", "c02"], ["a", "b"]), load_recorded_runs(batch_dir))
    assert {job.decision for job in plan.jobs} == {"run"}
    assert (plan.carried, plan.retried, plan.to_run) == (0, 0, 4)


# --- what a carried job keeps -------------------------------------------------------------


def test_a_carried_job_keeps_its_recorded_status_and_real_duration() -> None:
    meta = record("error", "infra_failure", duration=61.88, attempt=3)
    job = apply_resume([make_job("c01", "m")], {("c01", "m", 1): meta}).jobs[0]
    assert (job.status, job.duration_seconds, job.failure_category) == (
        "error",
        61.88,
        "infra_failure",
    )
    assert (job.resumed, job.attempts, job.run_dir) == (True, 3, "m/c01-m-run")
    assert "m/c01-m-run" in job.decision_reason


def test_a_carried_pass_has_no_failure_category() -> None:
    job = apply_resume([make_job("c01", "m")], {("c01", "m", 1): record("passed")}).jobs[0]
    assert (job.status, job.failure_category, job.resumed) == ("passed", None, True)


def test_a_retried_job_starts_pending_and_counts_its_earlier_attempts() -> None:
    meta = record("error", "api_or_credit", attempt=2)
    job = apply_resume([make_job("c01", "m")], {("c01", "m", 1): meta}, retry_failed=True).jobs[0]
    assert (job.decision, job.status, job.resumed, job.attempts) == ("retry", "pending", False, 2)
    assert job.decision_reason == "recorded error (api_or_credit) is retried"


def test_deciding_does_not_touch_the_jobs_given() -> None:
    jobs = [make_job("c01", "m")]
    before = attrs.asdict(jobs[0])
    apply_resume(jobs, {("c01", "m", 1): record("failed")})
    assert attrs.asdict(jobs[0]) == before
    retry = retry_set(True, None)
    for meta in (None, record("failed"), record("error", "api_or_credit")):
        decided = decide(jobs[0], meta, retry)
        assert decided is not jobs[0] and attrs.asdict(jobs[0]) == before


def test_deciding_in_place_decides_the_jobs_given_themselves_as_a_copy_would_be() -> None:
    records = {
        ("c01", "m", 1): record("failed"),
        ("c02", "m", 1): record("passed"),
        ("c04", "m", 1): record("error", "api_or_credit", attempt=2),
    }
    cases = ["c01", "c02", "c03", "c04"]
    jobs = make_jobs(cases, ["m"])
    copies = apply_resume(make_jobs(cases, ["m"]), records, retry_failed=True).jobs

    decided = apply_resume(jobs, records, retry_failed=True, in_place=True).jobs

    assert all(a is b for a, b in zip(decided, jobs, strict=True))
    assert [attrs.asdict(job) for job in decided] == [attrs.asdict(job) for job in copies]
    assert [job.decision for job in decided] == ["carry", "carry", "run", "retry"]


def test_records_of_pairs_outside_the_sweep_are_ignored() -> None:
    other = attrs.evolve(record("passed"), test_case="gone")
    plan = apply_resume([make_job("c01", "m")], {("gone", "m", 1): other})
    assert [job.decision for job in plan.jobs] == ["run"]


def test_the_plan_counts_what_it_decided() -> None:
    recorded = {
        ("c1", "m", 1): attrs.evolve(record("passed"), test_case="c1"),
        ("c2", "m", 1): attrs.evolve(record("error", "infra_failure"), test_case="c2"),
        ("c3", "m", 1): attrs.evolve(record("failed"), test_case="c3"),
    }
    jobs = make_jobs(["c1", "c2", "c3", "c4"], ["m"])
    plan = apply_resume(jobs, recorded, retry_failed=True)
    assert [job.decision for job in plan.jobs] == ["carry", "retry", "carry", "run"]
    assert (plan.carried, plan.retried, plan.to_run) == (2, 1, 2)


# --- newest wins --------------------------------------------------------------------------


def test_the_newest_run_wins_across_repeated_resumes_whatever_the_dir_names(tmp_path: Path) -> None:
    # First sweep: error. First resume: passed. Second resume (--retry-category model_failure
    # by hand): failed. The dir names sort in the opposite order of the runs.
    write_record(tmp_path, "c01", "m", outcome="error", at=0, dir_name="z-first")
    write_record(tmp_path, "c01", "m", outcome="passed", at=100, dir_name="y-second")
    write_record(tmp_path, "c01", "m", outcome="failed", at=200, dir_name="x-third")
    job = apply_resume(
        [make_job("c01", "m")], load_recorded_runs(tmp_path), retry_failed=True
    ).jobs[0]
    assert (job.decision, job.status, job.run_dir) == ("carry", "failed", "m/x-third")


def test_a_newer_non_model_error_is_retried_though_an_older_run_passed(tmp_path: Path) -> None:
    write_record(tmp_path, "c01", "m", outcome="passed", at=0)
    write_record(tmp_path, "c01", "m", outcome="error", category="api_or_credit", at=60)
    recorded = load_recorded_runs(tmp_path)
    assert decision(recorded[("c01", "m", 1)]) == "carry"
    assert decision(recorded[("c01", "m", 1)], retry_failed=True) == "retry"


# --- --retry-failed and --retry-category --------------------------------------------------


def test_retry_failed_off_retries_nothing() -> None:
    assert retry_set(False, None) == frozenset()


def test_retry_failed_retries_the_non_model_categories() -> None:
    assert retry_set(True, None) == {
        "infra_failure",
        "api_or_credit",
        "task_data",
        "build_instruction",
    }


def test_retry_category_replaces_the_default_set_so_it_can_narrow_it() -> None:
    options = {"retry_failed": True, "retry_categories": ["api_or_credit"]}
    assert decision(record("error", "api_or_credit"), **options) == "retry"
    assert decision(record("error", "infra_failure"), **options) == "carry"


def test_retry_category_can_name_model_failure() -> None:
    options = {"retry_failed": True, "retry_categories": ["model_failure"]}
    assert decision(record("failed", "model_failure"), **options) == "retry"
    assert decision(record("error", "infra_failure"), **options) == "carry"
    assert decision(record("passed"), **options) == "carry"


def test_retry_category_alone_implies_retry_failed() -> None:
    assert decision(record("error", "task_data"), retry_categories=["task_data"]) == "retry"


def test_a_pass_is_never_retried_whatever_is_asked() -> None:
    options = {"retry_failed": True, "retry_categories": ["model_failure", "infra_failure"]}
    assert decision(record("passed"), **options) == "carry"


def test_the_sweeps_non_model_categories_decide_what_retry_failed_reruns() -> None:
    sweep_categories = frozenset({"judge_rejected"})
    options = {"retry_failed": True, "non_model_categories": sweep_categories}
    assert decision(record("failed", "judge_rejected"), **options) == "retry"
    infra = record("error", "infra_failure")
    assert decision(infra, **options) == "carry"
    job = decide(make_job("c01", "m"), infra, frozenset(), sweep_categories)
    assert job.status == "failed"  # infra_failure is a model failure for this sweep


# --- usage and reasons carried over -----------------------------------------------------------

SPENT = {"requests": 3, "cost_usd": 0.5}


def test_a_carried_job_keeps_its_total_usage_and_its_reason() -> None:
    meta = record("failed", usage={"requests": 1}, usage_total=SPENT, reason="exit code 1: no")
    job = apply_resume([make_job("c01", "m")], {("c01", "m", 1): meta}).jobs[0]
    assert (job.decision, job.usage, job.reason) == ("carry", SPENT, "exit code 1: no")


def test_a_carried_pass_has_no_reason_and_a_job_that_reported_nothing_no_usage() -> None:
    job = apply_resume([make_job("c01", "m")], {("c01", "m", 1): record("passed")}).jobs[0]
    assert (job.usage, job.reason) == (None, None)


def test_a_carried_job_whose_usage_has_no_valid_field_has_no_usage() -> None:
    # Nothing the budget could count: no usage at all, not an empty or a made-up one.
    meta = record("failed", usage={"tokens": "lots", "cost_usd": -1})
    job = apply_resume([make_job("c01", "m")], {("c01", "m", 1): meta}).jobs[0]
    assert (job.decision, job.usage) == ("carry", None)


def test_a_carried_record_that_names_no_attempt_counts_as_the_first() -> None:
    meta = record("failed", attempt=None)
    assert meta.attempt is None
    job = apply_resume([make_job("c01", "m")], {("c01", "m", 1): meta}).jobs[0]
    assert (job.decision, job.attempts) == ("carry", 1)


def test_a_retried_job_starts_from_what_its_attempts_spent() -> None:
    meta = record("error", "api_or_credit", usage_total=SPENT)
    job = apply_resume([make_job("c01", "m")], {("c01", "m", 1): meta}, retry_failed=True).jobs[0]
    assert (job.decision, job.usage) == ("retry", SPENT)
    # A record written before totals were kept was its job's only attempt with usage.
    older = record("error", "api_or_credit", usage={"requests": 2})
    again = apply_resume([make_job("c01", "m")], {("c01", "m", 1): older}, retry_failed=True)
    assert again.jobs[0].usage == {"requests": 2}


# --- the attempt budget ------------------------------------------------------------------


def broken_record(model: str, attempt: int) -> RunMeta:
    meta = make_meta("c01", model, "error", "task_data", attempt=attempt, run_dir=f"{model}/r3")
    return run_meta_from_dict(meta)


def test_a_retry_that_would_pass_the_attempt_budget_carries_the_job() -> None:
    record = broken_record("m", 3)
    retry = retry_set(True, None)
    spent = decide(Job("c01", "m"), record, retry, budget=AttemptBudget())
    assert (spent.decision, spent.status, spent.attempts) == ("carry", "error", 3)
    assert spent.decision_reason == (
        "attempt budget spent (3/3): keeps its recorded error (task_data) in m/r3"
    )
    raised = decide(Job("c01", "m"), record, retry, budget=AttemptBudget(override=4))
    assert (raised.decision, raised.attempts) == ("retry", 3)
    per_model = AttemptBudget(default=2, per_model={"m": 5})
    assert decide(Job("c01", "m"), record, retry, budget=per_model).decision == "retry"
    other = broken_record("other", 2)
    assert decide(Job("c01", "other"), other, retry, budget=per_model).decision == "carry"
    assert decide(Job("c01", "other"), other, retry, budget=None).decision == "retry"


# --- apply_resume's inline carry is decide() ---------------------------------------------

#: Records of every kind a resume meets: passes, model failures, each non-model category,
#: a foreign category, later attempts, usage, steps, reasons and the older records' keys
#: that stand for a reason, and a record built without a category for its failure.
VARIED = [
    record("passed"),
    record("passed", attempt=3, duration=2.5, usage={"requests": 1}),
    record("passed", usage_total=SPENT, steps=[{"name": "eval", "status": "passed"}]),
    record("failed"),
    record("failed", "judge_rejected", reason="score 0.2 below 0.5", attempt=2),
    record("failed", usage={"requests": 2}, usage_total=SPENT, exit_code=1),
    record("error", "infra_failure", stop_reason="timeout", exit_code=-15),
    record("error", "api_or_credit", attempt=3, exit_code=1, reason="exit code 1; 429"),
    record("error", "task_data", result={"record_error": "the job's run dir was removed"}),
    record("error", "build_instruction", exit_code=-9, usage={"cost_usd": 0.25}),
    record("failed", "api_or_credit", attempt=2),  # older records' shape of a non-model error
    record("error", "infra_failure", steps=[{"name": "a", "status": "passed"}], attempt=5),
    attrs.evolve(record("failed", exit_code=3), failure_category=None),
    attrs.evolve(record("error"), attempt=None),
]
OPTIONS = [
    {},
    {"retry_failed": True},
    {"retry_failed": True, "budget": AttemptBudget()},
    {"retry_categories": ["model_failure", "judge_rejected"], "budget": AttemptBudget(default=2)},
    {"non_model_categories": frozenset({"judge_rejected"}), "retry_failed": True},
]


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("in_place", [False, True])
def test_apply_resume_decides_every_record_exactly_as_decide(
    options: dict[str, Any], in_place: bool
) -> None:
    jobs = [make_job(f"c{i:02d}", "m", params={"i": i}) for i in range(len(VARIED) + 1)]
    recorded = {
        job.key: attrs.evolve(meta, test_case=job.case, run_dir=f"m/{job.case}-run")
        for job, meta in zip(jobs, VARIED, strict=False)
    }  # the last job has no record
    retry = retry_set(
        options.get("retry_failed", False),
        options.get("retry_categories"),
        options.get("non_model_categories", NON_MODEL_FAILURE_CATEGORIES),
    )
    expected = [
        decide(
            job,
            recorded.get(job.key),
            retry,
            options.get("non_model_categories", NON_MODEL_FAILURE_CATEGORIES),
            budget=options.get("budget"),
        )
        for job in jobs
    ]

    decided = apply_resume(jobs, recorded, in_place=in_place, **options).jobs

    assert [attrs.asdict(job) for job in decided] == [attrs.asdict(job) for job in expected]
    assert all((a is b) == in_place for a, b in zip(decided, jobs, strict=True))
    # Every kind of decision is among them, so both paths were taken.
    assert {job.decision for job in decided} >= {"run", "carry"}
