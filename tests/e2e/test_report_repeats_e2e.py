"""``batch report`` of a batch with repeats, run by the real driver: what a reader sees in the
HTML equals a direct count of the summary's rows and ``batch stats --format json``'s figures.

The sweep's job passes by a rule on its case and repeat (``JOB``), so every count is known;
one sample ends in a non-model error, one model reports scores. The same sweep run with
``--repeats 1`` is the batch without repeats (scores only) and B of ``batch report A B``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from helpers.fake_jobs import write_job_script
from helpers.html_page import Page, Row
from helpers.paths import REPO_ROOT

CASES = [f"c{i}" for i in range(6)]
MODELS = ["steady", "flaky", "scored"]
#: steady passes the even cases every time; flaky and scored pass case i on the repeats up
#: to i % 4; flaky's third sample of c5 ends in a non-model error (exit 2); scored reports
#: repeat / 3 as its score.
JOB = """
import json, os, sys
case, model, repeat, run_dir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
i = int(case[1:])
if (case, model, repeat) == ("c5", "flaky", 3):
    sys.exit(2)
ok = i % 2 == 0 if model == "steady" else repeat <= i % 4
result = dict(outcome="passed" if ok else "failed")
if model == "scored":
    result["score"] = repeat / 3
with open(os.path.join(run_dir, "result.json"), "w") as out:
    json.dump(result, out)
"""


def batch(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "batch.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        # The session's own cache dir for the ledger's cache (conftest), not the home dir.
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(REPO_ROOT),
            "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"],
        },
        timeout=120,
    )
    assert result.returncode in (0, 1), result.stdout + result.stderr
    return result


#: Under ``pytest -n`` the module's tests share one worker: its module fixture runs the
#: sweeps once, not again on each worker that gets one of the tests.
pytestmark = pytest.mark.xdist_group("report-repeats-batches")


@pytest.fixture(scope="module")
def batches(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A: ``repeats: 3``; B: the same sweep with ``--repeats 1``."""
    root = tmp_path_factory.mktemp("repeats")
    job = write_job_script(root, JOB)
    sweep = {
        "name": "rep",
        "output": "runs",
        "cases": CASES,
        "models": MODELS,
        "command": [str(job), "{case}", "{model}", "{repeat}", "{run_dir}"],
        "repeats": 3,
        "retries": 0,
        "max_concurrent": 4,
    }
    (root / "sweep.yaml").write_text(json.dumps(sweep))
    (root / "once.yaml").write_text(json.dumps({**sweep, "name": "once"}))
    batch("sweep.yaml", "--no-progress", cwd=root)
    batch("once.yaml", "--no-progress", "--repeats", "1", cwd=root)
    (a,) = (root / "runs").glob("rep-*")
    (b,) = (root / "runs").glob("once-*")
    return a, b


def report(*batch_dirs: Path) -> tuple[Page, Path]:
    result = batch("report", *batch_dirs, cwd=batch_dirs[0].parent)
    written = Path(result.stdout.strip())
    return Page(written.read_text(encoding="utf-8")), written


def stats(*args: str | Path, cwd: Path) -> dict[str, Any]:
    return json.loads(batch("stats", *args, "--format", "json", cwd=cwd).stdout)


def rows_of(batch_dir: Path) -> list[dict[str, Any]]:
    return json.loads((batch_dir / "batch-summary.json").read_text())["jobs"]


def counted(rows: list[dict[str, Any]]) -> dict[tuple[str, str], Counter[str]]:
    """Each (case, model)'s statuses, counted directly."""
    counts: dict[tuple[str, str], Counter[str]] = {}
    for row in rows:
        counts.setdefault((row["case"], row["model"]), Counter())[row["status"]] += 1
    return counts


def numbers(text: str) -> list[float]:
    """The numbers a cell shows, in order: ``+33.3 pp (-1.0 to +67.7)`` -> [33.3, -1.0, 67.7]."""
    return [float(n) for n in re.findall(r"[-+]?\d+(?:\.\d+)?", text)]


