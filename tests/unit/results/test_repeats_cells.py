"""The cells of the repeats tables (``batch stats`` and ``batch report`` show the same)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from helpers.builders import write_summary_dir

from batch.commands.stats import stats_main
from batch.plan.jobs import Job
from batch.results.repeats_cells import sampled_repeatedly, signed_cell


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
def test_scores_without_repeats_are_titled_samples_and_scores(tmp_path: Path, fmt: str) -> None:
    # The quickstart's jobs report a score: one sample per case, nothing repeated.
    text = stats_text(tmp_path, scored_jobs(repeats=1), fmt)
    assert "Samples and scores" in text
    assert "Repeats" not in text


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_repeated_samples_are_titled_repeats(tmp_path: Path, fmt: str) -> None:
    text = stats_text(tmp_path, scored_jobs(repeats=2), fmt)
    assert "Repeats" in text
    assert "Samples and scores" not in text


def test_the_title_follows_whether_some_case_has_more_than_one_sample() -> None:
    assert sampled_repeatedly({"samples_per_case": {"min": 1, "max": 2}})
    assert not sampled_repeatedly({"samples_per_case": {"min": 1, "max": 1}})
    assert not sampled_repeatedly({"samples_per_case": None})  # no sample finished yet
