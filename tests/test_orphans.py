"""No orphans: a dead driver's jobs stop, through its watchdog or, failing that, on --resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
from fake_jobs import is_gone, wait_until, write_job_script

KILL_GRACE = 0.3

# A job that registers its pid (and its grandchild's) under pids/, notes which earlier job
# processes were still running when it started, and, while the file "hang" exists, ignores
# SIGTERM and runs on for a minute as a runaway agent would.
JOB = """
    import json, os, signal, subprocess, sys, time

    root = sys.argv[1]
    pids = os.path.join(root, "pids")

    def running(pid):
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                return handle.read().rpartition(b")")[2].split()[0] not in (b"Z", b"X")
        except FileNotFoundError:
            return False

    alive = [int(name.split("-")[1]) for name in os.listdir(pids)]
    alive = [pid for pid in alive if running(pid)]
    with open(os.path.join(os.environ["BATCH_RUN_DIR"], "alive-at-start.json"), "w") as f:
        json.dump(alive, f)
    if os.path.exists(os.path.join(root, "hang")):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open(os.path.join(pids, f"gc-{child.pid}"), "w").close()
        open(os.path.join(pids, f"job-{os.getpid()}"), "w").close()
        time.sleep(60)
"""


def make_sweep(tmp_path: Path) -> Path:
    script = write_job_script(tmp_path, JOB)
    (tmp_path / "pids").mkdir()
    (tmp_path / "hang").touch()
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "cases: [c01, c02]\n"
        "models: [m/one]\n"
        f"command: [{json.dumps(sys.executable)}, {json.dumps(str(script))}, "
        f"{json.dumps(str(tmp_path))}]\n"
        f"kill_grace: {KILL_GRACE}\n"
    )
    return sweep


def batch(*args: str) -> list[str]:
    return [sys.executable, "-m", "batch.cli", *args, "--no-progress"]


def cli_env() -> dict[str, str]:
    """This tree first on the driver's path, wherever pytest was started from."""
    root = str(Path(__file__).resolve().parent.parent)
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }


def start_driver(sweep: Path) -> subprocess.Popen[bytes]:
    """A driver whose jobs (two, each with a grandchild) are all running."""
    driver = subprocess.Popen(batch(str(sweep)), stdout=subprocess.DEVNULL, env=cli_env())
    pids = sweep.parent / "pids"
    assert wait_until(lambda: len(list(pids.iterdir())) == 4, 10)
    return driver


def job_pids(sweep: Path) -> list[int]:
    return [int(path.name.split("-")[1]) for path in (sweep.parent / "pids").iterdir()]


def recorded_groups(tmp_path: Path) -> list[object]:
    """What the driver wrote to batch-logs/pgids.json for --resume to find."""
    for path in (tmp_path / "runs").glob("batch-*/batch-logs/pgids.json"):
        return json.loads(path.read_text())["groups"]
    return []


def watchdog_of(driver: subprocess.Popen[bytes]) -> psutil.Process:
    (watchdog,) = [
        child
        for child in psutil.Process(driver.pid).children()
        if "watchdog_main" in " ".join(child.cmdline())
    ]
    return watchdog


def test_jobs_and_their_children_stop_when_the_driver_is_sigkilled(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    driver = start_driver(sweep)
    pids = job_pids(sweep)
    assert not any(is_gone(pid) for pid in pids)

    driver.send_signal(signal.SIGKILL)
    driver.wait()
    killed_at = time.monotonic()

    # SIGTERM is ignored by these jobs, so they go at SIGKILL, one grace period later.
    assert wait_until(lambda: all(is_gone(pid) for pid in pids), KILL_GRACE + 5)
    assert time.monotonic() - killed_at < KILL_GRACE + 3


def test_resume_stops_what_a_dead_driver_and_watchdog_left_before_starting_jobs(
    tmp_path: Path,
) -> None:
    sweep = make_sweep(tmp_path)
    driver = start_driver(sweep)
    pids = job_pids(sweep)
    assert wait_until(lambda: len(recorded_groups(tmp_path)) == 2, 5)
    watchdog = watchdog_of(driver)
    watchdog.kill()
    assert wait_until(lambda: is_gone(watchdog.pid), 5)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    time.sleep(KILL_GRACE + 0.2)
    assert not any(is_gone(pid) for pid in pids), "nothing was left for --resume to stop"

    (tmp_path / "hang").unlink()
    resumed = subprocess.run(
        batch(str(sweep), "--resume"), capture_output=True, text=True, timeout=60, env=cli_env()
    )

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "stopped 2 leftover job process group(s) of a dead driver" in resumed.stdout
    assert all(is_gone(pid) for pid in pids)
    resumed_runs = [meta.parent for meta in (tmp_path / "runs").glob("batch-*/*/*/run-meta.json")]
    assert len(resumed_runs) == 2
    for run_dir in resumed_runs:
        # What the resumed job saw running when it started: none of the leftovers.
        assert json.loads((run_dir / "alive-at-start.json").read_text()) == []
    summary = json.loads(next((tmp_path / "runs").glob("batch-*/batch-summary.json")).read_text())
    assert [row["status"] for row in summary["jobs"]] == ["passed", "passed"]