def records(rows: list[Row]) -> list[dict[str, str]]:
    """A table's body rows, each cell under its column's header."""
    (head,) = [row.texts for row in rows if row.part == "thead"]
    return [dict(zip(head, row.texts, strict=True)) for row in rows if row.part == "tbody"]


#: The pair tables' columns. A column no pair has a value in may be left out (as ``batch
#: stats`` leaves it out): ``row.get(column, "—")``.
DIFF, MCNEMAR, SCORE = "B - A pass rate (95% CI)", "McNemar p (A only / B only)", "B - A score"


def test_the_flaky_table_is_the_direct_count_with_every_samples_log(
    batches: tuple[Path, Path],
) -> None:
    a, _ = batches
    page, written = report(a)
    flaky = {
        (case, model): f"{counts['passed']}/{counts['passed'] + counts['failed']}"
        for (case, model), counts in counted(rows_of(a)).items()
        if 0 < counts["passed"] < counts["passed"] + counts["failed"]
    }
    table = [row for row in page.table("Flaky cases") if row.part == "tbody"]
    assert {(r.texts[0], r.texts[1]): r.texts[2] for r in table} == flaky
    assert flaky[("c5", "flaky")] == "1/2"  # its error sample is left out
    assert ("c1", "steady") not in flaky  # steady is never flaky
    # Each row links to every sample's output.log, in repeat order, and the files are there.
    runs = {(r["case"], r["model"], r.get("repeat", 1)): r["run_dir"] for r in rows_of(a)}
    for row in table:
        case, model = row.texts[0], row.texts[1]
        expected = [f"{runs[(case, model, n)]}/output.log" for n in (1, 2, 3)]
        assert [unquote(href) for href in row.cells[3].hrefs] == expected
        assert all((written.parent / unquote(h)).is_file() for h in row.cells[3].hrefs)


def test_grid_cells_show_passes_out_of_finished_samples(batches: tuple[Path, Path]) -> None:
    a, _ = batches
    page, _ = report(a)
    grid = page.table("Case \u00d7 model")
    shown = {
        (row.texts[0], model): cell.text
        for row in grid
        if row.part == "tbody"
        for model, cell in zip(MODELS, row.cells[1:], strict=False)
    }
    expected = {}
    for (case, model), counts in counted(rows_of(a)).items():
        text = f"{counts['passed']}/{counts['passed'] + counts['failed']}"
        expected[(case, model)] = text + ("!" if counts["error"] else "")
    assert shown == expected
    assert shown[("c3", "flaky")] == "3/3" and shown[("c0", "flaky")] == "0/3"
    # Coloured by the share, in tenths: 1 of 3 passed is q3.
    cells = {
        (row.texts[0], model): cell.attrs["class"]
        for row in grid
        if row.part == "tbody"
        for model, cell in zip(MODELS, row.cells[1:], strict=False)
    }
    assert cells[("c1", "flaky")] == "q3 share" and cells[("c3", "flaky")] == "q10 share"


def test_the_pair_table_is_batch_stats_paired(batches: tuple[Path, Path]) -> None:
    a, _ = batches
    page, _ = report(a)
    paired = stats(a, cwd=a.parent)["paired"]
    table = records(page.table("Model against model"))
    assert [(row["A"], row["B"]) for row in table] == [(p["a"], p["b"]) for p in paired]
    assert len(table) == 3  # every pair of three models
    for row, pair in zip(table, paired, strict=True):
        diff = pair["pass_rate_diff"]
        assert int(row["Cases"]) == diff["cases"]
        want = [diff["estimate"] * 100, diff["low"] * 100, diff["high"] * 100]
        assert numbers(row[DIFF]) == pytest.approx(want, abs=0.05)
        assert row.get(MCNEMAR, "—") == "—"  # three samples a case: no McNemar
        # Only one model reports scores: no pair has a score difference.
        assert row.get(SCORE, "—") == "—" and "score_diff" not in pair


