"""``batch stats``: numbers against hand-computed fixtures, every format, two-dir comparison.

Covers ``batch/stats/rates.py`` (the numbers) and ``batch/stats/render.py`` (the
command and its renderings). Fixtures in ``tests/data/stats/`` are written by hand; the
expected numbers below are worked out from them by hand (Wilson bounds from the textbook form
``(k + z²/2 ± z·sqrt(k(n-k)/n + z²/4)) / (n + z²)``).
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers.builders import make_jobs, write_summary_dir
from helpers.paths import TEST_DATA

from batch.cli import handle
from batch.commands.stats import stats_main
from batch.plan.jobs import Job
from batch.stats.rates import (
    batch_stats,
    compare_stats,
    group_stats,
    grouped,
    wilson_interval,
)

DATA = TEST_DATA / "stats"


def fixture(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text())


def batch_dir_from(tmp_path: Path, fixture_name: str, dirname: str = "batch") -> Path:
    batch_dir = tmp_path / dirname
    batch_dir.mkdir()
    shutil.copy(DATA / fixture_name, batch_dir / "batch-summary.json")
    return batch_dir


def run_stats(dirs: list[Path], fmt: str = "json", by: str = "model") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = handle(lambda: stats_main(dirs, fmt=fmt, by=by, out=out, err=err), err)
    return status, out.getvalue(), err.getvalue()


def row_for(result: dict[str, Any], key: str, name: str) -> dict[str, Any]:
    (row,) = [row for row in result[key] if row[key[:-1]] == name]
    return row


# -- the Wilson interval -----------------------------------------------------------------


class TestWilsonInterval:
    def test_matches_published_values(self) -> None:
        """5/10 and 9/10 as tabulated in Newcombe (1998) and every stats textbook."""
        assert wilson_interval(5, 10) == pytest.approx((0.236593, 0.763407), abs=1e-6)
        assert wilson_interval(9, 10) == pytest.approx((0.595850, 0.982124), abs=1e-6)

    def test_no_successes_starts_at_zero_and_all_successes_end_at_one(self) -> None:
        # Closed forms: upper = z²/(n + z²) for 0/n; lower = n/(n + z²) for n/n.
        z2 = 1.959963984540054**2
        assert wilson_interval(0, 2) == pytest.approx((0.0, z2 / (2 + z2)))
        assert wilson_interval(3, 3) == pytest.approx((3 / (3 + z2), 1.0))

    def test_no_trials_has_no_interval(self) -> None:
        assert wilson_interval(0, 0) is None

    def test_all_successes_never_end_past_one(self) -> None:
        # For 16/16 the formula's float sum is 1.0000000000000002: the bound is 1.
        assert wilson_interval(16, 16)[1] == 1.0  # type: ignore[index]


# -- one group's figures ---------------------------------------------------------------------


def job_row(status: str, category: str | None = None, duration: float = 1.0) -> dict[str, Any]:
    return {"case": "c", "model": "m", "status": status, "failure_category": category,
            "duration_seconds": duration}  # fmt: skip


class TestGroupStats:
    def test_rows_may_be_any_iterable(self) -> None:
        rows = [job_row("passed"), job_row("failed"), job_row("error", "api_or_credit")]
        assert group_stats(iter(rows)) == group_stats(rows)
        assert group_stats(iter(rows))["jobs"] == 3

    def test_both_bounds_of_both_rates(self) -> None:
        # 6 of 9: 66.7% (35.4-87.9), as the table prints it.
        stats = group_stats([job_row("passed")] * 6 + [job_row("failed")] * 3)
        assert (stats["adjusted_pass_rate_low"], stats["adjusted_pass_rate_high"]) == (
            pytest.approx((0.354, 0.879), abs=1e-3)
        )
        assert stats["pass_rate_low"] == stats["adjusted_pass_rate_low"]

    def test_categories_of_equal_count_in_name_order(self) -> None:
        rows = [job_row("failed", "wrong"), job_row("error", "api_or_credit")] * 2
        rows.append(job_row("error", "task_data"))
        stats = group_stats(rows)
        assert list(stats["failure_categories"].items()) == [
            ("api_or_credit", 2), ("wrong", 2), ("task_data", 1)
        ]  # fmt: skip

    def test_durations_are_rounded_to_the_millisecond(self) -> None:
        stats = group_stats([job_row("passed", duration=1.23456), job_row("passed", duration=1.0)])
        assert (stats["mean_duration_seconds"], stats["median_duration_seconds"]) == (1.117, 1.117)

    def test_an_unknown_grouping_says_which_there_are(self) -> None:
        with pytest.raises(ValueError) as caught:
            grouped([], "provider")
        assert str(caught.value) == "cannot group by 'provider'; use one of model, case"


# -- one batch, per model ----------------------------------------------------------------


class TestPerModel:
    @pytest.fixture
    def result(self) -> dict[str, Any]:
        return batch_stats(fixture("basic.json"), by="model", batch_dir="basic")

    def test_models_in_sweep_order(self, result: dict[str, Any]) -> None:
        assert [row["model"] for row in result["models"]] == [
            "m/alpha",
            "m/beta",
            "m/gamma",
            "m/delta",
        ]

    def test_counts_rates_and_intervals(self, result: dict[str, Any]) -> None:
        alpha = row_for(result, "models", "m/alpha")
        # 2 passed, 1 failed, 1 error, 1 pending.
        assert (alpha["jobs"], alpha["passed"], alpha["failed"], alpha["error"]) == (5, 2, 1, 1)
        assert alpha["pending"] == 1
        assert alpha["pass_rate"] == pytest.approx(2 / 4)
        assert (alpha["pass_rate_low"], alpha["pass_rate_high"]) == pytest.approx(
            (0.150039, 0.849961), abs=1e-6
        )
        assert alpha["adjusted_pass_rate"] == pytest.approx(2 / 3, abs=1e-6)
        assert (alpha["adjusted_pass_rate_low"], alpha["adjusted_pass_rate_high"]) == (
            pytest.approx((0.207660, 0.938508), abs=1e-6)
        )

    def test_only_errors_gives_zero_pass_rate_and_no_adjusted_rate(
        self, result: dict[str, Any]
    ) -> None:
        beta = row_for(result, "models", "m/beta")
        assert beta["pass_rate"] == 0.0
        assert beta["pass_rate_high"] == pytest.approx(0.657620, abs=1e-6)
        assert beta["adjusted_pass_rate"] is None
        assert beta["adjusted_pass_rate_low"] is None
        assert beta["adjusted_pass_rate_high"] is None

    def test_unfinished_jobs_count_as_jobs_but_not_in_rates(self, result: dict[str, Any]) -> None:
        delta = row_for(result, "models", "m/delta")
        assert (delta["jobs"], delta["pending"], delta["skipped"]) == (2, 1, 1)
        assert delta["pass_rate"] is None and delta["adjusted_pass_rate"] is None
        assert delta["mean_duration_seconds"] is None
        assert delta["failure_categories"] == {}

    def test_durations_of_finished_jobs_only(self, result: dict[str, Any]) -> None:
        # m/beta's running job has 2.5 s so far: not a result, left out.
        beta = row_for(result, "models", "m/beta")
        assert beta["mean_duration_seconds"] == 6.0
        gamma = row_for(result, "models", "m/gamma")  # 1, 2, 3, 4, 100
        assert gamma["mean_duration_seconds"] == 22.0
        assert gamma["median_duration_seconds"] == 3.0

    def test_failure_categories_with_uncategorized(self, result: dict[str, Any]) -> None:
        assert row_for(result, "models", "m/alpha")["failure_categories"] == {
            "infra_failure": 1,
            "model_failure": 1,
        }
        assert row_for(result, "models", "m/gamma")["failure_categories"] == {"uncategorized": 1}

    def test_overall(self, result: dict[str, Any]) -> None:
        overall = result["overall"]
        assert {k: overall[k] for k in ("jobs", "passed", "failed", "error")} == {
            "jobs": 17,
            "passed": 6,
            "failed": 2,
            "error": 3,
        }
        assert (overall["skipped"], overall["pending"], overall["running"]) == (2, 3, 1)
        assert overall["pass_rate"] == pytest.approx(6 / 11, abs=1e-6)
        assert overall["adjusted_pass_rate"] == 0.75
        assert (overall["adjusted_pass_rate_low"], overall["adjusted_pass_rate_high"]) == (
            pytest.approx((0.409275, 0.928521), abs=1e-6)
        )
        # 1 2 3 4 5 7 10 20 30 40 100: sum 222 over 11, middle 7.
        assert overall["mean_duration_seconds"] == 20.182
        assert overall["median_duration_seconds"] == 7.0
        assert overall["failure_categories"] == {
            "infra_failure": 2,
            "api_or_credit": 1,
            "model_failure": 1,
            "uncategorized": 1,
        }

    def test_json_document_matches_golden_file(self, result: dict[str, Any]) -> None:
        """Key names and order are the documented interface (docs/stats.md)."""
        assert result == fixture("basic.stats.json")
        assert list(result["models"][0]) == list(fixture("basic.stats.json")["models"][0])


class TestPerCase:
    def test_rows_keyed_by_case(self) -> None:
        result = batch_stats(fixture("basic.json"), by="case")
        assert "models" not in result
        assert [row["case"] for row in result["cases"]] == ["c1", "c2", "c3", "c4", "c5"]

    def test_numbers(self) -> None:
        result = batch_stats(fixture("basic.json"), by="case")
        c1 = row_for(result, "cases", "c1")  # passed, error, passed, pending
        assert (c1["jobs"], c1["passed"], c1["error"], c1["pending"]) == (4, 2, 1, 1)
        assert c1["pass_rate"] == pytest.approx(2 / 3, abs=1e-6)
        assert c1["adjusted_pass_rate"] == 1.0
        assert c1["adjusted_pass_rate_low"] == pytest.approx(0.342380, abs=1e-6)
        c4 = row_for(result, "cases", "c4")  # error, running, failed (uncategorized)
        assert (c4["pass_rate"], c4["adjusted_pass_rate"]) == (0.0, 0.0)
        assert c4["adjusted_pass_rate_high"] == pytest.approx(0.793451, abs=1e-6)
        assert c4["failure_categories"] == {"infra_failure": 1, "uncategorized": 1}


class TestReasonsAndSpend:
    """A halted batch whose jobs reported usage and reasons; one job skipped with a reason,
    one without, a reason that is not text, a pending job with a stale reason."""

    def test_per_case_matches_golden_file(self) -> None:
        result = batch_stats(fixture("reasons.json"), by="case", batch_dir="reasons")
        assert result == fixture("reasons.case.stats.json")

    def test_per_case_lists_what_did_not_pass_and_why(self) -> None:
        result = batch_stats(fixture("reasons.json"), by="case")
        assert [(g["case"], [(j["model"], j["reason"]) for j in g["not_passed"]])
                for g in result["cases"]] == [
            ("c1", [("m/beta", "exit code 1: wrong answer")]),
            ("c2", [("m/alpha", "exit code 2; output.log matches '429'"),
                    ("m/beta", "breaker open: 5 consecutive api_or_credit")]),
            ("c3", [("m/beta", None)]),  # its reason is not text: nothing said
            ("c4", []),  # pending, and skipped without a reason: nothing to list
        ]  # fmt: skip
        assert result["batch_dir"] == ""

    def test_per_model_has_no_job_list(self) -> None:
        result = batch_stats(fixture("reasons.json"), by="model")
        assert all("not_passed" not in group for group in result["models"])
        assert result["overall"]["cost_usd"] == 0.032

    def test_a_comparison_shows_spend_when_either_side_reported_it(self) -> None:
        result = compare_stats(
            fixture("basic.json"), fixture("reasons.json"), batch_dirs=("basic", "reasons")
        )
        assert result == fixture("basic-reasons.compare.stats.json")
        assert result["overall"]["cost_usd_diff"] is None  # A reported no cost
        both = compare_stats(fixture("reasons.json"), fixture("reasons.json"))
        assert (both["a"]["batch_dir"], both["b"]["batch_dir"]) == ("", "")
        assert both["overall"]["cost_usd_diff"] == 0.0


def test_empty_summary_has_all_rates_null() -> None:
    summary = {"schema": 1, "batch_id": "b", "state": "running", "jobs": []}
    result = batch_stats(summary)
    assert result["models"] == []
    assert result["overall"]["jobs"] == 0
    assert result["overall"]["pass_rate"] is None
    assert result["overall"]["mean_duration_seconds"] is None


# -- the command: formats ----------------------------------------------------------------


class TestFormats:
    def test_json(self, tmp_path: Path) -> None:
        status, out, _ = run_stats([batch_dir_from(tmp_path, "basic.json")], "json")
        assert status == 0
        document = json.loads(out)
        assert document["batch_dir"] == str(tmp_path / "batch")
        assert {**document, "batch_dir": "basic"} == fixture("basic.stats.json")

    def test_json_by_case(self, tmp_path: Path) -> None:
        status, out, _ = run_stats([batch_dir_from(tmp_path, "basic.json")], "json", by="case")
        assert status == 0
        document = json.loads(out)
        assert document["by"] == "case"
        assert document["cases"][0]["case"] == "c1"

    def test_csv_one_row_per_model_nulls_empty(self, tmp_path: Path) -> None:
        status, out, _ = run_stats([batch_dir_from(tmp_path, "basic.json")], "csv")
        assert status == 0
        rows = list(csv.DictReader(io.StringIO(out)))
        assert [row["model"] for row in rows] == ["m/alpha", "m/beta", "m/gamma", "m/delta"]
        beta = rows[1]
        assert beta["error"] == "2"
        assert beta["pass_rate"] == "0.0"
        assert beta["adjusted_pass_rate"] == ""
        assert beta["failure_categories.api_or_credit"] == "1"
        assert beta["failure_categories.model_failure"] == "0"
        assert float(rows[0]["adjusted_pass_rate_low"]) == pytest.approx(0.20766, abs=1e-6)

    def test_markdown_table(self, tmp_path: Path) -> None:
        status, out, _ = run_stats([batch_dir_from(tmp_path, "basic.json")], "markdown")
        assert status == 0
        lines = out.splitlines()
        assert any(line.startswith("| Model | Jobs |") for line in lines)
        alpha = next(line for line in lines if line.startswith("| m/alpha "))
        assert "| 50.0% (15.0-85.0) | 66.7% (20.8-93.9) |" in alpha
        delta = next(line for line in lines if line.startswith("| m/delta "))
        assert delta.count("—") == 5  # two rates, two durations, no failures
        assert any(line.startswith("| **all jobs** | 17 |") for line in lines)

    def test_table(self, tmp_path: Path) -> None:
        status, out, _ = run_stats([batch_dir_from(tmp_path, "basic.json")], "table")
        assert status == 0
        alpha = next(line for line in out.splitlines() if "m/alpha" in line)
        assert "50.0% (15.0-85.0)" in alpha and "66.7% (20.8-93.9)" in alpha
        beta = next(line for line in out.splitlines() if "m/beta" in line)
        assert "—" in beta
        assert "6 jobs not run yet" in out
        assert all(line == line.rstrip() for line in out.splitlines())

    def test_passes_after_a_retry_are_counted_with_their_attempts(self, tmp_path: Path) -> None:
        # The quickstart's mock/ratelimited: 100 % that hid an attempt lost per case.
        jobs = make_jobs(["c1", "c2", "c3", "c4"], ["m/retried", "m/clean"])
        tries = {"c1": 2, "c2": 3, "c3": 1, "c4": 2}
        for job in jobs:
            job.status = "failed" if job.case == "c4" else "passed"
            job.attempts = tries[job.case] if job.model == "m/retried" else 1
        batch_dir = write_summary_dir(tmp_path / "b", jobs)
        status, out, _ = run_stats([batch_dir], "json")
        assert status == 0
        result = json.loads(out)
        retried = row_for(result, "models", "m/retried")
        # A direct count: c1 and c2 passed on attempts 2 and 3; c4's retry failed.
        assert (retried["passed_after_retry"], retried["retried_pass_extra_attempts"]) == (2, 3)
        clean = row_for(result, "models", "m/clean")
        assert (clean["passed_after_retry"], clean["retried_pass_extra_attempts"]) == (0, 0)
        assert result["overall"]["passed_after_retry"] == 2
        _, table, _ = run_stats([batch_dir], "table")
        assert "m/retried: 3 passed, 2 after a retry (3 more attempts)." in table
        assert "m/clean:" not in table

    def test_one_job_not_run_is_one_job(self, tmp_path: Path) -> None:
        jobs = make_jobs(["c1", "c2"], ["m"])
        jobs[0].status = "passed"
        status, out, _ = run_stats([write_summary_dir(tmp_path / "b", jobs)], "table")
        assert status == 0
        assert "1 job not run yet (pending, running or skipped)" in out, out

    @pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json"])
    def test_hostile_names_print_as_themselves(self, tmp_path: Path, fmt: str) -> None:
        names = ["[bold]x[/bold]", "a|b", "<script>", 'q"uote', "ünï/模型"]
        jobs = [Job(case="c", model=name, status="passed", duration_seconds=1.0) for name in names]
        batch_dir = write_summary_dir(tmp_path / "written", jobs)
        status, out, _ = run_stats([batch_dir], fmt)
        assert status == 0
        if fmt == "json":
            assert [row["model"] for row in json.loads(out)["models"]] == names
        elif fmt == "csv":
            assert [row["model"] for row in csv.DictReader(io.StringIO(out))] == names
        elif fmt == "markdown":
            assert r"| a\|b |" in out and r"\<script\>" in out and r"\[bold\]x\[/bold\]" in out
        else:
            assert "[bold]x[/bold]" in out and "a|b" in out and "ünï/模型" in out


def test_summary_written_by_the_driver(tmp_path: Path) -> None:
    jobs = [
        Job(case="c1", model="m", status="passed", duration_seconds=2.0),
        Job(case="c2", model="m", status="failed", failure_category="model_failure"),
        Job(case="c3", model="m", status="error", failure_category="api_or_credit"),
        Job(case="c4", model="m", status="skipped"),
    ]
    status, out, _ = run_stats([write_summary_dir(tmp_path / "written", jobs)], "json")
    assert status == 0
    (row,) = json.loads(out)["models"]
    assert (row["jobs"], row["passed"], row["failed"], row["error"], row["skipped"]) == (
        4,
        1,
        1,
        1,
        1,
    )
    assert row["pass_rate"] == pytest.approx(1 / 3, abs=1e-6)
    assert row["adjusted_pass_rate"] == 0.5


# -- two batches -------------------------------------------------------------------------


class TestComparison:
    @pytest.fixture
    def result(self) -> dict[str, Any]:
        return compare_stats(
            fixture("compare_a.json"), fixture("compare_b.json"), batch_dirs=("A", "B")
        )

    def test_adjusted_rate_difference_per_model(self, result: dict[str, Any]) -> None:
        diffs = {row["model"]: row["adjusted_pass_rate_diff"] for row in result["models"]}
        # m1: 1/3 → 3/4; m2: 2/3 → 3/4; m3 only in B.
        assert diffs == {
            "m1": pytest.approx(3 / 4 - 1 / 3, abs=1e-5),
            "m2": pytest.approx(3 / 4 - 2 / 3, abs=1e-5),
            "m3": None,
        }
        assert result["overall"]["adjusted_pass_rate_diff"] == pytest.approx(
            7 / 9 - 3 / 6, abs=1e-5
        )

    def test_both_sides_present_with_absent_side_null(self, result: dict[str, Any]) -> None:
        m3 = row_for(result, "models", "m3")
        assert m3["a"] is None
        assert m3["b"]["passed"] == 1
        assert row_for(result, "models", "m1")["a"]["error"] == 1

    def test_changed_jobs(self, result: dict[str, Any]) -> None:
        assert result["changed"] == [
            {"case": "c1", "model": "m3", "a": None, "b": "passed"},
            {"case": "c3", "model": "m1", "a": "error", "b": "passed"},
            {"case": "c3", "model": "m2", "a": "pending", "b": "passed"},
            {"case": "c4", "model": "m1", "a": "failed", "b": "passed"},
            {"case": "c5", "model": "m2", "a": "error", "b": None},
        ]
        assert {row["model"]: row["changed"] for row in result["models"]} == {
            "m1": 2,
            "m2": 2,
            "m3": 1,
        }

    def test_json_document_matches_golden_file(self, result: dict[str, Any]) -> None:
        assert result == fixture("compare.stats.json")

    def test_command_json(self, tmp_path: Path) -> None:
        a = batch_dir_from(tmp_path, "compare_a.json", "a")
        b = batch_dir_from(tmp_path, "compare_b.json", "b")
        status, out, _ = run_stats([a, b], "json")
        assert status == 0
        document = json.loads(out)
        assert (document["a"]["batch_dir"], document["b"]["batch_dir"]) == (str(a), str(b))
        assert (document["a"]["batch_id"], document["b"]["batch_id"]) == ("batch-A", "batch-B")
        assert len(document["changed"]) == 5

    def test_command_table_and_markdown(self, tmp_path: Path) -> None:
        a = batch_dir_from(tmp_path, "compare_a.json", "a")
        b = batch_dir_from(tmp_path, "compare_b.json", "b")
        for fmt in ("table", "markdown"):
            status, out, _ = run_stats([a, b], fmt)
            assert status == 0
            m1 = next(line for line in out.splitlines() if "m1" in line and "pp" in line)
            assert "1/3" in m1 and "3/4" in m1 and "+41.7 pp" in m1
            assert "Jobs whose status changed: 5" in out
            change = next(line for line in out.splitlines() if "c5" in line)
            assert "error" in change and "absent" in change

    def test_command_csv(self, tmp_path: Path) -> None:
        a = batch_dir_from(tmp_path, "compare_a.json", "a")
        b = batch_dir_from(tmp_path, "compare_b.json", "b")
        status, out, _ = run_stats([a, b], "csv")
        assert status == 0
        rows = {row["model"]: row for row in csv.DictReader(io.StringIO(out))}
        assert rows["m1"]["a.passed"] == "1" and rows["m1"]["b.passed"] == "3"
        assert float(rows["m2"]["adjusted_pass_rate_diff"]) == pytest.approx(1 / 12, abs=1e-5)
        assert rows["m3"]["a.jobs"] == "" and rows["m3"]["adjusted_pass_rate_diff"] == ""

    def test_by_case(self, tmp_path: Path) -> None:
        a = batch_dir_from(tmp_path, "compare_a.json", "a")
        b = batch_dir_from(tmp_path, "compare_b.json", "b")
        status, out, _ = run_stats([a, b], "json", by="case")
        assert status == 0
        c3 = row_for(json.loads(out), "cases", "c3")
        # A: error + pending → no adjusted rate; B: 2/2.
        assert c3["a"]["adjusted_pass_rate"] is None
        assert c3["b"]["adjusted_pass_rate"] == 1.0
        assert c3["adjusted_pass_rate_diff"] is None
        assert c3["changed"] == 2


# -- errors ------------------------------------------------------------------------------


class TestErrors:
    def test_missing_summary(self, tmp_path: Path) -> None:
        status, out, err = run_stats([tmp_path / "nope"])
        assert status == 2
        assert out == ""
        assert err == f"{tmp_path / 'nope' / 'batch-summary.json'}: No such file or directory\n"

    def test_unparsable_summary(self, tmp_path: Path) -> None:
        (tmp_path / "batch-summary.json").write_text('{"jobs": [')
        status, _, err = run_stats([tmp_path])
        assert status == 2
        assert err.startswith(f"{tmp_path / 'batch-summary.json'}: ")
        assert len(err.splitlines()) == 1

    def test_job_row_without_status(self, tmp_path: Path) -> None:
        (tmp_path / "batch-summary.json").write_text('{"jobs": [{"case": "c", "model": "m"}]}')
        status, _, err = run_stats([tmp_path])
        assert status == 2
        assert err.strip().endswith("job 0 needs string 'case', 'model' and 'status'")

    def test_second_dir_unreadable_prints_nothing(self, tmp_path: Path) -> None:
        status, out, err = run_stats([batch_dir_from(tmp_path, "basic.json"), tmp_path / "gone"])
        assert (status, out) == (2, "")
        assert str(tmp_path / "gone") in err

    def test_three_dirs_is_a_usage_error(self, tmp_path: Path) -> None:
        batch_dir = batch_dir_from(tmp_path, "basic.json")
        status, _, err = run_stats([batch_dir] * 3)
        assert status == 2
        assert "one batch dir, or two" in err
