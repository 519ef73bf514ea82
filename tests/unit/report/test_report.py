"""``batch report``: a self-contained HTML file that parses, shows every job, escapes names."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from helpers.builders import write_summary_dir
from helpers.html_page import Page
from helpers.paths import TEST_DATA

from batch.cli import handle
from batch.commands.report import report_main
from batch.plan.jobs import Job

DATA = TEST_DATA / "stats"
HOSTILE_CASE = "<script>alert('x')</script>"
HOSTILE_MODEL = "ev\"il' & ünïcødé/模型"


def grid_statuses(page: Page) -> list[str]:
    """Each grid cell's status: the first class of every cell but the passed counts."""
    return [(cell["class"] or "").split()[0] for cell in page.cells if cell.get("class") != "sum"]


def job(case: str, model: str, status: str, **fields: Any) -> Job:
    finished = status in ("passed", "failed", "error")
    return Job(
        case=case,
        model=model,
        status=status,
        duration_seconds=fields.pop("duration_seconds", 12.5 if finished else None),
        run_dir=fields.pop("run_dir", f"{model}/{case}-a1" if finished else None),
        attempts=1 if finished else 0,
        **fields,
    )


def sweep_jobs() -> list[Job]:
    return [
        job("c1", "m1", "passed"),
        job("c1", "m2", "failed", failure_category="model_failure", duration_seconds=61.0),
        job("c2", "m1", "error", failure_category="api_or_credit"),
        job("c2", "m2", "pending"),
        job("c3", "m1", "skipped"),
        job("c3", "m2", "passed"),
    ]


def make_report(batch_dir: Path, output: Path | None = None) -> tuple[Page, str]:
    err, out = io.StringIO(), io.StringIO()
    assert handle(lambda: report_main(batch_dir, output=output, out=out, err=err), err) == 0, (
        err.getvalue()
    )
    written = output or batch_dir / "report.html"
    assert out.getvalue() == f"{written}\n"
    text = written.read_text(encoding="utf-8")
    return Page(text), text


@pytest.fixture
def batch_dir(tmp_path: Path) -> Path:
    return write_summary_dir(tmp_path / "batch-1", sweep_jobs())


def test_the_report_says_which_passes_took_a_retry(tmp_path: Path) -> None:
    done = [job("c1", "m1", "passed"), job("c2", "m1", "passed"), job("c1", "m2", "passed")]
    done[0].attempts, done[1].attempts = 2, 2
    page, _ = make_report(write_summary_dir(tmp_path / "batch-1", done))
    assert "m1: 2 passed, 2 after a retry (2 more attempts)." in page.texts
    assert not [text for text in page.texts if text.startswith("m2: ") and "retry" in text]


class TestGrid:
    def test_the_legend_names_only_statuses_some_cell_has(self, tmp_path: Path) -> None:
        done = [job("c1", "m1", "passed"), job("c2", "m1", "skipped")]
        _, text = make_report(write_summary_dir(tmp_path / "batch-1", done))
        legend = text.split("<h2>Case &times; model</h2>")[1].split("</ul>")[0]
        assert "passed</li>" in legend and "skipped</li>" in legend
        assert "pending</li>" not in legend and "running</li>" not in legend

    def test_every_job_has_a_cell_coloured_by_status(self, batch_dir: Path) -> None:
        page, _ = make_report(batch_dir)
        statuses = grid_statuses(page)
        assert statuses == ["passed", "failed", "error", "pending", "skipped", "passed"]

    def test_hover_shows_category_and_duration(self, batch_dir: Path) -> None:
        page, _ = make_report(batch_dir)
        failed = next(link for link in page.links if "status: failed" in (link["title"] or ""))
        assert "case: c1" in failed["title"]
        assert "model: m2" in failed["title"]
        assert "category: model_failure" in failed["title"]
        assert "duration: 1m 01s" in failed["title"]

    def test_click_opens_output_log_relative_to_report(self, batch_dir: Path) -> None:
        page, _ = make_report(batch_dir)
        assert [link["href"] for link in page.links] == [
            "m1/c1-a1/output.log",
            "m2/c1-a1/output.log",
            "m1/c2-a1/output.log",
            "m2/c3-a1/output.log",
        ]

    def test_links_work_from_a_report_written_elsewhere(
        self, batch_dir: Path, tmp_path: Path
    ) -> None:
        output = tmp_path / "reports" / "week 48.html"
        output.parent.mkdir()
        page, _ = make_report(batch_dir, output)
        href = page.links[0]["href"]
        assert href == "../batch-1/m1/c1-a1/output.log"
        assert (output.parent / unquote(href)).resolve() == batch_dir / "m1/c1-a1/output.log"

    def test_jobs_not_run_have_no_link(self, batch_dir: Path) -> None:
        page, _ = make_report(batch_dir)
        assert len(page.links) == 4  # pending and skipped jobs have no output.log

    def test_missing_pair_is_an_empty_cell(self, tmp_path: Path) -> None:
        batch_dir = write_summary_dir(
            tmp_path / "b", [job("c1", "m1", "passed"), job("c2", "m2", "passed")]
        )
        page, _ = make_report(batch_dir)
        assert grid_statuses(page) == [
            "passed",
            "none",
            "none",
            "passed",
        ]


