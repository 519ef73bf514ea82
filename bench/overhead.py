"""Driver overhead: ``batch`` against GNU parallel on jobs that do nothing.

    .venv/bin/python bench/overhead.py [--jobs 800] [--repeat 3] [--flat 2000 20000]
                                       [--baseline OTHER_SOURCE_TREE] [--no-pyc]

Both run N jobs of ``true`` four at a time and keep a record of each: ``batch`` a run dir
with ``output.log`` and an atomically written ``run-meta.json`` plus the summary;
GNU parallel (``apt-get install parallel``) ``--joblog`` and ``--results``. ``xargs -P4``,
which keeps nothing, is the floor (the cost of fork and exec alone); the *durable floor*
(``bench/durable_floor.py``: the run dirs, logs and fsynced records alone, in 100 lines of
asyncio) shows what keeping a record costs any Python driver on this machine. ``--baseline`` runs
``batch`` from another source tree too (``git worktree add /tmp/old main``), in every pair, so
a change is measured against what it replaces in the same run.

Method: repetitions alternate which of the two goes first (``batch`` then parallel, then
parallel then ``batch``...), and every run writes into a directory of its own that nothing
has used before: mass deletes slow later file creation on this disk, so everything is
deleted only after the last measurement. The figure is the median over the repetitions of
``batch``'s wall time divided by parallel's in the same pair (goal: at most 0.6), and of its
wall time over xargs' (goal: at most 3). Wall time is the whole command, Python start-up and
sweep loading included.

Then ``batch`` alone (and after it, at each size, the ``--baseline`` tree's) runs 2,000 and
20,000 jobs: the driver's time per job (the summary's ``elapsed_seconds`` over the job
count: start-up and sweep loading left out) must stay flat, which it cannot if anything
(the summary, the ledger) is rewritten in full per job (goal: the larger size's per-job
time at most 1.1 times the smaller's). Beside it, the CPU time per job of the driver and
its jobs (from ``wait4``; a one-job run's taken off as start-up): what the wall figure would
be without the other load of a shared machine, which a long run meets more of.

Python start-up is measured as an installed ``batch`` has it: each tree's modules are
compiled once beforehand (into a ``PYTHONPYCACHEPREFIX`` under the bench's temp dir, as
``pip install`` compiles them; one small sweep per tree fills it), where
``PYTHONDONTWRITEBYTECODE`` would otherwise make every run compile all of them again
(~0.15 s of CPU). ``--no-pyc`` measures it that way.

Every measurement is one line, the machine's load average first and last (the figures are
only comparable within one run); the last line is the figure::

    ratio: batch / GNU parallel = 0.55 (median of 3 pairs; goal <= 0.6, met); ...

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
GOAL_RATIO = 0.6
#: batch's wall time may be at most this many times xargs' (fork and exec alone).
GOAL_FLOOR = 3.0
#: Per-job time at the largest size may exceed the smallest's by this factor and be "flat".
FLAT_TOLERANCE = 1.1


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


#: Where the measured trees' bytecode is kept (``PYTHONPYCACHEPREFIX``); None: as the
#: environment says (with ``PYTHONDONTWRITEBYTECODE`` every run compiles every module).
PYCACHE: Path | None = None


def python_env(tree: Path) -> dict[str, str]:
    """The environment a ``batch`` from ``tree`` runs with."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))
    if PYCACHE is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


def compile_tree(root: Path, tree: Path) -> None:
    """Compile what a run of ``tree`` imports, once, as ``pip install`` does: with a cache
    prefix Python looks for every module's bytecode there, the standard library's too, so
    one small sweep fills it."""
    if PYCACHE is None:
        return
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(tree / "batch"), str(tree / "run_support")],
        env=python_env(tree),
        check=True,
        stdout=subprocess.DEVNULL,
    )
    run_batch(root / f"warm-up-{len(list(root.glob('warm-up-*')))}", 8, 4, tree)


def timed_cpu(
    argv: list[str], *, cwd: Path, stdin: Path | None = None, tree: Path = REPO
) -> tuple[float, float]:
    """Wall seconds of one command, and the CPU seconds (user and system) of it and of every
    process it waited for (its jobs); output discarded; raises when it fails."""
    env = python_env(tree)
    with open(stdin or os.devnull, "rb") as source, tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        process = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=source, stdout=subprocess.DEVNULL, stderr=errors
        )
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            errors.seek(0)
            said = errors.read().decode(errors="replace")[-500:]
            raise BenchError(f"{argv[0]} exited {process.returncode}: {said}")
    return seconds, usage.ru_utime + usage.ru_stime


