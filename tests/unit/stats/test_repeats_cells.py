"""The cells of the repeats tables (``batch stats`` and ``batch report`` show the same)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from helpers.builders import write_summary_dir

from batch.commands.stats import stats_main
from batch.plan.jobs import Job
from batch.stats.repeats_cells import sampled_repeatedly, signed_cell


@pytest.mark.parametrize(
    ("figure", "text"),
    [
        ({"estimate": 0.0123, "low": 0.0031, "high": 0.0216}, "+0.012 (+0.003 to +0.022)"),
        ({"estimate": -0.25, "low": -0.5, "high": 0.125}, "-0.250 (-0.500 to +0.125)"),
    ],
)
def test_a_score_difference_has_its_bounds_at_the_estimates_precision(
    figure: dict[str, float], text: str
) -> None:
    assert signed_cell(figure, rate=False) == text


def test_no_difference_is_not_written_as_minus_zero() -> None:
    # A mean of per-case differences that are all 0 can be -0.0 in floating point.
    figure = {"estimate": -0.0, "low": -0.29, "high": 0.29}
    assert signed_cell(figure) == "+0.0 pp (-29.0 to +29.0)"
    assert signed_cell({"estimate": -0.0, "low": -0.0, "high": 0.0}, rate=False) == (
        "+0.000 (+0.000 to +0.000)"
    )


def scored_jobs(repeats: int) -> list[Job]:
    """Two cases of one model, each sampled ``repeats`` times, every job with a score."""
    return [
        Job(
            case=case,
            model="m",
            status="passed" if repeat == 1 else "failed",
            repeat=repeat,
            duration_seconds=1.0,
            run_dir=f"m/{case}-r{repeat}-a1",
            attempts=1,
            score=1.0 if repeat == 1 else 0.0,
        )
        for case in ("c1", "c2")
        for repeat in range(1, repeats + 1)
    ]


def stats_text(tmp_path: Path, jobs: list[Job], fmt: str) -> str:
    batch_dir = write_summary_dir(tmp_path / "b", jobs)
    out, err = io.StringIO(), io.StringIO()
    assert stats_main([batch_dir], fmt=fmt, out=out, err=err, environ={}) == 0, err.getvalue()
    return out.getvalue()


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_scores_without_repeats_show_only_the_score(tmp_path: Path, fmt: str) -> None:
    # The quickstart's jobs report a score: one sample per case, nothing repeated. pass@1
    # is the pass rate, shown once with one interval; pass@k and pass^k are not shown.
    text = stats_text(tmp_path, scored_jobs(repeats=1), fmt)
    assert "Scores" in text and "Score (95% CI)" in text
    for absent in ("Repeats", "Samples and scores", "pass@", "pass^", "Flaky", "Samples/case"):
        assert absent not in text


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_repeated_samples_are_titled_repeats(tmp_path: Path, fmt: str) -> None:
    text = stats_text(tmp_path, scored_jobs(repeats=2), fmt)
    assert "Repeats" in text and "pass@k (95% CI)" in text
    assert "Scores\n" not in text


def test_the_title_follows_whether_some_case_has_more_than_one_sample() -> None:
    assert sampled_repeatedly({"samples_per_case": {"min": 1, "max": 2}})
    assert not sampled_repeatedly({"samples_per_case": {"min": 1, "max": 1}})
    assert not sampled_repeatedly({"samples_per_case": None})  # no sample finished yet


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_every_table_names_the_method_of_its_intervals(tmp_path: Path, fmt: str) -> None:
    one = stats_text(tmp_path / "one", scored_jobs(repeats=1), fmt).replace("\n", " ")
    assert "95% intervals (docs/stats.md) — rates: Wilson score interval." in one
    assert "95% intervals (docs/stats.md) — score: Wilson score interval." in one
    repeated = stats_text(tmp_path / "four", scored_jobs(repeats=4), fmt).replace("\n", " ")
    effective = "Wilson interval on the effective number of samples"
    # the rates and pass@k in the repeats table: the same interval, by the same method
    assert f"— rates: {effective}" in repeated
    assert f"— pass@k and pass^k: {effective}" in repeated


def test_the_same_rate_has_the_same_interval_in_both_tables(tmp_path: Path) -> None:
    # The quickstart: the pass rate read 100.0% (75.8-100.0) in one table and
    # 100.0% (100.0-100.0) as pass@1 in the next. With repeats both are the same figure.
    jobs = [
        Job(case=f"c{i}", model="m", status="passed", repeat=r, duration_seconds=1.0,
            run_dir=f"m/c{i}-r{r}-a1", attempts=1)
        for i in range(12)
        for r in (1, 2)
    ]  # fmt: skip
    text = stats_text(tmp_path, jobs, "markdown")
    # the model and all jobs: pass rate and adjusted; pass@1, pass@k and pass^k
    assert text.count("100.0% (75.8-100.0)") == 2 * 2 + 2 * 3
    assert "(100.0-100.0)" not in text