class TestHostileNames:
    @pytest.fixture
    def page_and_text(self, tmp_path: Path) -> tuple[Page, str]:
        batch_dir = write_summary_dir(
            tmp_path / "b",
            [
                job(HOSTILE_CASE, HOSTILE_MODEL, "failed", failure_category='<img src=x>"'),
                job("c2", HOSTILE_MODEL, "passed", run_dir="javascript:alert(1)"),
                job("c3", "a b#c?d%", "passed", run_dir="a b#c?d%/c3"),
            ],
        )
        return make_report(batch_dir)

    def test_names_are_escaped_text(self, page_and_text: tuple[Page, str]) -> None:
        page, text = page_and_text
        assert HOSTILE_CASE not in text and "<img" not in text
        assert len(page.all("script")) == 1 and not page.all("img")  # the report's own
        assert HOSTILE_CASE in page.texts
        assert any(HOSTILE_MODEL in t for t in page.texts)

    def test_tooltip_keeps_the_name(self, page_and_text: tuple[Page, str]) -> None:
        page, _ = page_and_text
        assert f"case: {HOSTILE_CASE}" in page.links[0]["title"]
        assert 'category: <img src=x>"' in page.links[0]["title"]

    def test_run_dir_cannot_become_a_url_scheme(self, page_and_text: tuple[Page, str]) -> None:
        page, _ = page_and_text
        hrefs = [link["href"] for link in page.links]
        assert hrefs[1] == "javascript%3Aalert%281%29/output.log"
        assert hrefs[2] == "a%20b%23c%3Fd%25/c3/output.log"


class TestCharts:
    def test_one_bar_with_interval_per_model_with_a_rate(self, tmp_path: Path) -> None:
        jobs = [
            job("c1", "m1", "passed"),
            job("c2", "m1", "failed"),
            job("c3", "m1", "passed"),
            job("c1", "m2", "error", failure_category="infra_failure"),
        ]
        page, _ = make_report(write_summary_dir(tmp_path / "b", jobs))
        assert len(page.all("rect", "bar")) == 1  # m2 has no passed or failed job
        assert len(page.all("path", "whisker")) == 1
        assert "66.7%" in page.texts  # m1: 2 of 3
        assert any("no passed or failed job yet" in t for t in page.texts)

    def test_failure_categories_with_counts(self, batch_dir: Path) -> None:
        page, _ = make_report(batch_dir)
        assert "model_failure (1)" in page.texts
        assert "api_or_credit (1)" in page.texts

    def test_categories_stack_in_legend_order_on_every_bar(self, tmp_path: Path) -> None:
        jobs = [
            job("c1", "m1", "failed", failure_category="model_failure"),
            job("c2", "m1", "failed", failure_category="model_failure"),
            job("c3", "m1", "error", failure_category="infra_failure"),
            job("c4", "m1", "failed", failure_category="model_failure"),
            job("c1", "m2", "failed", failure_category="model_failure"),
            job("c2", "m2", "error", failure_category="infra_failure"),
            job("c3", "m2", "error", failure_category="infra_failure"),
        ]
        page, _ = make_report(write_summary_dir(tmp_path / "b", jobs))
        segments = [attrs["fill"] for attrs in page.all("rect") if attrs.get("fill")]
        assert segments == ["#e03131", "#f59f00"] * 2  # model_failure, then infra_failure

    def test_no_failures_says_so(self, tmp_path: Path) -> None:
        page, _ = make_report(write_summary_dir(tmp_path / "b", [job("c1", "m1", "passed")]))
        assert "No failed or error jobs." in page.texts


