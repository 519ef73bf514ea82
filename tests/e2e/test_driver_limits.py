"""The driver's own limits never become the jobs' failures (docs/reliability.md).

A real ``batch`` process under a low open-file limit (``ulimit -n``, set in the child with
``resource.setrlimit``, or lowered under the running driver with ``prlimit``): a job the
driver could not start never started — no record, no attempt of its budget — and the
driver runs fewer at once instead, saying so once. At the start it raises its soft limit
to the hard one and caps ``max_concurrent`` to what the limit leaves room for.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from helpers.paths import REPO_ROOT


def _env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def run_limited(directory: Path, soft: int, hard: int) -> subprocess.CompletedProcess[str]:
    """``batch sweep.yaml`` in a child whose open-file limit is ``soft``/``hard``."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return subprocess.run(
        [sys.executable, "-m", "batch.cli", "sweep.yaml", "--no-progress"],
        cwd=directory,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit,
    )


def write_sweep(directory: Path, jobs: int, command: list[str], **keys: Any) -> Path:
    sweep = {
        "name": "limits",
        "cases": [f"c{n:03d}" for n in range(jobs)],
        "models": ["m1"],
        "command": command,
        "retries": 0,
        **keys,
    }
    path = directory / "sweep.yaml"
    path.write_text(json.dumps(sweep))
    return path


def records(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in directory.glob("runs/*/*/*/run-meta.json")]


def batch_dir(directory: Path) -> Path:
    (found,) = (directory / "runs").iterdir()
    return found


def test_a_low_open_file_limit_caps_the_jobs_at_once_and_fails_none(tmp_path: Path) -> None:
    write_sweep(tmp_path, 150, ["sleep", "0.2"], max_concurrent=1000)

    done = run_limited(tmp_path, 128, 128)

    assert done.returncode == 0, done.stdout + done.stderr
    warnings = [line for line in done.stdout.splitlines() if "open-file limit" in line]
    assert len(warnings) == 1, done.stdout
    assert "max_concurrent 1000" in warnings[0] and "(128 files" in warnings[0]
    found = records(tmp_path)
    assert len(found) == 150
    assert {(r["outcome"], r["attempt"]) for r in found} == {("passed", 1)}


def test_the_soft_open_file_limit_is_raised_to_the_hard_one(tmp_path: Path) -> None:
    hard = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 4096)
    write_sweep(tmp_path, 1, ["sh", "-c", 'ulimit -n > "$BATCH_RUN_DIR/nofile"'])

    done = run_limited(tmp_path, 64, hard)

    assert done.returncode == 0, done.stdout + done.stderr
    (seen,) = tmp_path.glob("runs/*/m1/*/nofile")
    assert int(seen.read_text()) == hard  # the job inherits the driver's raised limit
    assert "open-file limit" not in done.stdout


def test_a_start_the_limit_refuses_mid_run_is_started_later_and_charged_nothing(
    tmp_path: Path,
) -> None:
    write_sweep(tmp_path, 40, ["sleep", "0.5"], max_concurrent=40, stagger="0.02s")
    with open(tmp_path / "out.txt", "w") as out:
        driver = subprocess.Popen(
            [sys.executable, "-m", "batch.cli", "sweep.yaml", "--no-progress"],
            cwd=tmp_path,
            env=_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        # Once the first job runs, leave the driver six descriptors more than it holds, and
        # three for the ledger cache's database, its WAL and its shared memory, which the
        # first record's write opens (run_support.ledger_cache).
        while not list(tmp_path.glob("runs/*/m1/*")):
            assert driver.poll() is None, (tmp_path / "out.txt").read_text()
            time.sleep(0.005)
        held = len(os.listdir(f"/proc/{driver.pid}/fd"))
        resource.prlimit(driver.pid, resource.RLIMIT_NOFILE, (held + 9, held + 9))
        status = driver.wait(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    output = (tmp_path / "out.txt").read_text()

    assert status == 0, output
    assert output.count("the driver cannot start more jobs at once") == 1, output
    assert "Too many open files); running at most" in output
    found = records(tmp_path)
    assert len(found) == 40
    assert {(r["outcome"], r["attempt"]) for r in found} == {("passed", 1)}
    events = (batch_dir(tmp_path) / "batch-logs" / "events.jsonl").read_text().splitlines()
    assert any(json.loads(line)["event"] == "start_refused" for line in events)
    # No run dir is left of a start that never was.
    assert len(list(batch_dir(tmp_path).glob("m1/*"))) == 40
