"""A million jobs on one driver (issue 33, items 1 and 2): its memory, and the summary's cost.

    .venv/bin/python bench/million.py [--jobs 200000] [--plan-jobs 1000000] [-j 4]
                                      [--baseline-rev REV] [--no-baseline]
                                      [--parallel-jobs 20000] [--kill-jobs 200000]

Every figure is measured for this tree and, in the same run, for a baseline tree
(``git worktree add --detach`` of ``--baseline-rev`` under the bench's temp dir, removed at
the end), each in a fresh directory:

- **run**: ``batch SWEEP -j 4`` of ``--jobs`` jobs of ``true`` (20 models x N/20 cases): wall
  time, the driver's peak RSS (``wait4``, which covers the children it reaped too; its jobs
  are far smaller) and per job, its own ``VmHWM`` and its RSS at half the wall time
  (``/proc/PID/status``, read every second), and the summary rewrites' share of the
  driver's time (the time inside the driver's summary write, timed by a wrapper the bench
  puts around it, over the summary's ``elapsed_seconds``); then ``--resume`` of the
  complete batch twice (the first finds the rows the sweep's writes cached, the second finds the
  index current): wall time and peak RSS of each;
- **plan**: ``batch plan`` of ``--plan-jobs`` jobs (20 models x 10,000 cases x 5 repeats):
  wall time and peak RSS;
- **summary at that size**: the size of a summary of 100,000 and of ``--plan-jobs`` rows,
  one full write and one rewrite with 4 rows changed, in process; its share is what the
  throttle allows a rewrite of that cost (docs/summary.md: no sooner than 20 times its
  duration after the last, at least ``summary_interval`` = 2 s);
- **SIGKILL**: the driver of a ``--kill-jobs`` sweep killed at random moments while it runs;
  the summary left must parse every time;
- GNU parallel (``apt-get install parallel``) on ``--parallel-jobs`` jobs: its peak RSS.

Goals (issue 33): the run's driver at most 1 KB a job (250 MB at 200,000), ``plan`` of a
million under 5 s and 500 MB. Each line says the figure, the baseline's beside it, and the
machine's load average.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODELS = 20

#: Put around the driver's summary write, in the driver's own process: the seconds spent in
#: it so far, kept in a file (a finished run ends with os._exit, so no exit hook runs).
WRAPPER = """
import os, sys, time, runpy
import batch.execution.execute as ex
_total = [0.0, 0]
_orig = ex.Execution._write_summary
def _timed(self):
    began = time.perf_counter()
    try:
        _orig(self)
    finally:
        _total[0] += time.perf_counter() - began
        _total[1] += 1
        with open(os.environ["BENCH_SUMMARY_TIME"], "w") as out:
            out.write(f"{_total[0]} {_total[1]}")
ex.Execution._write_summary = _timed
sys.argv = ["batch", *sys.argv[1:]]
runpy.run_module("batch.cli", run_name="__main__")
"""

#: One summary of N rows written whole, then rewritten with 4 rows changed, in process;
#: prints "bytes full_seconds rewrite_seconds". Either tree's API.
SUMMARY_COST = """
import sys, time, tempfile
from pathlib import Path
from batch.plan.jobs import Job
from batch.summary import write as s
n = int(sys.argv[1])
def job(i):
    model = f"m{i // 10000 % 20:02d}"
    run_dir = f"{model}/c{i:07d}-20261130T031500123456Z-a1"
    return Job(f"c{i % 10000:05d}", model, {}, None, "passed", repeat=1 + i // 200000,
               duration_seconds=1.25, attempts=1, run_dir=run_dir)
jobs = [job(i) for i in range(n)]
head = dict(batch_id="b", state="running", started_at="x", finished_at=None, elapsed_seconds=1.0,
            max_concurrent=4)
directory = Path(tempfile.mkdtemp(prefix="bench-million-summary-", dir=sys.argv[2]))
if hasattr(s, "SummaryLines"):
    kept = s.SummaryLines(jobs)
    write = lambda: s.write_summary(directory, s.build_summary(jobs, with_rows=False, **head), kept)
    mark = kept.changed
else:
    rows, renderer = s.SummaryRows(jobs), s.SummaryRenderer(kept_rows=True)
    write = lambda: s.write_summary(directory, s.build_summary(jobs, rows=rows, **head), renderer)
    mark = rows.changed
began = time.perf_counter(); write(); full = time.perf_counter() - began
for job in jobs[:4]:
    job.status = "failed"; mark(job)
