"""Driver overhead: ``batch`` against GNU parallel on jobs that do nothing.

    .venv/bin/python bench/overhead.py [--jobs 800] [--repeat 3] [--flat 2000 20000]

Both run N jobs of ``true`` four at a time and keep a record of each: ``batch`` a run dir
with ``output.log`` and an atomically written ``run-meta.json`` plus the summary;
GNU parallel (``apt-get install parallel``) ``--joblog`` and ``--results``. ``xargs -P4``,
which keeps nothing, is printed as the floor (the cost of fork and exec alone).

Method: repetitions alternate which of the two goes first (``batch`` then parallel, then
parallel then ``batch``...), and every run writes into a directory of its own that nothing
has used before: mass deletes slow later file creation on this disk, so everything is
deleted only after the last measurement. The figure is the median over the repetitions of
``batch``'s wall time divided by parallel's in the same pair (goal: at most 1.0). Wall time
is the whole command, Python start-up and sweep loading included.

Then ``batch`` alone runs 2,000 and 20,000 jobs: the driver's time per job (the summary's
``elapsed_seconds`` over the job count: start-up and sweep loading left out) must stay flat,
which it cannot if anything (the summary, the ledger) is rewritten in full per job.

Every measurement is one line; the last line is the figure::

    ratio: batch / GNU parallel = 0.79 (median of 3 pairs; goal <= 1.0, met); ...

Exits 1 if a run did not finish every job, 2 if GNU parallel is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOAL_RATIO = 1.0
#: Per-job time at the largest size may exceed the smallest's by this factor and be "flat".
FLAT_TOLERANCE = 1.25


class BenchError(Exception):
    """A run did not do what it was asked to; its figures mean nothing."""


def write_sweep(directory: Path, jobs: int, concurrency: int) -> Path:
    """A sweep of ``jobs`` cases of ``true`` against one model."""
    directory.mkdir(parents=True)
    sweep = {
        "cases": [f"c{n:05d}" for n in range(jobs)],
        "models": ["m"],
        "command": ["true"],
        "max_concurrent": concurrency,
        "output": "runs",
    }
    path = directory / "sweep.yaml"
    path.write_text(json.dumps(sweep))  # JSON is YAML, and far quicker to load
    return path


def write_args(directory: Path, jobs: int) -> Path:
    directory.mkdir(parents=True)
    path = directory / "args.txt"
    path.write_text("".join(f"{n}\n" for n in range(jobs)))
    return path


def timed(argv: list[str], *, cwd: Path, stdin: Path | None = None) -> float:
    """Wall seconds of one command, output discarded; raises when it fails."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    with open(stdin or os.devnull, "rb") as source:
        start = time.perf_counter()
        done = subprocess.run(
            argv, cwd=cwd, env=env, stdin=source, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise BenchError(f"{argv[0]} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return seconds


def run_batch(directory: Path, jobs: int, concurrency: int) -> tuple[float, float]:
    """(wall seconds, the driver's own elapsed seconds from the summary)."""
    sweep = write_sweep(directory, jobs, concurrency)
    wall = timed([sys.executable, "-m", "batch.cli", str(sweep), "--no-progress"], cwd=directory)
    (batch_dir,) = (directory / "runs").iterdir()
    summary = json.loads((batch_dir / "batch-summary.json").read_text())
    if summary["totals"]["passed"] != jobs or summary["state"] != "complete":
        raise BenchError(f"batch: {summary['state']}, totals {summary['totals']}")
    return wall, float(summary["elapsed_seconds"])


def run_parallel(directory: Path, jobs: int, concurrency: int) -> float:
    args = write_args(directory, jobs)
    joblog = directory / "joblog.txt"
    wall = timed(
        [
            "parallel",
            f"-j{concurrency}",
            "--joblog",
            str(joblog),
            "--results",
            str(directory / "results"),
            "true",
        ],
        cwd=directory,
        stdin=args,
    )
    rows = joblog.read_text().splitlines()[1:]
    if len(rows) != jobs or any(row.split("\t")[6] != "0" for row in rows):
        raise BenchError(f"parallel: {len(rows)} of {jobs} jobs logged, or one failed")
    return wall


def run_xargs(directory: Path, jobs: int, concurrency: int) -> float:
    args = write_args(directory, jobs)
    return timed(["xargs", f"-P{concurrency}", "-n1", "true"], cwd=directory, stdin=args)


def per_job(seconds: float, jobs: int) -> str:
    return f"{seconds:.2f} s {seconds / jobs * 1000:.2f} ms/job"


def compare(root: Path, jobs: int, repeat: int, concurrency: int) -> float:
    """Alternating pairs; prints each run and returns the median ratio."""
    print(
        f"overhead: {jobs} jobs of `true` at -j{concurrency}, {repeat} alternating pairs, "
        "each run in a fresh directory",
        flush=True,
    )
    ratios, floors = [], []
    for rep in range(1, repeat + 1):
        where = root / f"pair-{rep}"
        results: dict[str, float] = {}
        order = ("batch", "parallel") if rep % 2 else ("parallel", "batch")
        for name in order:
            if name == "batch":
                results[name], _ = run_batch(where / name, jobs, concurrency)
            else:
                results[name] = run_parallel(where / name, jobs, concurrency)
        floors.append(run_xargs(where / "xargs", jobs, concurrency))
        ratios.append(results["batch"] / results["parallel"])
        print(
            f"pair {rep}: batch {per_job(results['batch'], jobs)}, "
            f"parallel {per_job(results['parallel'], jobs)}, "
            f"xargs {per_job(floors[-1], jobs)}, ratio {ratios[-1]:.2f}",
            flush=True,
        )
    return statistics.median(ratios), statistics.median(floors)


def flatness(root: Path, sizes: list[int], concurrency: int) -> list[float]:
    """The driver's ms/job at each size; prints one line per size."""
    figures = []
    for jobs in sizes:
        wall, elapsed = run_batch(root / f"flat-{jobs}", jobs, concurrency)
        figures.append(elapsed / jobs * 1000)
        print(
            f"flat: batch {jobs} jobs, wall {wall:.2f} s, driver {per_job(elapsed, jobs)}",
            flush=True,
        )
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=800)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("-j", "--concurrency", type=int, default=4)
    parser.add_argument("--flat", type=int, nargs="*", default=[2000, 20000])
    options = parser.parse_args(argv)
    if shutil.which("parallel") is None:
        print("GNU parallel is not installed (apt-get install parallel)", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="bench-overhead-"))
    try:
        ratio, floor = compare(root, options.jobs, options.repeat, options.concurrency)
        flat = flatness(root, options.flat, options.concurrency) if options.flat else []
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(root, ignore_errors=True)
    met = "met" if ratio <= GOAL_RATIO else "NOT met"
    line = (
        f"ratio: batch / GNU parallel = {ratio:.2f} (median of {options.repeat} pairs; "
        f"goal <= {GOAL_RATIO}, {met}); xargs floor {floor / options.jobs * 1000:.2f} ms/job"
    )
    if len(flat) >= 2:
        growth = flat[-1] / flat[0]
        verdict = "flat" if growth <= FLAT_TOLERANCE else "NOT flat"
        line += (
            f"; driver {flat[0]:.2f} ms/job at {options.flat[0]} jobs, {flat[-1]:.2f} at "
            f"{options.flat[-1]} (x{growth:.2f}, {verdict})"
        )
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
