"""``batch report``: a self-contained HTML file that parses, shows every job, escapes names."""

from __future__ import annotations

import io
import json
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from helpers.builders import write_summary_dir
from helpers.paths import TEST_DATA

from batch.cli import handle
from batch.commands.report import report_main
from batch.plan.jobs import Job

DATA = TEST_DATA / "stats"
VOID = {"meta", "br", "wbr", "img", "input", "link", "hr", "col", "source"}
HOSTILE_CASE = "<script>alert('x')</script>"
HOSTILE_MODEL = "ev\"il' & ünïcødé/模型"


class Page(HTMLParser):
    """Parses the report, failing on any unbalanced or misnested tag, and collects parts."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.cells: list[dict[str, str | None]] = []  # grid <td> attributes
        self.links: list[dict[str, str | None]] = []  # <a> attributes inside grid cells
        self.texts: list[str] = []
        self.feed(text)
        self.close()
        assert self.stack == [], f"unclosed tags: {self.stack}"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag == "td" and "table" in self.stack:
            self.cells.append(attributes)
        if tag == "a" and "td" in self.stack:
            self.links.append(attributes)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.texts.append(data.strip())

    def all(self, tag: str, css: str | None = None) -> list[dict[str, str | None]]:
        return [
            attrs
            for name, attrs in self.tags
            if name == tag and (css is None or css in (attrs.get("class") or "").split())
        ]


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


class TestGrid:
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