def timed(argv: list[str], *, cwd: Path, stdin: Path | None = None, tree: Path = REPO) -> float:
    """Wall seconds of one command, output discarded; raises when it fails."""
    return timed_cpu(argv, cwd=cwd, stdin=stdin, tree=tree)[0]


def run_batch(
    directory: Path, jobs: int, concurrency: int, tree: Path = REPO
) -> tuple[float, float, float]:
    """(wall seconds, the driver's own elapsed seconds from the summary, CPU seconds of the
    driver and its jobs)."""
    sweep = write_sweep(directory, jobs, concurrency)
    argv = [sys.executable, "-m", "batch.cli", str(sweep), "--no-progress"]
    wall, cpu = timed_cpu(argv, cwd=directory, tree=tree)
    (batch_dir,) = (directory / "runs").iterdir()
    summary = json.loads((batch_dir / "batch-summary.json").read_text())
    if summary["totals"]["passed"] != jobs or summary["state"] != "complete":
        raise BenchError(f"batch: {summary['state']}, totals {summary['totals']}")
    return wall, float(summary["elapsed_seconds"]), cpu


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


def run_floor(directory: Path, jobs: int, concurrency: int) -> float:
    """The durable floor (bench/durable_floor.py): the record-keeping alone, in Python."""
    floor = Path(__file__).resolve().parent / "durable_floor.py"
    directory.mkdir(parents=True)
    argv = [sys.executable, str(floor), str(directory / "runs"), str(jobs), str(concurrency)]
    return timed(argv, cwd=directory)


def run_xargs(directory: Path, jobs: int, concurrency: int) -> float:
    args = write_args(directory, jobs)
    return timed(["xargs", f"-P{concurrency}", "-n1", "true"], cwd=directory, stdin=args)


def per_job(seconds: float, jobs: int) -> str:
    return f"{seconds:.2f} s {seconds / jobs * 1000:.2f} ms/job"


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def compare(
    root: Path, jobs: int, repeat: int, concurrency: int, baseline: Path | None = None
) -> tuple[float, float, float | None, float]:
    """Alternating pairs; prints each run and returns the median ratios: batch / parallel,
    batch / xargs, the baseline tree's batch / parallel (None without one) and the durable
    floor's / xargs."""
    bytecode = "compiled every run" if PYCACHE is None else "bytecode compiled beforehand"
    print(
        f"overhead: {jobs} jobs of `true` at -j{concurrency}, {repeat} alternating pairs, "
        f"each run in a fresh directory, {bytecode}; {load()}",
        flush=True,
    )
    ratios, floors, before, durable = [], [], [], []
    for rep in range(1, repeat + 1):
        where = root / f"pair-{rep}"
        results: dict[str, float] = {}
        cpu: dict[str, float] = {}
        order = ["batch", "parallel"] if rep % 2 else ["parallel", "batch"]
        if baseline is not None:
            order.insert(1, "baseline")
        for name in order:
            if name == "batch":
                results[name], _, cpu[name] = run_batch(where / name, jobs, concurrency)
            elif name == "baseline":
                assert baseline is not None
                results[name], _, cpu[name] = run_batch(where / name, jobs, concurrency, baseline)
            else:
                results[name] = run_parallel(where / name, jobs, concurrency)
        results["xargs"] = run_xargs(where / "xargs", jobs, concurrency)
        results["floor"] = run_floor(where / "floor", jobs, concurrency)
        durable.append(results["floor"] / results["xargs"])
        ratios.append(results["batch"] / results["parallel"])
        floors.append(results["batch"] / results["xargs"])
        line = (
            f"pair {rep}: batch {per_job(results['batch'], jobs)} (cpu {cpu['batch']:.2f} s), "
            f"parallel {per_job(results['parallel'], jobs)}, "
            f"xargs {per_job(results['xargs'], jobs)}, "
            f"ratio {ratios[-1]:.2f}, x{floors[-1]:.2f} the floor; "
            f"durable floor {per_job(results['floor'], jobs)}, x{durable[-1]:.2f} xargs"
        )
        if baseline is not None:
            before.append(results["baseline"] / results["parallel"])
            line += (
                f"; baseline {per_job(results['baseline'], jobs)} (cpu {cpu['baseline']:.2f} s), "
                f"ratio {before[-1]:.2f}"
            )
        print(line, flush=True)
    return (
        statistics.median(ratios),
        statistics.median(floors),
        statistics.median(before) if before else None,
        statistics.median(durable),
    )


