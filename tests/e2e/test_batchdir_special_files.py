"""Issue 40, items 5 to 7: the files of a batch dir swapped for symlinks, FIFOs, devices, a
gzip bomb and a sparse file of 4 GB, against every command that reads or writes them.

Each command runs as a real subprocess under a timeout: a regression that blocks in
``open()`` or reads without bound fails here instead of hanging the suite. What is asserted
is what a user sees: the command ends, says what it left alone, and touches nothing
outside the batch dir.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.bombs import gzip_of_zeros
from helpers.fake_jobs import write_job_script
from helpers.view_process import View, batch_env

JOB = """
    import json, os, sys, time

    if sys.argv[1] == "slow":
        # 3 s, or while the test holds its gate ("hold" beside this script; 60 s at most).
        hold = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hold")
        if os.path.exists(hold):
            end = time.time() + 60
            while os.path.exists(hold) and time.time() < end:
                time.sleep(0.05)
        else:
            time.sleep(3)
    result = os.path.join(os.environ["BATCH_RUN_DIR"], "result.json")
    json.dump({"outcome": "passed", "score": 1.0}, open(result, "w"))
"""

SWEEP = """\
name: special
cases: {cases}
models: [m]
command: [{python}, {script}, "{{case}}"]
summary_interval: 0s
"""


def _env() -> dict[str, str]:
    return batch_env()


def batch(*args: str, cwd: Path, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "batch.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_env(),
        stdin=subprocess.DEVNULL,
        timeout=timeout,
    )


def write_sweep(tmp_path: Path, cases: list[str]) -> Path:
    script = write_job_script(tmp_path, JOB)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        SWEEP.format(
            cases=json.dumps(cases),
            python=json.dumps(sys.executable),
            script=json.dumps(str(script)),
        )
    )
    return sweep


def first_run(tmp_path: Path) -> Path:
    sweep = write_sweep(tmp_path, ["ok"])
    done = batch(str(sweep), "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (batch_dir,) = (tmp_path / "runs").iterdir()
    return batch_dir


def resume(tmp_path: Path, *cases: str) -> subprocess.CompletedProcess[str]:
    sweep = write_sweep(tmp_path, ["ok", *cases])
    return batch(str(sweep), "--no-progress", "--resume", cwd=tmp_path)


def no_driver_left(batch_dir: Path) -> bool:
    return not (batch_dir / "batch-logs" / "driver.lock").exists()


# --- item 5: symlinks that would take a write or a delete out of the batch dir -------------


def test_a_control_dir_symlinked_to_another_dir_has_nothing_deleted_there(
    tmp_path: Path,
) -> None:
    batch_dir = first_run(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for name in ("settings.json", "00000000000000000001-abcd.json"):
        (elsewhere / name).write_text('{"action": "stop"}')
    (batch_dir / "batch-logs" / "control").symlink_to(elsewhere)

    done = resume(tmp_path, "slow")

    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in elsewhere.iterdir()) == [
        "00000000000000000001-abcd.json",
        "settings.json",
    ]
    said = done.stdout + done.stderr
    warnings = [line for line in said.splitlines() if "controls not read" in line]
    # Said once, not at every look twice a second; the stop there was not obeyed.
    assert len(warnings) == 1, said
    assert f"{batch_dir}/batch-logs/control: is a symbolic link, not followed" in warnings[0]
    assert "slow" in {p.name.split("-")[0] for p in (batch_dir / "m").iterdir()}
    assert json.loads((batch_dir / "batch-summary.json").read_text())["totals"]["passed"] == 2


def test_a_control_request_is_not_written_through_a_symlinked_control_dir(
    tmp_path: Path,
) -> None:
    batch_dir = first_run(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (batch_dir / "batch-logs" / "control").symlink_to(elsewhere)
    sweep = write_sweep(tmp_path, ["ok", "slow"])
    hold = tmp_path / "hold"  # the slow job runs until the request has been tried
    hold.touch()
    driver = subprocess.Popen(
        [sys.executable, "-m", "batch.cli", str(sweep), "--no-progress", "--resume"],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        lock = batch_dir / "batch-logs" / "driver.lock"
        deadline = time.monotonic() + 20
        while not lock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        done = batch("control", str(batch_dir), "pause", cwd=tmp_path)
    finally:
        hold.unlink()
        assert driver.wait(30) == 0
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert f"{batch_dir}/batch-logs/control: is a symbolic link, not followed" in done.stderr
    assert list(elsewhere.iterdir()) == []


def test_a_symlinked_gz_partial_is_replaced_and_its_target_untouched(tmp_path: Path) -> None:
    batch_dir = first_run(tmp_path)
    logs = batch_dir / "batch-logs"
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me\n")
    # A driver killed while compressing leaves the plain segment; the next one compresses it.
    segment = logs / "events-000001.jsonl"
    segment.write_text('{"t": "2026-12-01T00:00:00Z", "event": "note"}\n')
    (logs / "events-000001.jsonl.gz.partial").symlink_to(victim)

    done = resume(tmp_path)

    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "keep me\n"
    assert not (logs / "events-000001.jsonl.gz.partial").exists()
    with gzip.open(logs / "events-000001.jsonl.gz", "rt") as compressed:
        assert compressed.read() == '{"t": "2026-12-01T00:00:00Z", "event": "note"}\n'
    assert not segment.exists()


# --- item 6: FIFOs and devices where a file of ours should be --------------------------------


def fifo(path: Path) -> None:
    if path.exists():
        path.unlink()
    os.mkfifo(path)


def zero(path: Path) -> None:
    if path.exists():
        path.unlink()
    path.symlink_to("/dev/zero")


@pytest.mark.parametrize("make", [fifo, zero], ids=["fifo", "dev-zero"])
def test_a_special_events_segment_lets_a_resume_end_and_free_the_lock(
    tmp_path: Path, make: object
) -> None:
    batch_dir = first_run(tmp_path)
    segment = batch_dir / "batch-logs" / "events-000001.jsonl"
    make(segment)  # type: ignore[operator]

    done = resume(tmp_path)

    assert done.returncode == 0, done.stderr
    said = [line for line in done.stdout.splitlines() if "warning: events:" in line]
    kind = "a FIFO" if make is fifo else "a symbolic link"
    assert len(said) == 1, done.stdout
    assert said[0].endswith(f"{segment}: is {kind}, not a regular file; left as it is")
    assert no_driver_left(batch_dir)
    again = resume(tmp_path)  # the lock is free: a second resume runs
    assert again.returncode == 0, again.stderr


@pytest.mark.parametrize(
    "name", ["batch-logs/events-000001.jsonl", "batch-logs/events.jsonl", "sweep.yaml"]
)
def test_batch_report_ends_past_a_fifo_segment_or_snapshot(tmp_path: Path, name: str) -> None:
    batch_dir = first_run(tmp_path)
    fifo(batch_dir / name)

    done = batch("report", str(batch_dir), cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{batch_dir}/report.html"
    if name.startswith("batch-logs/"):
        assert f"warning: {batch_dir / name}: is a FIFO, not a regular file; not read" in (
            done.stderr
        )


@pytest.mark.parametrize("make", [fifo, zero], ids=["fifo", "dev-zero"])
def test_a_special_summary_is_a_one_line_error_for_report_stats_and_status(
    tmp_path: Path, make: object
) -> None:
    batch_dir = first_run(tmp_path)
    make(batch_dir / "batch-summary.json")  # type: ignore[operator]
    kind = "a FIFO, not a regular file" if make is fifo else "a symbolic link, not followed"
    for command in ("report", "stats"):
        done = batch(command, str(batch_dir), cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip() == f"{batch_dir}/batch-summary.json: is {kind}"
    status = batch("status", str(batch_dir), cwd=tmp_path)
    assert "Traceback" not in status.stderr
    assert f"batch-summary.json: is {kind}" in status.stdout + status.stderr


def test_batch_control_ends_when_driver_lock_is_a_fifo(tmp_path: Path) -> None:
    batch_dir = first_run(tmp_path)
    fifo(batch_dir / "batch-logs" / "driver.lock")

    done = batch("control", str(batch_dir), "pause", cwd=tmp_path)

    assert done.returncode == 2
    assert "no driver is running this batch" in done.stderr


@pytest.fixture
def views() -> Iterator[list[View]]:
    started: list[View] = []
    yield started
    for view in started:
        view.kill()


@pytest.mark.parametrize(
    "name",
    [
        "batch-logs/events-000001.jsonl",
        "batch-logs/events.jsonl",
        "batch-summary.json",
        "sweep.yaml",
        "batch-logs/driver.lock",
    ],
)
def test_batch_view_serves_past_a_fifo_and_stops_on_sigterm(
    tmp_path: Path, name: str, views: list[View]
) -> None:
    batch_dir = first_run(tmp_path)
    fifo(batch_dir / name)
    view = View(batch_dir, cwd=tmp_path)
    views.append(view)

    status, state = view.get("/api/state?batch=0")
    assert status == 200 and state["overview"]["state"] == "complete"
    # A control asks whether a driver holds the lock: a FIFO there is no driver.
    status, said = view.post("/api/control?batch=0", b'{"action": "pause"}')
    assert said == {"outcome": "refused", "message": "no driver is running this batch"}
    assert view.get("/api/batches?x=1") == (200, {"batches": [batch_dir.name], "read_only": False})
    assert view.stop() is not None


# --- item 7: reads without bound ---------------------------------------------------------------


def test_a_gzip_bomb_segment_is_read_a_chunk_at_a_time(tmp_path: Path) -> None:
    batch_dir = first_run(tmp_path)
    logs = batch_dir / "batch-logs"
    events = (logs / "events.jsonl").read_bytes()
    bomb = gzip_of_zeros(1 << 30)  # ~1 MB holding 1 GiB of zeros
    (logs / "events-000001.jsonl.gz").write_bytes(bomb + gzip.compress(events))
    (logs / "events.jsonl").write_bytes(b"")

    done = batch("report", str(batch_dir), cwd=tmp_path, timeout=60)

    assert done.returncode == 0, done.stderr
    # The invocation after the bomb is still read: the report names its start.
    started = json.loads(events.splitlines()[0])["t"][:10]
    assert started in (batch_dir / "report.html").read_text()


def test_a_sparse_summary_of_4_gb_is_refused_unread(tmp_path: Path) -> None:
    batch_dir = first_run(tmp_path)
    summary = batch_dir / "batch-summary.json"
    with open(summary, "r+b") as handle:
        handle.truncate(4 << 30)  # sparse: 4 GB of zeros that take no disk

    status = batch("status", str(batch_dir), cwd=tmp_path)
    stats = batch("stats", str(batch_dir), cwd=tmp_path)

    assert "Traceback" not in status.stderr + stats.stderr
    message = f"{summary}: larger than 536,870,912 bytes, not read"
    assert message in status.stdout + status.stderr
    assert stats.returncode == 2
    assert stats.stderr.strip() == message
