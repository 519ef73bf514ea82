"""Warm workers against one process per job (issue 32, docs/worker.md), side by side.

    .venv/bin/python bench/workers.py [--samples 200] [--start-cpu 1.0] [--trivial 2000]
                                      [--concurrency 2] [--repeat 1]

1. **A harness whose start costs ``--start-cpu`` seconds of CPU** (a busy loop standing for
   its imports; inspect_ai's cost 1.3-1.8 s here), ``--samples`` samples two at a time: as
   a worker (``worker:``; the start paid once per slot) and as one process per job
   (``command:``; paid by every sample). The figure is the wall time of the second over
   the first (goal: at least 3).
2. **A trivial worker's cost per request**: ``--trivial`` jobs answered at once by a worker,
   against as many jobs of ``true``, one process each. The driver's time per job is the
   summary's ``elapsed_seconds`` over the job count (start-up and sweep loading left out),
   and beside it the CPU per job of the driver with its jobs (``wait4``). The per-request
   overhead is the worker run's time per job; the goal is at most 0.5 ms, against 1.2 ms for
   one process per job (issue 32).

Every run writes into a new directory under one temp dir; the pairs alternate which goes
first. Each line gives the load average first, as the figures are comparable only within
one run. Exits 1 if a run did not pass every job.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOAL_SPEEDUP = 3.0
GOAL_REQUEST_MS = 0.5

#: The harness: burns its start-up CPU, then serves (``--worker``) or runs one sample.
HARNESS = """\
import os, sys, time
sys.path.insert(0, {repo!r})
end = time.process_time() + {start_cpu!r}
while time.process_time() < end:  # stands for a harness's imports
    pass
if sys.argv[1:] == ["--worker"]:
    from run_support.worker import answer, requests
    for request in requests():
        answer(request, "passed")
"""

TRIVIAL_WORKER = """\
import sys
sys.path.insert(0, {repo!r})
from run_support.worker import answer, requests
for request in requests():
    answer(request, "passed")
"""


class BenchError(Exception):
    """A run did not pass every job: its figures mean nothing."""


def write_sweep(directory: Path, jobs: int, concurrency: int, **how: object) -> Path:
    directory.mkdir(parents=True)
    sweep = {
        "cases": [f"c{n:05d}" for n in range(jobs)],
        "models": ["m"],
        "max_concurrent": concurrency,
        "output": "runs",
        **how,
    }
    path = directory / "sweep.yaml"
    path.write_text(json.dumps(sweep))  # JSON is YAML, and quicker to load
    return path


def run_batch(sweep: Path, jobs: int) -> tuple[float, float, float]:
    """(wall seconds, the driver's elapsed seconds from the summary, CPU seconds of the
    driver and every process it waited for)."""
    argv = [sys.executable, "-m", "batch.cli", str(sweep), "--no-progress"]
    began = time.perf_counter()
    process = subprocess.Popen(
        argv, cwd=sweep.parent, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - began
    (batch_dir,) = (sweep.parent / "runs").iterdir()
    summary = json.loads((batch_dir / "batch-summary.json").read_text())
    if os.waitstatus_to_exitcode(status) != 0 or summary["totals"]["passed"] != jobs:
        raise BenchError(f"{sweep}: {summary['state']}, totals {summary['totals']}")
    return wall, float(summary["elapsed_seconds"]), usage.ru_utime + usage.ru_stime


def load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def slow_start(root: Path, args: argparse.Namespace) -> float:
    """Part 1: the ratio of one process per job's wall time to the worker's (median)."""
    harness = root / "harness.py"
    harness.write_text(HARNESS.format(repo=str(REPO), start_cpu=args.start_cpu))
    ratios = []
    for rep in range(args.repeat):
        kinds = ["worker", "process"] if rep % 2 == 0 else ["process", "worker"]
        walls = {}
        for kind in kinds:
            how: dict[str, object] = (
                {"worker": [sys.executable, str(harness), "--worker"]}
                if kind == "worker"
                else {"command": [sys.executable, str(harness)]}
            )
            sweep = write_sweep(root / f"slow-{kind}-{rep}", args.samples, args.concurrency, **how)
            walls[kind] = run_batch(sweep, args.samples)[0]
            print(f"  {load()}: {args.samples} samples, {kind}: {walls[kind]:.2f} s", flush=True)
        ratios.append(walls["process"] / walls["worker"])
    return statistics.median(ratios)


def trivial(root: Path, args: argparse.Namespace) -> tuple[float, float, float, float]:
    """Part 2: (ms per job with a trivial worker, with ``true``; CPU ms per job of each)."""
    worker = root / "trivial_worker.py"
    worker.write_text(TRIVIAL_WORKER.format(repo=str(REPO)))
    per_job: dict[str, list[float]] = {"worker": [], "process": []}
    cpu: dict[str, list[float]] = {"worker": [], "process": []}
    jobs = args.trivial
    for rep in range(args.repeat):
        kinds = ["worker", "process"] if rep % 2 == 0 else ["process", "worker"]
        for kind in kinds:
            how: dict[str, object] = (
                {"worker": [sys.executable, str(worker)]}
                if kind == "worker"
                else {"command": ["true"]}
            )
            sweep = write_sweep(root / f"trivial-{kind}-{rep}", jobs, args.concurrency, **how)
            _, elapsed, spent = run_batch(sweep, jobs)
            per_job[kind].append(elapsed / jobs * 1000)
            cpu[kind].append(spent / jobs * 1000)
            print(
                f"  {load()}: {jobs} trivial jobs, {kind}: {elapsed / jobs * 1000:.3f} ms a job, "
                f"CPU {spent / jobs * 1000:.3f} ms a job",
                flush=True,
            )
    med = statistics.median
    return (
        med(per_job["worker"]),
        med(per_job["process"]),
        med(cpu["worker"]),
        med(cpu["process"]),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--start-cpu", type=float, default=1.0)
    parser.add_argument("--trivial", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as tmp:
        root = Path(tmp)
        print(f"{load()}: start", flush=True)
        try:
            speedup = slow_start(root, args)
            worker_ms, process_ms, worker_cpu, process_cpu = trivial(root, args)
        except BenchError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"{load()}: end")
    met = "met" if speedup >= GOAL_SPEEDUP else "NOT met"
    print(
        f"ratio: one process per job / worker = {speedup:.1f} ({args.samples} samples, "
        f"{args.start_cpu:g} s CPU start; goal >= {GOAL_SPEEDUP:g}, {met})"
    )
    met = "met" if worker_ms <= GOAL_REQUEST_MS else "NOT met"
    print(
        f"per request: trivial worker {worker_ms:.3f} ms a job against {process_ms:.3f} ms "
        f"one process per job (CPU {worker_cpu:.3f} against {process_cpu:.3f} ms; "
        f"goal <= {GOAL_REQUEST_MS:g} ms, {met})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
