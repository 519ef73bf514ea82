"""``batch report`` is built from Jinja2 templates with autoescape: names that the page
once escaped by hand are escaped by the templates, no report module assembles HTML from
f-strings or by adding strings of tags, and Jinja2 is loaded only by the report."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.builders import write_summary_dir
from helpers.html_page import Page

from batch.cli import handle
from batch.commands.report import report_main
from batch.plan.jobs import Job
from batch.report import fold

REPO_ROOT = Path(__file__).resolve().parents[3]
#: Every module that builds the report's HTML, and the command that writes it.
REPORT_MODULES = [
    *sorted((REPO_ROOT / "batch" / "results").glob("report*.py")),
    REPO_ROOT / "batch" / "commands" / "report.py",
]
#: An HTML tag: ``<td``, ``</td>``, ``<br>``, ``<!DOCTYPE`` (not ``a < b``).
TAG = re.compile(r"<(?:/?[A-Za-z][A-Za-z0-9-]*(?=[\s>/])|!DOCTYPE)")

# A name with everything that must stay text: markup, both quotes, an ampersand, a
# right-to-left override and a control character (no "/": it is a directory's name too).
HOSTILE = "<svg onload=alert('x')> & \"q\" \u202eevil\x07"


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings (they may quote a tag)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def html_in_code(source: str) -> list[str]:
    """Each string literal of ``source`` (a plain string, or a part of an f-string) that holds
    an HTML tag, as ``line: text``; docstrings aside. Any such literal is HTML assembled in
    Python, by an f-string, a concatenation or a join, which the templates now own."""
    tree = ast.parse(source)
    skip = docstrings(tree)
    return [
        f"{node.lineno}: {node.value[:60]!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skip
        and TAG.search(node.value)
    ]


def test_the_guard_finds_html_built_in_python() -> None:
    assert html_in_code('row = f"<td>{name}</td>"')
    assert html_in_code('row = "<tr>" + cells + "</tr>"')
    assert html_in_code("row = '<td class=\"num\">' + value")
    assert not html_in_code('def f():\n    """Escapes ``<script>``."""\n    return a < b')


@pytest.mark.parametrize("module", REPORT_MODULES, ids=lambda path: path.name)
def test_no_report_module_assembles_html(module: Path) -> None:
    found = html_in_code(module.read_text(encoding="utf-8"))
    assert not found, f"{module.name} builds HTML in Python, not in a template: {found}"


def make_report(batch_dir: Path) -> str:
    err, out = io.StringIO(), io.StringIO()
    assert handle(lambda: report_main(batch_dir, out=out, err=err), err) == 0, err.getvalue()
    return (batch_dir / "report.html").read_text(encoding="utf-8")


def test_names_once_escaped_by_hand_are_escaped_by_the_templates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The batch id (page title, header, footer) and a failure's reason and category in the
    # folded section's failure list went through ``html.escape`` by hand before.
    monkeypatch.setattr(fold, "MAX_GRID_CELLS", 1)
    batch_dir = write_summary_dir(
        tmp_path / HOSTILE,
        [
            Job(case="c1", model="m1", status="passed", run_dir="m1/c1-a1", attempts=1),
            Job(case="c2", model="m1", status="failed", failure_category=HOSTILE,
                reason=f"wrong: {HOSTILE}", run_dir="m1/c2-a1", attempts=1),
        ],
    )  # fmt: skip
    text = make_report(batch_dir)
    page = Page(text)
    assert "<svg onload" not in text and HOSTILE not in text
    assert [attrs for _, attrs in page.tags if "onload" in attrs] == []
    assert page.all("h1") and HOSTILE in page.texts  # the header's title, as text
    assert f"{HOSTILE} — batch report" in page.texts  # <title>
    assert f"batch-ledger report of {HOSTILE}/batch-summary.json" in page.texts
    failures = [row for title, rows in page.tables if title.startswith("Case") for row in rows]
    assert [f"failed: {HOSTILE}", f"wrong: {HOSTILE}"] in [row.texts[2:4] for row in failures]


def test_help_and_plan_do_not_load_jinja2() -> None:
    check = (
        "import sys\n"
        "from batch.cli import main\n"
        "for args in (['--help'], ['plan', '--help']):\n"
        "    try:\n"
        "        main(args)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('jinja2' in sys.modules, 'batch.report.page' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", check], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "False False"