def test_self_contained(batch_dir: Path) -> None:
    page, text = make_report(batch_dir)
    (script,) = page.all("script")  # inline: sorting and filtering the grid
    assert script == {}
    assert not page.all("link") and not page.all("iframe")
    assert not [attrs for _, attrs in page.tags if "src" in attrs]
    assert "url(" not in text and "@import" not in text
    hrefs = [attrs["href"] or "" for _, attrs in page.tags if "href" in attrs]
    assert not [href for href in hrefs if "://" in href]


def test_realistic_sweep_all_jobs_present(tmp_path: Path) -> None:
    statuses = ("passed", "failed", "error", "passed", "pending", "skipped")
    jobs = [
        job(f"case-{c:03d}", f"model-{m}", statuses[(c + m) % len(statuses)])
        for c in range(130)
        for m in range(6)
    ]
    page, _ = make_report(write_summary_dir(tmp_path / "b", jobs))
    grid = [cell for cell in page.cells if cell.get("class") != "sum"]
    assert len(grid) == 780
    assert grid_statuses(page) == [j.status for j in jobs]


def test_empty_batch_still_renders(tmp_path: Path) -> None:
    page, _ = make_report(write_summary_dir(tmp_path / "b", []))
    assert page.cells == []


def test_summary_fixture_by_hand(tmp_path: Path) -> None:
    batch_dir = tmp_path / "b"
    batch_dir.mkdir()
    shutil.copy(DATA / "basic.json", batch_dir / "batch-summary.json")
    page, _ = make_report(batch_dir)
    summary = json.loads((DATA / "basic.json").read_text())
    assert len([c for c in page.cells if c.get("class") != "sum"]) == len(summary["jobs"]) + 3
    assert "batch-20261130T031500Z" in page.texts


class TestErrors:
    def test_missing_summary(self, tmp_path: Path) -> None:
        err = io.StringIO()
        nope = tmp_path / "nope"
        assert handle(lambda: report_main(nope, out=io.StringIO(), err=err), err) == 2
        assert err.getvalue() == (
            f"{tmp_path / 'nope' / 'batch-summary.json'}: No such file or directory\n"
        )
        assert not (tmp_path / "nope" / "report.html").exists()

    def test_unwritable_output(self, batch_dir: Path, tmp_path: Path) -> None:
        err = io.StringIO()
        output = tmp_path / "no-such-dir" / "r.html"
        assert (
            handle(lambda: report_main(batch_dir, output=output, out=io.StringIO(), err=err), err)
            == 2
        )
        assert err.getvalue().startswith(f"{output}: ")


# -- what a reader checks on the page (issue 10 item 8, issue 14 items 2 and 5) -------------


def write_events(batch_dir: Path, lines: list[tuple[str, str, dict[str, Any]] | str]) -> None:
    """``batch-logs/events.jsonl`` as the driver writes it: ``(event, t, fields)`` lines, or
    a line of text as is."""
    logs = batch_dir / "batch-logs"
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / "events.jsonl").open("w") as out:
        for line in lines:
            if isinstance(line, tuple):
                event, moment, fields = line
                line = json.dumps({"t": moment, "event": event, **fields})
            out.write(line + "\n")


def with_rows(batch_dir: Path, **per_row: Any) -> Path:
    """Add keys to every row of the summary: ``name=function(row) -> value or None``, as the
    driver adds ``usage`` and ``reason`` (docs/summary.md)."""
    path = batch_dir / "batch-summary.json"
    summary = json.loads(path.read_text())
    for row in summary["jobs"]:
        for key, value_of in per_row.items():
            value = value_of(row)
            if value is not None:
                row[key] = value
    path.write_text(json.dumps(summary))
    return batch_dir


def header_text(page: Page, text: str) -> str:
    """The page's text from the header, as one string (what the top of the page says)."""
    return " ".join(page.texts[: page.texts.index("Pass rate by model")])


def grid_cells(page: Page) -> list[dict[str, str | None]]:
    return [cell for cell in page.cells if cell.get("class") not in ("sum",) and "data-r" in cell]