began = time.perf_counter(); write(); rewrite = time.perf_counter() - began
size = (directory / "batch-summary.json").stat().st_size
print(size, full, rewrite)
"""


class BenchError(Exception):
    pass


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def env_for(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    return env


def write_sweep(directory: Path, jobs: int, repeats: int = 1) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    cases = jobs // (MODELS * repeats)
    sweep = {
        "name": "million",
        "cases": [f"c{n:06d}" for n in range(cases)],
        "models": [f"m{n:02d}" for n in range(MODELS)],
        "repeats": repeats,
        "command": ["true"],
    }
    path = directory / "sweep.yaml"
    path.write_text(json.dumps(sweep), encoding="utf-8")  # JSON is YAML
    return path


def waited(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    ok: tuple[int, ...] = (0,),
    samples: list[tuple[float, int, int]] | None = None,
) -> tuple[float, float]:
    """Wall seconds and the peak RSS (MB) of the largest process it waited for (``wait4``:
    the process or any child it reaped). ``samples``: filled with (seconds, VmRSS MB, VmHWM
    MB) of the process alone, read from ``/proc`` every second while it runs."""
    with tempfile.TemporaryFile() as errors:
        began = time.perf_counter()
        process = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=errors,
        )  # fmt: skip
        while (
            samples is not None
            and os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
        ):
            sample = vm_sizes(process.pid)
            if sample is not None:
                samples.append((time.perf_counter() - began, *sample))
            time.sleep(1.0)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - began
        code = os.waitstatus_to_exitcode(status)
        if code not in ok:
            errors.seek(0)
            raise BenchError(f"{argv[:4]} exited {code}: {errors.read().decode()[-400:]}")
    return wall, usage.ru_maxrss / 1024


def vm_sizes(pid: int) -> tuple[int, int] | None:
    """The process's VmRSS and VmHWM (MB), or None once it has ended."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            fields = dict(line.split(":", 1) for line in status if line.startswith("Vm"))
        return int(fields["VmRSS"].split()[0]) // 1024, int(fields["VmHWM"].split()[0]) // 1024
    except (OSError, KeyError, ValueError):
        return None


def measure_run(tree: Path, directory: Path, jobs: int, concurrency: int) -> str:
    sweep = write_sweep(directory, jobs)
    timing = directory / "summary-time"
    env = dict(env_for(tree), BENCH_SUMMARY_TIME=str(timing))
    argv = [sys.executable, "-c", WRAPPER, str(sweep), "-j", str(concurrency), "--no-progress"]
    samples: list[tuple[float, int, int]] = []
    wall, rss = waited(argv, cwd=directory, env=env, samples=samples)
    # The driver alone: its own high-water mark, last read just before it exited, and its
    # RSS at the middle of the run (the wait4 figure also covers every child it reaped).
    own = samples[-1][2] if samples else float("nan")
    middle = next((rss for at, rss, _ in samples if at >= wall / 2), float("nan"))
    (batch_dir,) = (directory / "runs").iterdir()
    summary = json.loads((batch_dir / "batch-summary.json").read_text())
    if summary["totals"]["passed"] != jobs:
        raise BenchError(f"not every job passed: {summary['totals']}")
    spent, writes = timing.read_text().split()
    share = float(spent) / float(summary["elapsed_seconds"])
    size = (batch_dir / "batch-summary.json").stat().st_size
    # The complete batch resumed twice: the first folds the journal the sweep left (its
    # writers stop folding at 2 MiB of index), the second finds the index current.
    resumes = []
    for _ in range(2):
        argv = [sys.executable, "-m", "batch.cli", str(sweep), "--resume", "--no-progress"]
        took, peak = waited(argv, cwd=directory, env=env_for(tree))
        resumes.append(f"{took:.1f} s, {peak:.0f} MB ({peak * 1024 * 1024 / jobs:.0f} B a job)")
    return (
        f"run {jobs} jobs: wall {wall:.1f} s, driver peak RSS {rss:.0f} MB "
        f"({rss * 1024 * 1024 / jobs:.0f} B a job; its own VmHWM {own:.0f} MB, RSS at half "
        f"time {middle:.0f} MB), summary {size / 1e6:.1f} MB, "
        f"{writes} rewrites taking {float(spent):.2f} s = {share:.1%} of the driver's "
        f"{float(summary['elapsed_seconds']):.1f} s; resume of the complete batch: first "
        f"{resumes[0]}, second {resumes[1]}"
    )


