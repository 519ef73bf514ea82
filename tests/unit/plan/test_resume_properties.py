"""Properties of resume over random ledgers on disk, checked against the table in docs/resume.md.

For any ledger (several runs per pair, ties, missing timestamps, truncated records, killed
runs, records of pairs outside the sweep) and any job list and options: every job gets
exactly one decision, the one the table gives for the newest readable record of its pair;
and the summary's totals always equal its row counts.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import attrs
from helpers.builders import make_job, make_summary, start_run, write_record
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batch.plan.jobs import STATUSES
from batch.plan.resume import apply_resume
from run_support.results import NON_MODEL_FAILURE_CATEGORIES, load_recorded_runs

# A small universe, so that records, jobs and ties meet often.
CASES = ("c0", "c1", "c2")
MODELS = ("m", "org/model:q4")
CATEGORIES = (None, "model_failure", *sorted(NON_MODEL_FAILURE_CATEGORIES), "judge_rejected")
DEFAULT_CATEGORY = {"passed": None, "failed": "model_failure", "error": "infra_failure"}


@attrs.frozen
class Run:
    case: str
    model: str
    kind: str  # "record" | "truncated" | "killed"
    outcome: str
    category: str | None
    at: int | None  # seconds after the epoch; None: the record has no timestamp
    dir_name: str


runs = st.builds(
    Run,
    case=st.sampled_from(CASES),
    model=st.sampled_from(MODELS),
    kind=st.sampled_from(("record", "record", "record", "truncated", "killed")),
    outcome=st.sampled_from(("passed", "failed", "error")),
    category=st.sampled_from(CATEGORIES),
    at=st.one_of(st.none(), st.integers(0, 4)),  # few values, so ties happen
    dir_name=st.text("abz", min_size=1, max_size=3),
)
pairs = st.lists(
    st.tuples(st.sampled_from(CASES), st.sampled_from(MODELS)), unique=True, min_size=1
)
category_sets = st.frozensets(st.sampled_from(CATEGORIES[1:]))


def write_ledger(batch_dir: Path, ledger: list[Run]) -> None:
    for i, run in enumerate(ledger):
        # The index keeps dir names unique per model, whatever the strategy drew.
        name = f"{run.dir_name}-{i}"
        if run.kind == "killed":
            start_run(batch_dir, run.case, run.model, dir_name=name)
        elif run.kind == "truncated":
            write_record(batch_dir, run.case, run.model, dir_name=name, raw='{"test_case": "')
        else:
            write_record(
                batch_dir,
                run.case,
                run.model,
                run.outcome,
                run.category,  # null for a failure: the reader supplies the default
                at=run.at or 0,
                timestamp="" if run.at is None else None,
                dir_name=name,
            )


def expected_decision(
    ledger: list[Run],
    case: str,
    model: str,
    retry_failed: bool,
    retry_categories: frozenset[str],
    non_model: frozenset[str],
) -> tuple[str, str | None]:
    """(decision, status carried) straight from the table, computed without the library."""
    readable = [
        (-1 if run.at is None else run.at, f"{run.dir_name}-{i}", run)
        for i, run in enumerate(ledger)
        if run.kind == "record" and (run.case, run.model) == (case, model)
    ]
    if not readable:
        return "run", None
    newest = max(readable, key=lambda item: item[:2])[2]
    category = newest.category or DEFAULT_CATEGORY[newest.outcome]
    if newest.outcome == "passed":
        return "carry", "passed"
    status = "error" if category in non_model else "failed"
    retry = retry_categories or (non_model if retry_failed else frozenset())
    return ("retry", None) if category in retry else ("carry", status)


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    ledger=st.lists(runs, max_size=12),
    jobs=pairs,
    retry_failed=st.booleans(),
    retry_categories=category_sets,
    non_model=st.one_of(st.just(NON_MODEL_FAILURE_CATEGORIES), category_sets),
)
def test_every_job_gets_exactly_the_decision_the_table_gives(
    ledger: list[Run],
    jobs: list[tuple[str, str]],
    retry_failed: bool,
    retry_categories: frozenset[str],
    non_model: frozenset[str],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        batch_dir = Path(tmp)
        write_ledger(batch_dir, ledger)
        recorded = load_recorded_runs(batch_dir)
    plan = apply_resume(
        [make_job(case, model) for case, model in jobs],
        recorded,
        retry_failed=retry_failed,
        retry_categories=sorted(retry_categories) or None,
        non_model_categories=non_model,
    )

    assert [job.key[:2] for job in plan.jobs] == jobs
    for job in plan.jobs:
        decision, status = expected_decision(
            ledger, job.case, job.model, retry_failed, retry_categories, non_model
        )
        assert job.decision == decision, (job, decision)
        if decision == "carry":
            assert (job.status, job.resumed) == (status, True)
        else:
            assert (job.status, job.resumed) == ("pending", False)
    assert plan.carried + plan.to_run == len(jobs)
    assert plan.retried == sum(job.decision == "retry" for job in plan.jobs)

    assert_totals_match_rows(make_summary(plan.jobs))


def assert_totals_match_rows(summary: dict[str, Any]) -> None:
    rows = summary["jobs"]
    assert set(summary["totals"]) == set(STATUSES)
    for status in STATUSES:
        assert summary["totals"][status] == sum(row["status"] == status for row in rows)
    assert sum(summary["totals"].values()) == len(rows)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(STATUSES)))
def test_summary_totals_always_equal_the_row_counts(statuses: list[str]) -> None:
    jobs = [make_job(f"c{i}", "m", status=status) for i, status in enumerate(statuses)]
    assert_totals_match_rows(make_summary(jobs))