class TestHeader:
    def test_start_and_run_time_cover_every_invocation(self, batch_dir: Path) -> None:
        # Interrupted after 1h 40m, resumed the next day for 52 minutes (as the summary says).
        write_events(
            batch_dir,
            [
                ("batch_start", "2026-11-29T03:15:00.000000Z", {"jobs": 6}),
                ("finish", "2026-11-29T03:20:00.000000Z", {"case": "c1"}),
                ("batch_end", "2026-11-29T04:55:00.000000Z", {"state": "interrupted"}),
                ("batch_start", "2026-11-30T03:15:00.000000Z", {"jobs": 6}),
                ("batch_end", "2026-11-30T04:07:00.000000Z", {"state": "complete"}),
            ],
        )
        _, text = make_report(batch_dir)
        assert "started 2026-11-29 03:15 UTC · ran 2h 32m over 2 invocations" in text
        assert "2026-11-30 03:15" not in text  # the last invocation's start is not the batch's

    def test_a_killed_driver_counts_up_to_its_last_event(self, batch_dir: Path) -> None:
        write_events(
            batch_dir,
            [
                ("batch_start", "2026-11-29T03:15:00.000000Z", {}),
                ("finish", "2026-11-29T03:45:00.000000Z", {"case": "c1"}),  # then SIGKILL
                ("batch_start", "2026-11-30T03:15:00.000000Z", {}),
                ("batch_end", "2026-11-30T03:45:00.000000Z", {"state": "complete"}),
                '{"t": "2026-11-30T03:46:00.0',  # a torn last line
            ],
        )
        _, text = make_report(batch_dir)
        assert "ran 1h 00m over 2 invocations" in text

    def test_without_events_the_summary_says_it(self, batch_dir: Path) -> None:
        _, text = make_report(batch_dir)  # make_summary: started 03:15, one hour
        assert "started 2026-11-30 03:15 UTC · ran 1h 00m" in text
        assert "invocations" not in text

    def test_incomplete_batch_says_so_beside_the_headline_rate(self, tmp_path: Path) -> None:
        jobs = [job("c1", "m", "passed"), job("c2", "m", "failed"), job("c3", "m", "pending")]
        batch_dir = write_summary_dir(tmp_path / "b", jobs, state="interrupted")
        page, _ = make_report(batch_dir)
        headline = page.texts.index("adjusted pass rate")
        assert page.texts[headline + 1] == "50.0%"
        assert page.texts[headline + 3] == (
            "incomplete: 2 of 3 jobs have an outcome (66.7%); not run: 1 pending; state interrupted"
        )

    def test_complete_batch_has_no_note(self, tmp_path: Path) -> None:
        batch_dir = write_summary_dir(tmp_path / "b", [job("c1", "m", "passed")])
        page, _ = make_report(batch_dir)
        assert not page.all("span", "incomplete")
        assert not [text for text in page.texts if text.startswith("incomplete")]


CATEGORIES = ("model_failure", "infra_failure", "api_or_credit", "a-new-one", "uncategorized")


class TestCategoryMarks:
    @pytest.fixture
    def report(self, tmp_path: Path) -> tuple[Page, str]:
        jobs = [
            job("c1", "m", "failed", failure_category="model_failure"),
            job("c2", "m", "error", failure_category="infra_failure"),
            job("c3", "m", "error", failure_category="api_or_credit"),
            job("c4", "m", "error", failure_category="a-new-one"),
            job("c5", "m", "failed", failure_category=None),  # names no category
            job("c6", "m", "passed"),
        ]
        return make_report(write_summary_dir(tmp_path / "b", jobs))

    def test_each_category_its_own_mark(self, report: tuple[Page, str]) -> None:
        page, _ = report
        assert page.cell_texts[::2] == ["✗", "!", "$", "◆", "~", "✓"]  # mark, passed count

    def test_each_category_its_own_colour(self, report: tuple[Page, str]) -> None:
        page, text = report
        classes = [(cell["class"] or "").split() for cell in grid_cells(page)]
        assert [css[0] for css in classes] == [
            "failed",
            "error",
            "error",
            "error",
            "failed",
            "passed",
        ]
        rules = dict(re.findall(r"\.(k\d+)\{background:(#[0-9a-f]{6})", text))
        colours = [rules[css[1]] for css in classes[:5]]
        assert len(set(colours)) == 5

    def test_the_legend_names_each_mark_and_colour(self, report: tuple[Page, str]) -> None:
        page, _ = report
        items = [t for t in page.texts if t.split(" (")[0] in CATEGORIES and t.endswith("(1)")]
        # Once above the failure bars, once above the grid.
        assert sorted(items) == sorted([f"{name} (1)" for name in CATEGORIES] * 2)
        swatches = {
            attrs["style"]
            for name, attrs in page.tags
            if name == "span" and (attrs.get("style") or "").startswith("background:#")
        }
        assert len(swatches) == len(CATEGORIES)

    def test_failures_filter_by_category_through_row_data(self, report: tuple[Page, str]) -> None:
        page, text = report
        # The category filter's options, and what each row says it holds.
        options = {
            name: value for value, name in re.findall(r'<option value="(\d+)">. (.+?)<', text)
        }
        assert set(options) == set(CATEGORIES)
        rows = page.all("tr")[1:]  # after the header row
        assert [row["data-f"] for row in rows] == ["1", "1", "1", "1", "1", "0"]
        order = ("model_failure", "infra_failure", "api_or_credit", "a-new-one", "uncategorized")
        assert [row["data-k"] for row in rows] == [f" {options[name]} " for name in order] + ["  "]
        # Without script the controls stay hidden and every row shows.
        (form,) = page.all("form")
        assert "hidden" in form
        assert not [row for row in rows if "hidden" in row]


