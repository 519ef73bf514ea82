"""Load: a 20,000-job sweep of trivial jobs, every record and summary row checked, peak RSS.

    .venv/bin/python bench/load.py [--cases 2000] [--models 10] [-j 4] [--keep DIR]

Writes a sweep of ``--cases`` x ``--models`` jobs whose command is ``true``, runs it with the
real ``batch`` command (plain output to a file, as under nohup), then runs ``--resume`` on
the finished batch dir (everything carried over). For each run it reports wall time and the
driver's peak RSS: ``ru_maxrss`` from ``wait4`` (exact), cross-checked by polling
``psutil`` every 20 ms. Then it checks, strictly:

- exactly one ``run-meta.json`` per (case, model), each complete JSON saying ``passed``,
  with its own run dir as ``run_dir``;
- ``batch-summary.json``: state ``complete``, one row per job in matrix order, each
  ``passed`` with the run dir of that job's record, totals adding up; after the resume every
  row ``resumed: true``.

Exits 1 if a check fails or the peak RSS reaches ``--rss-limit`` MB (150). The last line is
the figure (measured on the 2-core VM while other tests ran, see ``docs/reliability.md``)::

    load: 20000 jobs in 162.5 s (8.13 ms/job), driver peak RSS 80.3 MB; resume 2.0 s,
    79.7 MB; all checks passed
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import attrs
import psutil

ROOT = Path(__file__).resolve().parent.parent


@attrs.frozen
class RunFigures:
    seconds: float
    exit_status: int
    #: Peak RSS of the driver process, MB: from wait4 and from polling.
    peak_rss_mb: float
    polled_rss_mb: float
    #: CPU seconds of the driver and the processes it waited for (its jobs, the watchdog):
    #: unlike wall time, barely moved by other load on the machine.
    cpu_seconds: float


def write_sweep(directory: Path, *, cases: int, models: int, jobs_at_once: int) -> Path:
    true = shutil.which("true") or "/bin/true"
    path = directory / "sweep.yaml"
    case_ids = ", ".join(f"c{n:05d}" for n in range(cases))
    model_ids = ", ".join(f"provider/m{n:02d}" for n in range(models))
    path.write_text(
        f"name: load\noutput: runs\ncases: [{case_ids}]\nmodels: [{model_ids}]\n"
        f"command: [{json.dumps(true)}, '{{case}}']\nmax_concurrent: {jobs_at_once}\n",
        encoding="utf-8",
    )
    return path


def run_driver(argv: list[str], *, cwd: Path, log: Path) -> RunFigures:
    """Run the driver to its end; its wall time, exit status and peak RSS."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    polled = 0
    began = time.monotonic()
    with open(log, "wb") as out:
        driver = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    done = threading.Event()

    def poll() -> None:
        nonlocal polled
        process = psutil.Process(driver.pid)
        while not done.is_set():
            try:
                polled = max(polled, process.memory_info().rss)
            except psutil.Error:
                return
            time.sleep(0.02)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    # wait4, not Popen.wait: its rusage holds the driver's own peak RSS (KB on Linux).
    _, wait_status, usage = os.wait4(driver.pid, 0)
    seconds = time.monotonic() - began
    done.set()
    poller.join()
    driver.returncode = os.waitstatus_to_exitcode(wait_status)
    cpu = usage.ru_utime + usage.ru_stime
    return RunFigures(seconds, driver.returncode, usage.ru_maxrss / 1024, polled / 2**20, cpu)


