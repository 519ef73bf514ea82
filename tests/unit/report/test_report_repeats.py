"""``batch report``'s repeats sections on summaries written by the driver's own writer:
samples not finished yet, the tables' caps, colours that need an interval, names."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
from helpers.builders import write_summary_dir
from helpers.html_page import Page
from helpers.interval_reference import paired_newcombe

from batch.cli import handle
from batch.commands.report import report_main
from batch.plan.jobs import Job
from batch.report.repeats import MAX_FLAKY_ROWS

LONG_MODEL = "openrouter/meta-llama/llama-3.1-405b-instruct-with-a-very-long-suffix-v2"


def sample(case: str, model: str, repeat: int, status: str, **fields: Any) -> Job:
    finished = status in ("passed", "failed", "error")
    return Job(
        case=case,
        model=model,
        status=status,
        repeat=repeat,
        duration_seconds=1.0 if finished else None,
        run_dir=f"{model}/{case}-r{repeat}-a1" if finished else None,
        attempts=1 if finished else 0,
        **fields,
    )


def make_report(tmp_path: Path, jobs: list[Job]) -> tuple[Page, str]:
    batch_dir = write_summary_dir(tmp_path / "b", jobs)
    err, out = io.StringIO(), io.StringIO()
    assert handle(lambda: report_main(batch_dir, out=out, err=err), err) == 0, err.getvalue()
    text = (batch_dir / "report.html").read_text(encoding="utf-8")
    return Page(text), text


def grid_cells(page: Page) -> dict[str, tuple[str, str]]:
    """case -> (text, class) of its one model's grid cell."""
    rows = page.table("Case \u00d7 model")
    return {
        row.texts[0]: (row.cells[1].text, row.cells[1].attrs["class"] or "")
        for row in rows
        if row.part == "tbody"
    }


def test_a_cell_whose_samples_are_not_all_finished_says_so(tmp_path: Path) -> None:
    page, _ = make_report(
        tmp_path,
        [
            sample("c1", "m", 1, "passed"),
            sample("c1", "m", 2, "failed"),
            sample("c1", "m", 3, "pending"),
            sample("c2", "m", 1, "pending"),
            sample("c2", "m", 2, "running"),
            sample("c3", "m", 1, "error", failure_category="infra_failure"),
            sample("c3", "m", 2, "error", failure_category="infra_failure"),
            sample("c4", "m", 1, "passed"),
            sample("c4", "m", 2, "passed"),
        ],
    )
    cells = grid_cells(page)
    assert cells["c1"] == ("1/2…", "q5 share")
    assert cells["c2"] == ("\u2013…", "pending share")
    assert cells["c3"] == ("\u2013!", "error share")
    assert cells["c4"] == ("2/2", "q10 share")
    (tip,) = [link["title"] or "" for link in page.links if "not finished" in (link["title"] or "")]
    assert tip.startswith("case: c1\nmodel: m\n1 of 2 samples with a model outcome passed\n")
    assert "\nrepeat 2: failed\nrepeat 3: pending\n" in tip
    assert tip.endswith("click: open output.log of repeat 2")  # the first that did not pass


