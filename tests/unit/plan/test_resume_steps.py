"""Step-level resume decisions: where a retry of a multi-step job starts (docs/resume.md).

End to end, through real runs: tests/unit/attempt/test_step_resume.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers.builders import make_job

from batch.plan.resume import command_text, decide, resume_point
from batch.sweep.features.steps import Step
from run_support.results import NON_MODEL_FAILURE_CATEGORIES, RunMeta

EVAL = Step("eval", ("python", "eval.py", "{case}", "{run_dir}"))
JUDGE = Step("judge", ("python", "judge.py", "{run_dir}"))
SCORE = Step("score", ("python", "score.py"))
JOB = make_job("c01", "m")


def entry(step: Step, status: str, **fields: Any) -> dict[str, Any]:
    return {"name": step.name, "status": status, "command": command_text(step, JOB), **fields}


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        ([entry(EVAL, "passed"), entry(JUDGE, "error")], 1),
        ([entry(EVAL, "reused"), entry(JUDGE, "error")], 1),
        ([entry(EVAL, "error"), entry(JUDGE, "skipped")], 0),
        # All passed but the job did not (judge's result.json said so): the judge reruns.
        ([entry(EVAL, "passed"), entry(JUDGE, "passed")], 1),
        ([entry(EVAL, "passed")], 1),
        # Three steps: the first two are reused, the last one always runs.
        ([entry(EVAL, "passed"), entry(JUDGE, "passed"), entry(SCORE, "passed")], 2),
        ([entry(EVAL, "passed"), entry(JUDGE, "error"), entry(SCORE, "skipped")], 1),
        ([{**entry(EVAL, "passed"), "name": "evaluate"}, entry(JUDGE, "error")], 0),
        (["eval", 3], 0),
        ([], 0),
    ],
)
def test_a_retry_reuses_the_leading_steps_that_passed(entries: list, expected: int) -> None:
    steps = (EVAL, JUDGE, SCORE) if len(entries) == 3 else (EVAL, JUDGE)
    assert resume_point(entries, steps, JOB) == expected


def test_a_changed_command_makes_that_step_and_later_ones_run_again() -> None:
    entries = [entry(EVAL, "passed"), entry(JUDGE, "error")]
    new_eval = Step("eval", ("python", "eval.py", "{case}", "{run_dir}", "--shots", "5"))
    assert resume_point(entries, (new_eval, JUDGE), JOB) == 0


def test_a_changed_param_counts_as_a_changed_command() -> None:
    step = Step("eval", ("python", "eval.py", "{params.lang}"))
    before = [
        entry(step, "passed") | {"command": command_text(step, make_job(params={"lang": "en"}))}
    ]
    assert (
        resume_point(
            [*before, entry(JUDGE, "error")], (step, JUDGE), make_job(params={"lang": "en"})
        )
        == 1
    )
    assert (
        resume_point(
            [*before, entry(JUDGE, "error")], (step, JUDGE), make_job(params={"lang": "fr"})
        )
        == 0
    )


def record(outcome: str, category: str | None, steps: list[dict[str, Any]]) -> RunMeta:
    return RunMeta("c01", "m", outcome, failure_category=category, steps=steps, run_dir="m/run-a1")


def test_a_retried_job_is_planned_from_the_failed_step() -> None:
    meta = record("error", "api_or_credit", [entry(EVAL, "passed"), entry(JUDGE, "error")])
    job = decide(JOB, meta, NON_MODEL_FAILURE_CATEGORIES, steps=(EVAL, JUDGE))
    assert (job.decision, job.resume_from_step, job.reuse_run_dir) == ("retry", 1, "m/run-a1")
    assert (
        job.decision_reason
        == "recorded error (api_or_credit) is retried from step judge (eval reused)"
    )


def test_a_model_failure_in_a_later_step_is_kept() -> None:
    meta = record("failed", "model_failure", [entry(EVAL, "passed"), entry(JUDGE, "failed")])
    job = decide(JOB, meta, NON_MODEL_FAILURE_CATEGORIES, steps=(EVAL, JUDGE))
    assert (job.decision, job.status, job.resume_from_step) == ("carry", "failed", 0)
    assert job.steps == meta.steps


def test_a_command_is_kept_with_its_per_attempt_placeholders_as_written() -> None:
    # Two attempts of one job have different run dirs and numbers but the same command.
    step = Step("eval", ("run", "{case}", "{model_safe}", "{run_dir}", "{batch_dir}", "{attempt}"))
    job = make_job("c01", "openai/gpt-4o")
    assert command_text(step, job) == [
        "run", "c01", "openai--gpt-4o", "{run_dir}", "{batch_dir}", "{attempt}"
    ]  # fmt: skip
    assert command_text(Step("judge", ("judge", "{model}")), job) == ["judge", "openai/gpt-4o"]


def test_a_command_that_cannot_be_expanded_is_kept_as_written() -> None:
    step = Step("eval", ("run", "{params.missing}", "{nope}"))
    assert command_text(step, JOB) == ["run", "{params.missing}", "{nope}"]


RETRIED = [entry(EVAL, "passed"), entry(JUDGE, "error")]


@pytest.mark.parametrize(
    ("steps", "recorded", "run_dir"),
    [
        ((), RETRIED, "m/run-a1"),  # the sweep has no steps (any more)
        ((EVAL, JUDGE), None, "m/run-a1"),  # the record has none
        ((EVAL, JUDGE), [], "m/run-a1"),
        ((EVAL, JUDGE), RETRIED, None),  # nowhere to find the reused artifacts
        ((EVAL, JUDGE), [entry(EVAL, "error"), entry(JUDGE, "skipped")], "m/run-a1"),
    ],
)
def test_a_retry_without_reusable_steps_runs_every_step(
    steps: tuple[Step, ...], recorded: list[Any] | None, run_dir: str | None
) -> None:
    meta = RunMeta("c01", "m", "error", failure_category="api_or_credit", steps=recorded)
    meta.run_dir = run_dir
    job = decide(JOB, meta, NON_MODEL_FAILURE_CATEGORIES, steps=steps)
    assert (job.decision, job.resume_from_step, job.reuse_run_dir) == ("retry", 0, None)
    assert job.decision_reason == "recorded error (api_or_credit) is retried"


def test_a_retry_names_every_step_it_reuses() -> None:
    score = SCORE
    steps = [entry(EVAL, "passed"), entry(JUDGE, "reused"), entry(score, "error")]
    meta = record("error", "infra_failure", steps)
    job = decide(JOB, meta, NON_MODEL_FAILURE_CATEGORIES, steps=(EVAL, JUDGE, score))
    assert (job.resume_from_step, job.reuse_run_dir) == (2, "m/run-a1")
    assert job.decision_reason == (
        "recorded error (infra_failure) is retried from step score (eval, judge reused)"
    )


def test_a_step_labelling_its_containers_is_reused_until_its_param_changes() -> None:
    # The label names the attempt's run dir: it is kept as written, as {run_dir} is.
    step = Step("eval", ("podman", "run", "--label", "{container_label}", "{params.image}"))
    job = make_job(params={"image": "py:3.12"})
    before = [entry(step, "passed") | {"command": command_text(step, job)}, entry(JUDGE, "error")]

    assert before[0]["command"][3] == "{container_label}"
    assert resume_point(before, (step, JUDGE), job) == 1
    assert resume_point(before, (step, JUDGE), make_job(params={"image": "py:3.13"})) == 0