LONG_MODEL = "openrouter/meta-llama/llama-3.1-405b-instruct-with-a-very-long-suffix-v2"


class TestReasonsSpendAndNames:
    @pytest.fixture
    def report(self, tmp_path: Path) -> tuple[Page, str]:
        batch_dir = write_summary_dir(tmp_path / "b", sweep_jobs())
        with_rows(
            batch_dir,
            reason=lambda row: "timeout after 1m" if row["status"] == "error" else None,
            usage=lambda row: (
                {"input_tokens": 900, "output_tokens": 100, "cost_usd": 0.5}
                if row["model"] == "m1"
                else None
            ),
        )
        return make_report(batch_dir)

    def test_tooltip_gives_the_reason(self, report: tuple[Page, str]) -> None:
        page, _ = report
        error = next(link for link in page.links if "status: error" in (link["title"] or ""))
        assert "reason: timeout after 1m" in (error["title"] or "")

    def test_tooltip_gives_the_spend(self, report: tuple[Page, str]) -> None:
        page, _ = report
        assert "spend: 1,000 tokens, $0.50" in (page.links[0]["title"] or "")
        assert "spend:" not in (page.links[1]["title"] or "")  # m2 reported none

    def test_spend_per_model_and_for_the_batch(self, report: tuple[Page, str]) -> None:
        page, _ = report
        assert "Spend by model" in page.texts
        table = page.texts[page.texts.index("Spend by model") :]
        # m1: three jobs at $0.50, one pass; m2 reported nothing.
        m1 = table[table.index("m1") : table.index("m1") + 7]
        assert m1 == ["m1", "2,700", "300", "—", "$1.50", "$1.50", "3 of 3"]
        total = table[table.index("whole batch") : table.index("whole batch") + 7]
        assert total[4] == "$1.50" and total[6] == "3 of 6"
        assert "$1.50" in page.texts  # in the header totals too

    def test_no_usage_no_spend(self, batch_dir: Path) -> None:
        page, _ = make_report(batch_dir)
        assert "Spend by model" not in page.texts
        assert not [text for text in page.texts if "spent" in text]
        assert not [link for link in page.links if "spend:" in (link["title"] or "")]

    def test_long_model_names_are_whole_in_headers_and_bars(self, tmp_path: Path) -> None:
        jobs = [job("c1", LONG_MODEL, "passed"), job("c2", LONG_MODEL, "failed")]
        page, text = make_report(write_summary_dir(tmp_path / "b", jobs))
        (header,) = page.all("th", "model")
        assert header["title"] == LONG_MODEL
        shown = re.search(r'<div class="v">(.*?)</div>', text)
        assert shown and shown.group(1).replace("<wbr>", "") == LONG_MODEL
        # Each chart label: the name over several lines (tspans), nothing cut.
        labels = re.findall(r'<text class="label"><title>[^<]*</title>(.*?)</text>', text)
        assert len(labels) == 2  # rate bars, failure bars
        for label in labels:
            lines = re.findall(r"<tspan[^>]*>([^<]*)</tspan>", label)
            assert len(lines) > 1 and "".join(lines) == LONG_MODEL
        assert "…" not in text


