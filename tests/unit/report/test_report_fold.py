"""``batch report`` past 3,000 cells: the grid folds to the failing cases and counts per
case group, and every failure keeps its reason and log link (in the page, and all of them in
``report-failures.tsv`` beside it)."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from urllib.parse import unquote

import pytest
from helpers.builders import write_summary_dir
from helpers.html_page import Page

from batch.cli import handle
from batch.commands.report import report_main
from batch.plan.jobs import Job
from batch.report import fold

CASES = 2500  # times 2 models: 5,000 jobs, past the 3,000 cells shown whole


def jobs(cases: int = CASES) -> list[Job]:
    made = []
    for i in range(cases):
        for model in ("m/one", "m/two"):
            failing = model == "m/two" and i % 50 == 7
            made.append(
                Job(
                    case=f"set{i // 500}/case-{i:05d}",
                    model=model,
                    status="failed" if failing else "passed",
                    failure_category="model_failure" if failing else None,
                    reason=f"wrong answer on case-{i:05d}" if failing else None,
                    duration_seconds=1.0,
                    run_dir=f"{model.replace('/', '_')}/case-{i:05d}-a1",
                    attempts=1,
                )
            )
    return made


def report(batch_dir: Path) -> str:
    err, out = io.StringIO(), io.StringIO()
    assert handle(lambda: report_main(batch_dir, out=out, err=err), err) == 0, err.getvalue()
    return (batch_dir / "report.html").read_text(encoding="utf-8")


def tsv_rows(batch_dir: Path) -> list[dict[str, str]]:
    with open(batch_dir / "report-failures.tsv", encoding="utf-8", newline="") as file:
        return list(csv.DictReader(file, delimiter="\t"))


def test_past_3000_cells_the_grid_folds_and_every_failure_is_there(tmp_path: Path) -> None:
    batch_dir = write_summary_dir(tmp_path / "big", jobs())
    text = report(batch_dir)
    page = Page(text)
    failing = [f"case-{i:05d}" for i in range(CASES) if i % 50 == 7]
    # The grid holds the failing cases' rows only: 2 cells each and the passed count.
    grid_cells = [cell for cell in page.cells if "data-r" in cell]
    assert len(grid_cells) == 2 * len(failing)
    # Per case group: set0 .. set4, each 500 cases, 10 failing on m/two.
    groups = {row[0]: row[1:] for row in _table(page, "By case group")}
    assert groups["set0 (500)"] == ["500/500", "490/500 10✗"]
    assert len(groups) == 5
    # Every failure: its case, reason and log link.
    listed = _table(page, "Every failure")
    assert [row[0] for row in listed] == [f"set{int(c[5:]) // 500}/{c}" for c in failing]
    assert all(row[3] == f"wrong answer on {row[0].split('/')[1]}" for row in listed)
    hrefs = {unquote(a["href"] or "") for tag, a in page.tags if tag == "a"}
    assert {f"m_two/{case}-a1/output.log" for case in failing} <= hrefs
    assert [row["reason"] for row in tsv_rows(batch_dir)] == [
        f"wrong answer on {c}" for c in failing
    ]
    # Bounded per job: a whole grid would be ~300 bytes a job.
    assert len(text.encode()) < 60 * len(jobs())


def test_past_the_listed_failures_the_rest_are_in_the_tsv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fold, "MAX_LISTED", 20)
    batch_dir = write_summary_dir(tmp_path / "big", jobs())
    page = Page(report(batch_dir))
    assert len(_table(page, "Every failure")) == 20
    assert "all 50 are in report-failures.tsv" in " ".join(" ".join(page.texts).split())
    rows = tsv_rows(batch_dir)
    assert len(rows) == 50 and rows[-1]["run_dir"] == "m_two/case-02457-a1"
    assert rows[-1]["failure_category"] == "model_failure" and rows[-1]["status"] == "failed"


def test_a_small_batch_keeps_its_whole_grid_and_writes_no_tsv(tmp_path: Path) -> None:
    batch_dir = write_summary_dir(tmp_path / "small", jobs(100))
    page = Page(report(batch_dir))
    assert len([cell for cell in page.cells if "data-r" in cell]) == 200
    assert not (batch_dir / "report-failures.tsv").exists()


def _table(page: Page, which: str) -> list[list[str]]:
    """The body rows, as cell texts, of the folded section's table ``which``: after the
    grid come the case groups', then the failures'."""
    tables = [rows for title, rows in page.tables if title.startswith("Case")]
    rows = tables[-2 if which == "By case group" else -1]
    return [
        [" ".join(cell.raw.split()) for cell in row.cells] for row in rows if row.part == "tbody"
    ]