def test_mcnemar_and_scores_without_repeats(batches: tuple[Path, Path]) -> None:
    _, b = batches
    page, _ = report(b)
    paired = stats(b, cwd=b.parent)["paired"]
    table = records(page.table("Model against model"))
    assert len(table) == len(paired) == 3
    for row, pair in zip(table, paired, strict=True):
        mcnemar = pair["mcnemar"]
        assert numbers(row[MCNEMAR]) == pytest.approx(
            [mcnemar["p"], mcnemar["a_only"], mcnemar["b_only"]], rel=1e-3
        )
    # One sample a case: no curves, no flaky table, and the grid marks each job's status.
    assert "Flaky cases" not in page.texts
    assert not page.all("figure", "curve")
    assert not page.all("td", "share")
    assert len(page.all("td", "passed")) + len(page.all("td", "failed")) == 18


POINT = re.compile(r"pass([@^])(\d+) ([\d.]+)% \(([\d.]+)-([\d.]+)\), (\d+) cases")


def test_one_curve_per_model_with_batch_stats_figures(batches: tuple[Path, Path]) -> None:
    a, _ = batches
    page, _ = report(a)
    models = stats(a, cwd=a.parent)["models"]
    labels = [attrs.get("aria-label") or "" for attrs in page.all("svg")]
    assert [label for label in labels if label.startswith("pass@k")] == [
        f"pass@k and pass^k of {group['model']}" for group in models
    ]
    # Every point's tooltip, in order: per model pass@k then pass^k, k = 1 .. k_max.
    shown = [match.groups() for match in map(POINT.fullmatch, page.texts) if match]
    expected = [
        (sign, k, figure["estimate"] * 100, figure["low"] * 100, figure["high"] * 100)
        for group in models
        for key, sign in (("pass_at_k", "@"), ("pass_hat_k", "^"))
        for k, figure in group[key].items()
    ]
    assert [(s, k) for s, k, *_ in shown] == [(s, k) for s, k, *_ in expected]
    for point, figure in zip(shown, expected, strict=True):
        assert [float(n) for n in point[2:5]] == pytest.approx(figure[2:], abs=0.05)
        assert int(point[5]) == len(CASES)
    # flaky's c5 has two samples with a model outcome (the third ended in error): k <= 2.
    assert [group["k_max"] for group in models] == [3, 2, 3]
    # steady passes half its cases every time: pass@k and pass^k stay at 50%.
    steady = [float(g[2]) for g in shown[:6]]
    assert steady == [50.0] * 6
    assert len(page.all("polygon", "band")) == 2 * len(MODELS)


def test_the_comparison_report_shows_the_paired_difference_per_model(
    batches: tuple[Path, Path],
) -> None:
    a, b = batches
    page, _ = report(a, b)
    compared = {row["model"]: row["paired"] for row in stats(a, b, cwd=a.parent)["models"]}
    table = records(page.table("Paired difference by model"))
    assert [row["model"] for row in table] == MODELS
    for row in table:
        diff = compared[row["model"]]["pass_rate_diff"]
        assert int(row["cases"]) == diff["cases"] == len(CASES)
        want = [diff["estimate"] * 100, diff["low"] * 100, diff["high"] * 100]
        assert numbers(row["B - A pass rate (paired 95% CI)"]) == pytest.approx(want, abs=0.05)
        # A has three samples a case: no McNemar (it is for one sample a side).
        assert row[MCNEMAR] == "—" and "mcnemar" not in compared[row["model"]]
        score = compared[row["model"]].get("score_diff")
        if row["model"] != "scored":
            assert row[SCORE] == "—" and score is None
            continue
        want = [score["estimate"], score["low"], score["high"]]
        assert numbers(row[SCORE]) == pytest.approx(want, abs=0.0005)