def compare_reports(
    tmp_path: Path, rows_b: dict[str, Any] | None = None, **rows: Any
) -> tuple[Page, str]:
    """``batch report A B``; ``rows`` adds keys to both batches' rows, ``rows_b`` to B's
    only (after ``rows``)."""
    a = write_summary_dir(
        tmp_path / "batch-a",
        [
            job("c1", "m1", "passed"),
            job("c2", "m1", "failed", failure_category="model_failure"),
            job("c3", "m1", "error", failure_category="api_or_credit"),
            job("c1", "m2", "passed"),
        ],
        state="interrupted",
    )
    b = write_summary_dir(
        tmp_path / "batch-b",
        [
            job("c1", "m1", "failed", failure_category="model_failure"),
            job("c2", "m1", "passed"),
            job("c3", "m1", "passed"),
            job("c1", "m2", "passed"),
        ],
    )
    for batch_dir in (a, b):
        with_rows(batch_dir, **rows)
    with_rows(b, **(rows_b or {}))
    err, out = io.StringIO(), io.StringIO()
    assert handle(lambda: report_main([a, b], out=out, err=err), err) == 0, err.getvalue()
    written = b / "report-vs-batch-a.html"
    assert out.getvalue() == f"{written}\n"
    text = written.read_text(encoding="utf-8")
    return Page(text), text


class TestTwoBatches:
    def test_rates_and_differences_side_by_side(self, tmp_path: Path) -> None:
        page, _ = compare_reports(tmp_path)
        assert "A: batch-a" in page.texts and "B: batch-b" in page.texts
        # Overall adjusted: A 2/3 passed of judged = 66.7%, B 3/4 = 75.0%.
        headline = page.texts.index("B - A")
        assert page.texts[headline + 1] == "+8.3 pp"
        table = page.texts[page.texts.index("Rates, spend and differences") :]
        m1 = table[table.index("m1") : table.index("m1") + 7]
        assert m1[1] == "1/2" and m1[3] == "2/3" and m1[5] == "+16.7 pp" and m1[6] == "3"
        # A was interrupted: its header says how much it covers.
        assert any(text.startswith("incomplete: 4 of 4 jobs") for text in page.texts)

    def test_changed_cells_show_both_sides_and_reasons(self, tmp_path: Path) -> None:
        page, _ = compare_reports(
            tmp_path,
            reason=lambda row: f"why {row['case']}" if row["status"] != "passed" else None,
        )
        cells = [cell for cell in page.cells if cell.get("class") in ("better", "worse")]
        assert [cell["class"] for cell in cells] == ["worse", "better", "better"]
        tips = [
            attrs["title"] for name, attrs in page.tags if name == "span" and attrs.get("title")
        ]
        assert "A: passed\nB: failed (model_failure): why c1" in tips[0]
        assert "A: error (api_or_credit): why c3\nB: passed" in tips[2]
        assert [text for text in page.cell_texts if "→" in text] == ["✓→✗", "✗→✓", "$→✓"]
        assert "m2" not in [attrs.get("title") for attrs in page.all("th", "model")]

    def test_cost_difference_when_usage_reported(self, tmp_path: Path) -> None:
        page, _ = compare_reports(
            tmp_path,
            usage=lambda row: {"cost_usd": 0.5},
            rows_b={"usage": lambda row: {"cost_usd": 1.0} if row["model"] == "m1" else None},
        )
        # A: 4 jobs at $0.50; B: m1's 3 jobs at $1.00, m2's one at $0.50.
        assert "adjusted pass rate · 3 jobs changed status · cost B - A +$1.50" in page.texts
        table = page.texts[page.texts.index("Rates, spend and differences") :]
        m1 = table[table.index("m1") : table.index("m1") + 10]
        assert m1[7:] == ["$1.50", "$3.00", "+$1.50"]
        m2 = table[table.index("m2") : table.index("m2") + 10]
        assert m2[7:] == ["$0.50", "$0.50", "±$0.00"]

    def test_no_usage_no_cost_columns(self, tmp_path: Path) -> None:
        page, _ = compare_reports(tmp_path)
        assert "Δ cost" not in page.texts and "A cost" not in page.texts

    def test_three_dirs_is_a_usage_error(self, tmp_path: Path) -> None:
        from click.testing import CliRunner

        from batch.cli import main

        result = CliRunner().invoke(main, ["report", "a", "b", "c"])
        assert result.exit_code == 2
        assert "give one BATCH_DIR, or two to compare" in result.stderr
