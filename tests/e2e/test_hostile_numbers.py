"""Issue 40, item 8: numbers read back that Python cannot take as they come — a 401-digit
integer (``float()`` overflows), scores of ±1e300 (their squares and sums overflow), ``²``
and 5,000 digits in a view URL (``int()`` refuses) — through the real CLI and a real
``batch view`` on 127.0.0.1."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.fake_jobs import wait_until, write_job_script
from helpers.view_process import View, batch_env

HUGE = "9" * 401

JOB = """
    import json, os, sys, time

    if sys.argv[1] == "slow":
        time.sleep(60)
    result = os.path.join(os.environ["BATCH_RUN_DIR"], "result.json")
    json.dump({"outcome": "passed", "score": 1.0}, open(result, "w"))
"""


def batch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "batch.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=batch_env(),
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


def write_sweep(tmp_path: Path, cases: list[str]) -> Path:
    script = write_job_script(tmp_path, JOB)
    sweep = tmp_path / "sweep.yaml"
    command = [sys.executable, str(script), "{case}"]
    sweep.write_text(
        json.dumps({"name": "numbers", "cases": cases, "models": ["m"], "command": command})
    )
    return sweep


def finished_batch(tmp_path: Path, cases: list[str]) -> Path:
    done = batch(str(write_sweep(tmp_path, cases)), "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (batch_dir,) = (tmp_path / "runs").iterdir()
    return batch_dir


def set_in_row(batch_dir: Path, case: str, key: str, raw: str) -> None:
    """Set ``key`` of ``case``'s row to the raw JSON text ``raw`` (a number Python cannot
    take as it comes); the file stays JSON."""
    summary = batch_dir / "batch-summary.json"
    lines = summary.read_text().splitlines()
    (number,) = [n for n, line in enumerate(lines) if line.startswith(f'    {{"case":"{case}",')]
    lines[number] = re.sub(f'"{key}":[^,}}]+', f'"{key}":{raw}', lines[number])
    assert f'"{key}":{raw}' in lines[number]
    summary.write_text("\n".join(lines) + "\n")
    json.loads(summary.read_text())


@pytest.fixture
def views() -> Iterator[list[View]]:
    started: list[View] = []
    yield started
    for view in started:
        view.kill()


def cell_status(view: View, case: str) -> str | None:
    status, state = view.get("/api/state?batch=0")
    assert status == 200
    return next((c["status"] for c in state["grid"]["cells"] if c["case"] == case), None)


def test_a_401_digit_integer_in_a_summary_row_does_not_stop_the_view(
    tmp_path: Path, views: list[View]
) -> None:
    batch_dir = finished_batch(tmp_path, ["a", "b"])
    set_in_row(batch_dir, "a", "duration_seconds", HUGE)
    view = View(batch_dir, cwd=tmp_path)
    views.append(view)

    status, state = view.get("/api/state?batch=0")

    assert status == 200
    cells = {cell["case"]: cell for cell in state["grid"]["cells"]}
    assert cells["a"]["status"] == cells["b"]["status"] == "passed"
    assert view.stop() is not None


def test_a_401_digit_integer_in_an_appended_event_does_not_stop_live_updates(
    tmp_path: Path, views: list[View]
) -> None:
    batch_dir = finished_batch(tmp_path, ["a", "b"])
    view = View(batch_dir, cwd=tmp_path)
    views.append(view)
    assert cell_status(view, "b") == "passed"
    events = batch_dir / "batch-logs" / "events.jsonl"
    finish = '{"t": "2026-12-06T00:00:0%dZ", "event": "finish", "case": "%s", "model": "m", '
    with events.open("a") as log:
        log.write(finish % (1, "a") + f'"status": "failed", "duration_seconds": {HUGE}}}\n')
    time.sleep(1.5)  # the view's next look (every 0.5 s) reads it
    with events.open("a") as log:
        log.write(finish % (2, "b") + '"status": "failed", "duration_seconds": 1}\n')

    assert wait_until(lambda: cell_status(view, "b") == "failed", 15)
    assert cell_status(view, "a") == "failed"
    assert view.stop() is not None
    assert "Traceback" not in view.stderr()


def test_a_view_beside_its_driver_ends_when_the_driver_is_killed_after_a_huge_number(
    tmp_path: Path, views: list[View]
) -> None:
    # ``batch SWEEP --view`` starts ``batch view DIR --beside DRIVER_PID``, which ends once
    # that pid is gone; here a stand-in process is the driver, so that nothing else (the
    # driver's watchdog) ends the view for it.
    batch_dir = finished_batch(tmp_path, ["a"])
    driver = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        view = View(batch_dir, "--beside", str(driver.pid), cwd=tmp_path)
        views.append(view)
        with (batch_dir / "batch-logs" / "events.jsonl").open("a") as log:
            log.write(f'{{"event": "finish", "case": "a", "model": "m", "attempt": {HUGE}, ')
            log.write(f'"status": "failed", "duration_seconds": {HUGE}}}\n')
        assert wait_until(lambda: cell_status(view, "a") == "failed", 15)
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait(10)
    try:
        view.process.wait(15)
    except subprocess.TimeoutExpired:
        pytest.fail("the view outlived its SIGKILLed driver")


def test_scores_of_plus_and_minus_1e300_are_read_as_missing_by_stats_and_report(
    tmp_path: Path,
) -> None:
    batch_dir = finished_batch(tmp_path, ["a", "b", "c"])
    scores = {"a": "1e300", "b": "-1e300", "c": "0.25"}
    for case, score in scores.items():
        set_in_row(batch_dir, case, "score", score)
    in_range = [float(s) for s in scores.values() if abs(float(s)) <= 1e15]  # reference

    stats = batch("stats", str(batch_dir), "--format", "json", cwd=tmp_path)
    report = batch("report", str(batch_dir), cwd=tmp_path)

    assert stats.returncode == 0, stats.stderr
    (model,) = json.loads(stats.stdout)["models"]
    assert model["score"]["cases"] == len(in_range) == 1
    assert model["score"]["estimate"] == pytest.approx(sum(in_range) / len(in_range))
    assert report.returncode == 0, report.stderr
    assert (batch_dir / "report.html").is_file()
    table = batch("stats", str(batch_dir), cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert "e+300" not in table.stdout and "1000000000000000052504760255204420248" not in (
        table.stdout
    )


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("/api/state?batch=%C2%B2", "batch"),
        ("/api/state?batch=" + "5" * 5000, "batch"),
        ("/api/job?batch=0&case=a&model=m&repeat=" + "5" * 5000, "repeat"),
        ("/api/job?batch=0&case=a&model=m&repeat=%C2%B2", "repeat"),
    ],
)
def test_a_number_in_a_view_url_that_is_none_is_a_400_saying_so(
    tmp_path: Path, views: list[View], query: str, name: str
) -> None:
    batch_dir = finished_batch(tmp_path, ["a"])
    view = View(batch_dir, cwd=tmp_path)
    views.append(view)

    status, body = view.get(query)

    assert status == 400
    assert body["error"].startswith(f"{name}: ")
    assert body["error"].endswith("is not a whole number (at most 9 digits 0-9)")
    assert view.get("/api/state?batch=0")[0] == 200  # and it serves on
    assert view.stop() is not None
    assert "Traceback" not in view.stderr()