def measure_plan(tree: Path, directory: Path, jobs: int) -> str:
    sweep = write_sweep(directory, jobs, repeats=5)
    argv = [sys.executable, "-m", "batch.cli", "plan", str(sweep)]
    wall, rss = waited(argv, cwd=directory, env=env_for(tree))
    return f"plan {jobs} jobs: {wall:.2f} s, peak RSS {rss:.0f} MB"


def measure_summary(tree: Path, directory: Path, jobs: int) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", SUMMARY_COST, str(jobs), str(directory)],
        env=env_for(tree), capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise BenchError(done.stderr[-400:])
    size, full, rewrite = map(float, done.stdout.split())
    # The throttle: the next rewrite no sooner than max(2 s, 20 x this one's duration).
    share = rewrite / (rewrite + max(2.0, 20 * rewrite))
    return (
        f"summary of {jobs} rows: {size / 1e6:.0f} MB, first write {full:.2f} s, a rewrite "
        f"with 4 rows changed {rewrite:.2f} s: at most {share:.1%} of the driver's time"
    )


def measure_kill(tree: Path, directory: Path, jobs: int, kills: int) -> str:
    """SIGKILL the driver ``kills`` times at random moments of a sweep (each resumed); the
    summary must parse after every one."""
    sweep = write_sweep(directory, jobs)
    argv = [sys.executable, "-m", "batch.cli", str(sweep), "-j", "4", "--no-progress"]
    parsed, rng = 0, random.Random(33)
    for n in range(kills):
        extra = ["--resume"] if n else []
        process = subprocess.Popen(
            argv + extra, cwd=directory, env=env_for(tree), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        time.sleep(rng.uniform(4.0, 12.0))
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        for summary in (directory / "runs").glob("*/batch-summary.json"):
            json.loads(summary.read_bytes())
            parsed += 1
    return f"SIGKILL of a {jobs}-job driver {kills} times: the summary parsed {parsed} times"


def measure_parallel(directory: Path, jobs: int) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    args = directory / "args.txt"
    args.write_text("".join(f"{n}\n" for n in range(jobs)))
    argv = ["parallel", "-j4", "--joblog", str(directory / "joblog"), "--results",
            str(directory / "results"), "-a", str(args), "true"]  # fmt: skip
    wall, rss = waited(argv, cwd=directory, env=dict(os.environ))
    return f"GNU parallel, {jobs} jobs: wall {wall:.1f} s, peak RSS {rss:.0f} MB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--plan-jobs", type=int, default=1_000_000)
    parser.add_argument("-j", "--concurrency", type=int, default=4)
    parser.add_argument("--baseline-rev", default=None, help="default: merge-base with main")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--parallel-jobs", type=int, default=20_000)
    parser.add_argument("--kill-jobs", type=int, default=200_000)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--only", choices=["run", "plan", "summary", "kill", "parallel"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-million-") as tmp:
        root = Path(tmp)
        trees = {"this tree": REPO}
        if not args.no_baseline:
            baseline = root / "baseline"
            if args.baseline_rev is None:
                args.baseline_rev = subprocess.run(
                    ["git", "-C", str(REPO), "merge-base", "HEAD", "main"],
                    check=True, capture_output=True, text=True,
                ).stdout.strip()[:10]  # fmt: skip
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(baseline),
                 args.baseline_rev], check=True,
            )  # fmt: skip
            trees[f"baseline {args.baseline_rev}"] = baseline
        try:
            steps = {
                "plan": lambda tree, d: measure_plan(tree, d, args.plan_jobs),
                # At 100,000 rows as well: the issue asks for the rewrites' share at both.
                "summary": lambda tree, d: "; ".join(
                    measure_summary(tree, d / str(n), n) for n in sorted({100_000, args.plan_jobs})
                ),
                "run": lambda tree, d: measure_run(tree, d, args.jobs, args.concurrency),
                "kill": lambda tree, d: measure_kill(tree, d, args.kill_jobs, args.kills),
            }
            for name, step in steps.items():
                if args.only not in (None, name):
                    continue
                for label, tree in trees.items():
                    if name == "kill" and tree is not REPO:
                        continue
                    line = step(tree, root / f"{name}-{len(list(root.iterdir()))}")
                    print(f"{label}: {line} [{load()}]", flush=True)
            if args.only in (None, "parallel"):
                print(f"{measure_parallel(root / 'parallel', args.parallel_jobs)} [{load()}]")
        finally:
            if not args.no_baseline:
                subprocess.run(
                    ["git", "-C", str(REPO), "worktree", "remove", "--force", str(baseline)],
                    check=False,
                )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"million: {exc}", file=sys.stderr)
        sys.exit(1)