def flatness(
    root: Path, sizes: list[int], concurrency: int, baseline: Path | None = None
) -> dict[str, tuple[list[float], list[float]]]:
    """Per tree ("batch", and "baseline" with one): the driver's ms/job at each size, and
    the CPU ms/job of the driver with its jobs, start-up left out (a one-job run's CPU is
    taken off first). The trees run one after the other at each size, so both meet about
    the same load, and then the durable floor ("floor": its wall ms/job only); prints one
    line per run.

    The CPU figure is what the wall figure is when nothing else runs: on a shared machine
    the wall time of a 20,000-job run meets other load than a 2,000-job run does, its CPU
    time far less so."""
    trees = [("batch", REPO)] + ([("baseline", baseline)] if baseline is not None else [])
    figures: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name, _ in trees}
    start_up = {
        name: run_batch(root / f"flat-{name}-1", 1, concurrency, tree)[2] for name, tree in trees
    }
    for jobs in sizes:
        for name, tree in trees:
            wall, elapsed, cpu = run_batch(root / f"flat-{name}-{jobs}", jobs, concurrency, tree)
            cpu_per_job = (cpu - start_up[name]) / max(jobs - 1, 1) * 1000
            figures[name][0].append(elapsed / jobs * 1000)
            figures[name][1].append(cpu_per_job)
            print(
                f"flat: {name} {jobs} jobs, wall {wall:.2f} s, driver {per_job(elapsed, jobs)}, "
                f"cpu {cpu:.2f} s {cpu_per_job:.2f} ms/job past start-up "
                f"({start_up[name]:.2f} s); {load()}",
                flush=True,
            )
        # The durable floor at the same size, just after: whether the disk or the machine
        # slowed everything down, or batch alone grew.
        wall = run_floor(root / f"flat-floor-{jobs}", jobs, concurrency)
        figures.setdefault("floor", ([], []))[0].append(wall / jobs * 1000)
        print(f"flat: durable floor {jobs} jobs, wall {per_job(wall, jobs)}; {load()}", flush=True)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=800)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("-j", "--concurrency", type=int, default=4)
    parser.add_argument("--flat", type=int, nargs="*", default=[2000, 20000])
    parser.add_argument("--baseline", type=Path, help="another source tree to measure too")
    parser.add_argument(
        "--no-pyc",
        action="store_true",
        help="leave the bytecode to the environment (PYTHONDONTWRITEBYTECODE: compiled every run)",
    )
    options = parser.parse_args(argv)
    if shutil.which("parallel") is None:
        print("GNU parallel is not installed (apt-get install parallel)", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="bench-overhead-"))
    global PYCACHE
    PYCACHE = None if options.no_pyc else root / "pycache"
    try:
        for tree in [REPO] + ([options.baseline] if options.baseline else []):
            compile_tree(root, tree)
        ratio, floor, before, durable = compare(
            root, options.jobs, options.repeat, options.concurrency, options.baseline
        )
        figures = flatness(root, options.flat, options.concurrency, options.baseline)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(root, ignore_errors=True)
    met = "met" if ratio <= GOAL_RATIO else "NOT met"
    floor_met = "met" if floor <= GOAL_FLOOR else "NOT met"
    line = (
        f"ratio: batch / GNU parallel = {ratio:.2f} (median of {options.repeat} pairs; "
        f"goal <= {GOAL_RATIO}, {met}); batch / xargs = {floor:.2f} (goal <= {GOAL_FLOOR}, "
        f"{floor_met}); the durable floor / xargs = {durable:.2f}"
    )
    if before is not None:
        line += f"; baseline / GNU parallel = {before:.2f}"
    flat, cpu = figures["batch"]
    if len(flat) >= 2:
        growth = flat[-1] / flat[0]
        verdict = "flat" if growth <= FLAT_TOLERANCE else "NOT flat"
        line += (
            f"; driver {flat[0]:.2f} ms/job at {options.flat[0]} jobs, {flat[-1]:.2f} at "
            f"{options.flat[-1]} (x{growth:.2f}, {verdict}); CPU {cpu[0]:.2f} and "
            f"{cpu[-1]:.2f} ms/job (x{cpu[-1] / cpu[0]:.2f})"
        )
    floor_flat, _ = figures.get("floor", ([], []))
    if len(floor_flat) >= 2:
        line += (
            f"; durable floor {floor_flat[0]:.2f} and {floor_flat[-1]:.2f} ms/job "
            f"(x{floor_flat[-1] / floor_flat[0]:.2f})"
        )
    flat_before, cpu_before = figures.get("baseline", ([], []))
    if len(flat_before) >= 2:
        line += (
            f"; baseline {flat_before[0]:.2f} and {flat_before[-1]:.2f} ms/job "
            f"(x{flat_before[-1] / flat_before[0]:.2f}), CPU {cpu_before[0]:.2f} and "
            f"{cpu_before[-1]:.2f} (x{cpu_before[-1] / cpu_before[0]:.2f})"
        )
    print(f"{line}; {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