def test_the_flaky_table_is_capped_per_model_and_says_so(tmp_path: Path) -> None:
    cases = [f"c{i:03d}" for i in range(MAX_FLAKY_ROWS // 2 + 20)]
    jobs = [
        sample(case, model, repeat, status)
        for model in ("m1", "m2")
        for case in cases
        for repeat, status in ((1, "passed"), (2, "failed"))
    ]
    page, text = make_report(tmp_path, jobs)
    rows = [row for row in page.table("Flaky cases") if row.part == "tbody"]
    quota = MAX_FLAKY_ROWS // 2
    assert [row.texts[1] for row in rows] == ["m1"] * quota + ["m2"] * quota
    assert [row.texts[0] for row in rows[:quota]] == cases[:quota]  # in sweep order
    shown = f"({2 * quota:,} of {2 * len(cases):,})"
    assert f"Showing at most {quota:,} per model, in sweep order {shown}" in text


def test_past_8_models_each_is_compared_with_the_best(tmp_path: Path) -> None:
    models = [f"m{i:02d}" for i in range(21)]  # 210 pairs: too many to read
    jobs = [
        sample("c1", model, repeat, "passed" if repeat == 1 or model == "m07" else "failed")
        for model in models
        for repeat in (1, 2)
    ]
    page, text = make_report(tmp_path, jobs)
    rows = [row for row in page.table("Model against model") if row.part == "tbody"]
    assert [row.texts[:2] for row in rows] == [["m07", m] for m in models if m != "m07"]
    assert "each model against the best, m07 (A)" in text
    assert "Holm" in text


def test_the_pair_table_is_capped_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("batch.report.repeats.MAX_PAIR_ROWS", 5)
    models = [f"m{i:02d}" for i in range(8)]  # 28 pairs
    jobs = [
        sample("c1", model, repeat, "passed" if repeat == 1 else "failed")
        for model in models
        for repeat in (1, 2)
    ]
    page, text = make_report(tmp_path, jobs)
    rows = [row for row in page.table("Model against model") if row.part == "tbody"]
    assert len(rows) == 5
    assert [row.texts[:2] for row in rows[:2]] == [["m00", "m01"], ["m00", "m02"]]
    assert "Showing the first 5 of 28 pairs" in text


def test_a_difference_is_coloured_only_when_its_interval_leaves_out_zero(
    tmp_path: Path,
) -> None:
    jobs = []
    for i, case in enumerate(["c0", "c1", "c2", "c3"]):
        for repeat in (1, 2):
            jobs.append(sample(case, "never", repeat, "failed"))
            # most: every first sample passes, the second on even cases; half: odd cases.
            most = repeat == 1 or i % 2 == 0
            jobs.append(sample(case, "most", repeat, "passed" if most else "failed"))
            jobs.append(sample(case, "half", repeat, "passed" if i % 2 else "failed"))
    _, text = make_report(tmp_path, jobs)
    table = text.split("<h2>Model against model</h2>")[1].split("</section>")[0]
    rows = re.findall(r"<tr><td[^>]*>(\w+)</td><td[^>]*>(\w+)</td><td[^>]*>\d+</td>"
                      r'<td class="num">(.*?)</td>', table)  # fmt: skip
    cells = {(a, b): cell for a, b, cell in rows}
    # never -> most: per-case differences 1, 0.5, 1, 0.5 (Newcombe's interval, as
    # helpers.interval_reference.paired_newcombe computes it).
    for (a, b), (shares_a, shares_b) in {
        ("never", "most"): ([0, 0, 0, 0], [2, 1, 2, 1]),
        ("never", "half"): ([0, 0, 0, 0], [0, 2, 0, 2]),
        ("most", "half"): ([2, 1, 2, 1], [0, 2, 0, 2]),
    }.items():
        d, low, high = paired_newcombe([(c, 2) for c in shares_a], [(c, 2) for c in shares_b])
        text = f"{d * 100:+.1f} pp ({low * 100:+.1f} to {high * 100:+.1f})"
        css = "better" if low > 0 else "worse" if high < 0 else ""
        assert cells[(a, b)] == (f'<span class="{css}">{text}</span>' if css else text)
    # never -> most leaves out 0: coloured; the other two hold it.
    assert cells[("never", "most")].startswith('<span class="better">+75.0 pp')
    assert cells[("never", "half")].startswith("+50.0 pp (")


def test_long_and_hostile_names_are_whole_and_escaped(tmp_path: Path) -> None:
    hostile = "<script>alert('x')</script>"
    jobs = [
        sample(hostile, LONG_MODEL, 1, "passed"),
        sample(hostile, LONG_MODEL, 2, "failed"),
        sample(hostile, "m2", 1, "passed"),
        sample(hostile, "m2", 2, "passed"),
    ]
    page, text = make_report(tmp_path, jobs)
    assert hostile not in text and len(page.all("script")) == 1
    captions = re.findall(r'<figcaption class="name">(.*?)</figcaption>', text)
    assert [caption.replace("<wbr>", "") for caption in captions] == [LONG_MODEL, "m2"]
    flaky = [row for row in page.table("Flaky cases") if row.part == "tbody"]
    assert [row.texts[:3] for row in flaky] == [[hostile, LONG_MODEL, "1/2"]]


def test_without_repeats_or_scores_no_repeats_section(tmp_path: Path) -> None:
    jobs = [sample("c1", "m1", 1, "passed"), sample("c1", "m2", 1, "failed")]
    page, text = make_report(tmp_path, jobs)
    for heading in ("Samples, pass@k and pass^k by model", "Model against model", "Flaky cases"):
        assert heading not in page.texts
    assert "share" not in text and "curve" not in text


def test_a_changed_cell_of_a_batch_with_repeats_compares_every_sample(tmp_path: Path) -> None:
    # B lost c1's second sample and gained c2's third: each cell is A's c/n -> B's.
    a = write_summary_dir(
        tmp_path / "a",
        [sample(case, "m", r, "passed" if (case, r) != ("c2", 3) else "failed")
         for case in ("c1", "c2") for r in (1, 2, 3)],
    )  # fmt: skip
    b = write_summary_dir(
        tmp_path / "b",
        [sample(case, "m", r, "failed" if (case, r) == ("c1", 2) else "passed")
         for case in ("c1", "c2") for r in (1, 2, 3)],
    )  # fmt: skip
    err, out = io.StringIO(), io.StringIO()
    assert handle(lambda: report_main([a, b], out=out, err=err), err) == 0, err.getvalue()
    page = Page((b / "report-vs-a.html").read_text(encoding="utf-8"))
    rows = [row for row in page.table("Changed cells") if row.part == "tbody"]
    cells = {row.texts[0]: (row.cells[1].text, row.cells[1].attrs["class"]) for row in rows}
    assert cells == {"c1": ("3/3→2/3", "worse"), "c2": ("2/3→3/3", "better")}
    tips = [attrs.get("title") or "" for tag, attrs in page.tags if tag == "span"]
    tips = [tip for tip in tips if "\nA: " in tip]
    assert tips[0] == (
        "case: c1\nmodel: m\nA: 3 of 3 samples with a model outcome passed\n"
        "B: 2 of 3 samples with a model outcome passed\nrepeat 2: A passed, B failed"
    )


def test_scores_without_repeats_show_only_the_score(tmp_path: Path) -> None:
    jobs = [sample("c1", "m1", 1, "passed", score=1.0), sample("c2", "m1", 1, "failed", score=0.0)]
    page, text = make_report(tmp_path, jobs)
    assert "Scores by model" in page.texts
    assert "Samples, pass@k and pass^k by model" not in page.texts
    headers = page.table("Scores by model")[0].texts
    assert headers == ["Model", "Score (95% CI)"]
    assert "pass@" not in text.split("<h2>Scores by model</h2>")[1].split("</section>")[0]


def test_repeated_samples_are_titled_with_pass_at_k(tmp_path: Path) -> None:
    jobs = [sample("c1", "m1", 1, "passed", score=1.0), sample("c1", "m1", 2, "failed", score=0.0)]
    page, _ = make_report(tmp_path, jobs)
    assert "Samples, pass@k and pass^k by model" in page.texts
    assert "Scores by model" not in page.texts
