"""A hostile batch dir: symlinks, FIFOs, devices and directories where the driver's files go.

Every command runs as a real subprocess under a timeout, so a regression that blocks in
``open()`` fails here instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers.fake_jobs import write_job_script
from helpers.paths import REPO_ROOT

ROOT = str(REPO_ROOT)
SECRET = "sk-live-between-0123456789"

JOB = """
    import json, os, sys

    result = os.path.join(os.environ["BATCH_RUN_DIR"], "result.json")
    case = sys.argv[1]
    if case == "fifo":
        os.mkfifo(result)
    elif case == "zero":
        os.symlink("/dev/zero", result)
    elif case == "huge":
        with open(result, "w") as handle:
            handle.write('{"outcome": "passed", "pad": "' + "x" * (2 << 20) + '"}')
    else:
        json.dump({"outcome": "passed"}, open(result, "w"))
"""

SWEEP = """\
name: hostile
cases: {cases}
models: [m]
command: [{python}, {script}, "{{case}}"]
summary_interval: 0s
"""


def batch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "batch.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": path},
        timeout=30,
    )


def make_sweep(tmp_path: Path, cases: list[str], extra: str = "") -> Path:
    script = write_job_script(tmp_path, JOB)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        SWEEP.format(
            cases=json.dumps(cases),
            python=json.dumps(sys.executable),
            script=json.dumps(str(script)),
        )
        + extra
    )
    return sweep


def first_run(tmp_path: Path) -> Path:
    sweep = make_sweep(tmp_path, ["ok"])
    done = batch(str(sweep), "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (batch_dir,) = (tmp_path / "runs").iterdir()
    return batch_dir


def outside_file(tmp_path: Path) -> Path:
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me\n")
    return victim


def test_a_symlinked_lock_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    batch_dir = first_run(tmp_path)
    victim = outside_file(tmp_path)
    (batch_dir / "batch-logs" / "driver.lock").symlink_to(victim)
    done = batch(str(tmp_path / "sweep.yaml"), "--no-progress", "--resume", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"error: cannot write {batch_dir}/batch-logs/driver.lock: is a symbolic link, "
        "not followed; nothing was started"
    ]
    assert victim.read_text() == "keep me\n"


def test_a_symlinked_event_log_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    batch_dir = first_run(tmp_path)
    victim = outside_file(tmp_path)
    events = batch_dir / "batch-logs" / "events.jsonl"
    events.unlink()
    events.symlink_to(victim)
    done = batch(str(tmp_path / "sweep.yaml"), "--no-progress", "--resume", cwd=tmp_path)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert f"cannot write {events}: is a symbolic link" in done.stderr
    assert victim.read_text() == "keep me\n"


def test_a_symlinked_logs_dir_is_refused(tmp_path: Path) -> None:
    batch_dir = first_run(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    (batch_dir / "batch-logs").rename(elsewhere)
    (batch_dir / "batch-logs").symlink_to(elsewhere)
    before = sorted(p.name for p in elsewhere.iterdir())
    done = batch(str(tmp_path / "sweep.yaml"), "--no-progress", "--resume", cwd=tmp_path)
    assert done.returncode == 1
    assert f"cannot write {batch_dir}/batch-logs: is a symbolic link" in done.stderr
    assert sorted(p.name for p in elsewhere.iterdir()) == before


def test_a_directory_as_event_log_or_snapshot_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    batch_dir = first_run(tmp_path)
    events = batch_dir / "batch-logs" / "events.jsonl"
    events.unlink()
    events.mkdir()
    done = batch(str(tmp_path / "sweep.yaml"), "--no-progress", "--resume", cwd=tmp_path)
    assert (done.returncode, done.stderr.strip().splitlines()) == (
        1,
        [f"error: cannot write {events}: is a directory, not a regular file; nothing was started"],
    )
    events.rmdir()
    snapshot = batch_dir / "sweep.yaml"
    snapshot.unlink()
    snapshot.mkdir()
    done = batch(str(tmp_path / "sweep.yaml"), "--no-progress", "--resume", cwd=tmp_path)
    assert (done.returncode, done.stderr.strip().splitlines()) == (
        1,
        [
            f"error: cannot write {snapshot}: is a directory, not a regular file; "
            "nothing was started"
        ],
    )


def test_a_fifo_index_hangs_no_command(tmp_path: Path) -> None:
    batch_dir = first_run(tmp_path)
    index = batch_dir / ".ledger-index"
    index.unlink(missing_ok=True)
    os.mkfifo(index)
    sweep = str(tmp_path / "sweep.yaml")
    assert batch("status", str(batch_dir), cwd=tmp_path).returncode == 0
    assert batch("plan", sweep, "--resume", cwd=tmp_path).returncode == 0
    done = batch(sweep, "--no-progress", "--resume", cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_a_fifo_summary_is_reported_unreadable_by_status(tmp_path: Path) -> None:
    batch_dir = first_run(tmp_path)
    summary = batch_dir / "batch-summary.json"
    summary.unlink()
    os.mkfifo(summary)
    done = batch("status", str(batch_dir), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"unreadable batch-summary.json: {summary}: is a FIFO, not a regular file" in done.stdout


def test_a_jobs_hostile_result_is_that_jobs_error(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path, ["fifo", "zero", "huge", "ok"])
    done = batch(str(sweep), "--no-progress", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    (batch_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((batch_dir / "batch-summary.json").read_text())
    assert {row["case"]: row["status"] for row in summary["jobs"]} == {
        "fifo": "error",
        "zero": "error",
        "huge": "error",
        "ok": "passed",
    }
    reasons = {
        json.loads(meta.read_text())["test_case"]: json.loads(meta.read_text())["result"]
        for meta in batch_dir.glob("*/*/run-meta.json")
    }
    text = json.dumps(reasons)
    assert "is a FIFO, not a regular file" in text
    assert "is a symbolic link, not followed" in text
    assert "larger than 1,048,576 bytes, not read" in text


def test_a_reset_that_prints_its_env_leaves_no_secret_in_the_log(tmp_path: Path) -> None:
    printenv = json.dumps([sys.executable, "-c", "import os; print(dict(os.environ))"])
    sweep = make_sweep(
        tmp_path,
        ["ok"],
        "order: model-major\n"
        f"env: {{OPENAI_API_KEY: {SECRET}}}\n"
        f"between_models: {{reset: {printenv}, settle: null}}\n",
    )
    done = batch(str(sweep), "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (batch_dir,) = (tmp_path / "runs").iterdir()
    log = (batch_dir / "batch-logs" / "between-models.log").read_text()
    assert "OPENAI_API_KEY" in log  # the reset did print its environment
    assert SECRET not in log
    assert "[REDACTED]" in log


def test_read_only_commands_refuse_a_fifo_summary_in_one_line_exit_2(tmp_path: Path) -> None:
    batch_dir = first_run(tmp_path)
    summary = batch_dir / "batch-summary.json"
    summary.unlink()
    os.mkfifo(summary)
    for command in ("stats", "report"):
        done = batch(command, str(batch_dir), cwd=tmp_path)
        assert (done.returncode, done.stderr.strip().splitlines()) == (
            2,
            [f"{summary}: is a FIFO, not a regular file"],
        ), command


def test_a_step_that_makes_the_log_a_fifo_fails_its_job_not_the_sweep(tmp_path: Path) -> None:
    fifo = json.dumps(
        [
            sys.executable,
            "-c",
            "import os; os.remove('{run_dir}/output.log'); os.mkfifo('{run_dir}/output.log')",
        ]
    )
    run = json.dumps([sys.executable, str(write_job_script(tmp_path, JOB)), "ok"])
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "name: steps\ncases: [c1, c2]\nmodels: [m]\nsummary_interval: 0s\nsteps:\n"
        f"  - {{name: sabotage, command: {fifo}}}\n"
        f"  - {{name: run, command: {run}}}\n"
    )
    done = batch(str(sweep), "--no-progress", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "starting no more jobs" not in done.stdout + done.stderr
    (batch_dir,) = (tmp_path / "runs").iterdir()
    records = [json.loads(p.read_text()) for p in batch_dir.glob("*/*/run-meta.json")]
    assert sorted(r["test_case"] for r in records) == ["c1", "c2"]
    for record in records:
        assert record["outcome"] == "error"
        assert record["steps"][1]["reason"] == (
            "cannot write output.log: is a FIFO, not a regular file"
        )


SWAPPER = """
    import os, sys, time
    batch_dir = os.path.dirname(os.path.dirname(os.environ["BATCH_RUN_DIR"]))
    logs = os.path.join(batch_dir, "batch-logs")
    if sys.argv[1] == "swap":
        os.rename(logs, logs + ".moved")
        os.symlink(sys.argv[2], logs)
    time.sleep(0.3)  # later jobs start while this one runs: pgids.json is rewritten
"""


def test_a_logs_dir_swapped_for_a_symlink_mid_run_gets_nothing_written_through_it(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    script = write_job_script(tmp_path, SWAPPER, name="swapper.py")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        json.dumps(
            {
                "name": "swap",
                "cases": [{"id": c, "params": {"how": c}} for c in ("swap", "c2", "c3", "c4")],
                "models": ["m1", "m2"],
                "order": "model-major",
                # The reset before m2 logs into between-models.log after the swap.
                "between_models": {
                    "reset": [sys.executable, "-c", "print('reset')"],
                    "settle": None,
                    "cooldown": 0,
                },
                "command": [sys.executable, str(script), "{params.how}", str(outside)],
                "max_concurrent": 2,
                "notify": [sys.executable, "-c", "print('heard')"],
            }
        )
    )
    done = batch(str(sweep), "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    # Nothing of the driver's (pgids.json, notify.log, between-models.log...) went outside.
    assert sorted(p.name for p in outside.iterdir()) == []
    (batch_dir,) = (tmp_path / "runs").iterdir()
    assert (batch_dir / "batch-logs").is_symlink()
    assert json.loads((batch_dir / "batch-summary.json").read_text())["state"] == "complete"