def check_batch(batch_dir: Path, cases: int, models: int, *, resumed: bool) -> list[str]:
    """Every way the batch dir disagrees with a complete, all-passed sweep (empty: none)."""
    problems: list[str] = []
    expected = [(f"c{c:05d}", f"provider/m{m:02d}") for c in range(cases) for m in range(models)]
    records: dict[tuple[str, str], str] = {}
    for path in batch_dir.glob("*/*/run-meta.json"):
        try:
            record: dict[str, Any] = json.loads(path.read_bytes())
        except ValueError as exc:
            problems.append(f"{path}: not JSON ({exc})")
            continue
        key = (record.get("test_case"), record.get("model"))
        run_dir = f"{path.parent.parent.name}/{path.parent.name}"
        if key in records:
            problems.append(f"{key}: two records ({records[key]}, {run_dir})")
        outcome, recorded_dir = record.get("outcome"), record.get("run_dir")
        if outcome != "passed" or recorded_dir != run_dir:
            problems.append(f"{run_dir}: outcome {outcome!r}, run_dir {recorded_dir!r}")
        records[key] = run_dir  # type: ignore[index]
    if set(records) != set(expected):
        problems.append(f"{len(records)} records for {len(expected)} jobs")
    summary = json.loads((batch_dir / "batch-summary.json").read_bytes())
    rows = summary["jobs"]
    if summary["state"] != "complete":
        problems.append(f"summary state {summary['state']!r}")
    if [(row["case"], row["model"]) for row in rows] != expected:
        problems.append("summary rows are not the jobs in matrix order")
    totals = summary["totals"]
    if totals["passed"] != len(expected) or sum(totals.values()) != len(expected):
        problems.append(f"summary totals {totals}")
    for row in rows:
        key = (row["case"], row["model"])
        if (
            row["status"] != "passed"
            or row["resumed"] is not resumed
            or row["run_dir"] != records.get(key)
            or not isinstance(row["duration_seconds"], float | int)
        ):
            problems.append(f"summary row {row}")
            break
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("-j", "--max-concurrent", type=int, default=4)
    parser.add_argument("--rss-limit", type=float, default=150.0, help="MB")
    parser.add_argument("--keep", type=Path, default=None, help="run here and keep the files")
    args = parser.parse_args(argv)
    jobs = args.cases * args.models

    with tempfile.TemporaryDirectory(prefix="load-") as tmp:
        directory = args.keep or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        sweep = write_sweep(
            directory, cases=args.cases, models=args.models, jobs_at_once=args.max_concurrent
        )
        batch = [sys.executable, "-m", "batch.cli", str(sweep), "--no-progress"]
        print(f"load: running {jobs} jobs of `true`, {args.max_concurrent} at a time ...")
        first = run_driver(batch, cwd=directory, log=directory / "driver.log")
        (batch_dir,) = (directory / "runs").iterdir()
        problems = check_batch(batch_dir, args.cases, args.models, resumed=False)
        print(
            f"load: run    exit {first.exit_status}, {first.seconds:.1f} s "
            f"({first.seconds / jobs * 1000:.2f} ms/job), CPU {first.cpu_seconds:.1f} s, "
            f"peak RSS {first.peak_rss_mb:.1f} MB (polled {first.polled_rss_mb:.1f} MB)"
        )
        second = run_driver([*batch, "--resume"], cwd=directory, log=directory / "resume.log")
        problems += check_batch(batch_dir, args.cases, args.models, resumed=True)
        print(
            f"load: resume exit {second.exit_status}, {second.seconds:.1f} s, "
            f"CPU {second.cpu_seconds:.1f} s, peak RSS {second.peak_rss_mb:.1f} MB "
            f"(polled {second.polled_rss_mb:.1f} MB)"
        )
    problems += [f"exit status {run.exit_status}" for run in (first, second) if run.exit_status]
    peak = max(first.peak_rss_mb, second.peak_rss_mb)
    if peak >= args.rss_limit:
        problems.append(f"peak RSS {peak:.1f} MB reaches the {args.rss_limit:.0f} MB limit")
    for problem in problems[:20]:
        print(f"load: FAILED: {problem}")
    verdict = "all checks passed" if not problems else f"{len(problems)} problems"
    print(
        f"load: {jobs} jobs in {first.seconds:.1f} s ({first.seconds / jobs * 1000:.2f} ms/job), "
        f"driver peak RSS {first.peak_rss_mb:.1f} MB; resume {second.seconds:.1f} s, "
        f"{second.peak_rss_mb:.1f} MB; {verdict}"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
