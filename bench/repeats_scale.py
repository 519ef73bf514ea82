"""Repeats at scale: ``batch plan`` of 10 models x 10,000 cases x 5 repeats, and ``batch stats``
of its 500,000-row summary, each beside a baseline timed in the same run.

    .venv/bin/python bench/repeats_scale.py [--models 10] [--cases 10000] [--repeats 5]
                                            [--repeat 3] [--dir DIR] [--no-pyc]

Each repetition works in a fresh directory (deleted only after the last one: mass deletes
slow the disk down) and times, each as a process of its own from start to exit, its peak
RSS and CPU time from ``wait4`` in the small launcher of ``resume_scale.py`` (``_MEASURED``):

- **plan**: ``batch plan SWEEP`` (its table, to a file) and ``batch plan SWEEP --format
  json`` of a sweep of ``--models`` x ``--cases`` plain-id cases with ``repeats:
  --repeats``, no batch dir yet (every job to run); beside it the **baseline**, the same
  job count without repeats (``repeats: 1``, ``--repeats`` times as many cases). Both
  must count every job as to run.
- **stats**: ``batch stats DIR`` (table) and ``--format json`` of the summary such a batch
  ends with, written by the driver's own writer (``build_summary``, ``write_summary``): a
  mix of passes and model failures per model's skill and case's difficulty (so that many
  cases are flaky), 2 % ``error`` samples (a rate limit, so a case may have fewer samples
  than ``--repeats``), failures with a few different reasons, and scores from every other
  model. Beside it the **floor**, the simplest correct program (:data:`FLOOR`: ``json`` and
  ``math.comb``, pass@k per model and nothing else), whose figures must equal those of
  ``batch stats --format json``; and ``batch stats`` of a summary of as many rows without
  repeats (``--repeats`` times as many cases), what the stats of one sample per job cost.

Every process is the venv's Python (``sys.executable``; ``python3`` on this machine's
``PATH`` is a pyenv shim that adds about 0.16 s) and runs as an installed ``batch`` does,
with its modules' bytecode compiled once beforehand (``--no-pyc``: every run compiles,
as ``PYTHONDONTWRITEBYTECODE`` here would make it). Figures are medians over the
repetitions; the load average is printed with them. Exit status 1 when a plan counts
wrong or the floor's figures differ from the stats'; the goals are printed, not enforced.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from resume_scale import _MEASURED

from batch.plan.jobs import Job
from batch.summary.write import build_summary, write_summary
from run_support.jsonio import BACKEND

GOAL_PLAN_SECONDS = 5.0
GOAL_STATS_SECONDS = 3.0

#: The simplest correct program: pass@k per model from the summary, by the unbiased
#: estimator (per case ``1 - C(n-c, k)/C(n, k)``, k up to the fewest samples a case has),
#: errors left out.
FLOOR = """
import json, math, sys
with open(sys.argv[1], "rb") as f:
    doc = json.load(f)
tally = {}
for row in doc["jobs"]:
    if row["status"] in ("passed", "failed"):
        t = tally.setdefault((row["model"], row["case"]), [0, 0])
        t[0] += 1
        t[1] += row["status"] == "passed"
models = {}
for (model, _), nc in tally.items():
    models.setdefault(model, []).append(nc)
out = {}
for model, cases in models.items():
    top = min(n for n, _ in cases)
    out[model] = {
        str(k): sum(1 - math.comb(n - c, k) / math.comb(n, k) for n, c in cases) / len(cases)
        for k in range(1, top + 1)
    }
json.dump(out, sys.stdout)
"""

_REASONS = ("wrong answer", "timed out at step 3", "tool call rejected", "no final answer")


def batch_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "batch.cli", *args]


def model_id(m: int) -> str:
    return f"provider/model-{m}:latest"


def write_sweep(path: Path, models: int, cases: int, repeats: int) -> Path:
    sweep = {
        "name": "repeats-scale",
        "output": "runs",
        "cases": [f"case-{c:06d}" for c in range(cases)],
        "models": [model_id(m) for m in range(models)],
        "command": ["true"],
        "repeats": repeats,
    }
    path.write_text(json.dumps(sweep), encoding="utf-8")  # JSON is YAML
    return path


def write_batch(batch_dir: Path, models: int, cases: int, repeats: int, seed: int) -> None:
    """A finished batch's summary as the driver writes it, with a realistic mix."""
    rng = random.Random(seed)
    skill = [0.25 + 0.5 * m / max(1, models - 1) for m in range(models)]
    difficulty = [rng.random() for _ in range(cases)]
    jobs = []
    for r in range(1, repeats + 1):
        for c in range(cases):
            for m in range(models):
                job = Job(f"case-{c:06d}", model_id(m), repeat=r)
                job.attempts, job.duration_seconds = 1, round(1 + 30 * rng.random(), 3)
                job.run_dir = f"m{m}/case-{c:06d}-r{r}-a1"
                if rng.random() < 0.02:
                    job.status, job.failure_category = "error", "api_or_credit"
                    job.reason, job.attempts = "429 rate limit", 2
                elif rng.random() < min(1.0, max(0.0, skill[m] + 0.5 - difficulty[c])):
                    job.status = "passed"
                else:
                    job.status, job.failure_category = "failed", "model_failure"
                    job.reason = _REASONS[rng.randrange(len(_REASONS))]
                if m % 2 == 0 and job.status != "error":
                    job.score = round(rng.random(), 3)
                jobs.append(job)
    batch_dir.mkdir(parents=True)
    summary = build_summary(
        jobs,
        batch_id=batch_dir.name,
        state="complete",
        started_at="2026-12-01T00:00:00Z",
        finished_at="2026-12-01T06:00:00Z",
        elapsed_seconds=21600.0,
        max_concurrent=32,
    )
    write_summary(batch_dir, summary)
    (batch_dir / "sweep.yaml").write_text("{}\n", encoding="utf-8")  # marks a batch dir


#: The environment of every measured process (see the module's docstring on bytecode).
ENV: dict[str, str] | None = None


def measured(argv: list[str], cwd: Path, out: Path) -> tuple[float, float, float]:
    """Wall seconds, peak RSS (MB) and CPU seconds of ``argv``, its output in ``out``."""
    with open(out, "wb") as handle:
        done = subprocess.run(
            [sys.executable, "-c", _MEASURED, *argv],
            cwd=cwd,
            env=ENV,
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.PIPE,
            check=False,
        )
    if done.returncode != 0:
        raise SystemExit(f"repeats_scale: {argv[3:]} exited {done.returncode}: {done.stderr!r}")
    seconds, max_rss_kb, cpu = done.stderr.split()[-3:]
    return float(seconds), int(max_rss_kb) / 1024, float(cpu)


def planned(out: Path, fmt: str) -> int:
    """How many jobs a plan's output says are to run."""
    if fmt == "json":
        return int(json.loads(out.read_bytes())["counts"]["run"])
    found = re.search(rb"^(\d+) to run, 0 to retry, 0 carried", out.read_bytes(), re.M)
    return int(found.group(1)) if found else -1


def same_figures(stats_json: Path, floor_json: Path) -> bool:
    """Whether the floor's pass@k per model is that of ``batch stats --format json``."""
    stats = json.loads(stats_json.read_bytes())
    floor = json.loads(floor_json.read_bytes())
    ours = {
        group["model"]: {k: v["estimate"] for k, v in group["pass_at_k"].items()}
        for group in stats["models"]
    }
    return ours.keys() == floor.keys() and all(
        ours[m].keys() == floor[m].keys()
        and all(abs(ours[m][k] - floor[m][k]) <= 5e-7 for k in floor[m])
        for m in floor
    )


def use_bytecode_cache(root: Path) -> None:
    """Measure ``batch`` with its bytecode compiled beforehand, into ``root/pycache``."""
    global ENV
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    ENV = env
    warm = root / "warm-up"
    warm.mkdir()
    sweep = write_sweep(warm / "sweep.yaml", 2, 3, 2)
    write_batch(warm / "batch", 2, 3, 2, seed=0)
    for argv in (batch_argv("plan", str(sweep)), batch_argv("stats", str(warm / "batch"))):
        subprocess.run(argv, cwd=warm, env=env, stdout=subprocess.DEVNULL, check=True)


def record(figures: dict[str, list[float]], name: str, measure: tuple[float, float, float]) -> None:
    seconds, rss, cpu = measure
    figures.setdefault(name, []).append(seconds)
    figures.setdefault(f"{name}_rss", []).append(rss)
    figures.setdefault(f"{name}_cpu", []).append(cpu)


def repetition(directory: Path, args: argparse.Namespace, figures: dict[str, list[float]]) -> bool:
    """One repetition's figures, appended to ``figures``; whether every check held."""
    directory.mkdir()
    models, cases, repeats = args.models, args.cases, args.repeats
    total = models * cases * repeats
    ok = True
    sweeps = {
        "plan": write_sweep(directory / "repeats.yaml", models, cases, repeats),
        "plan_baseline": write_sweep(directory / "single.yaml", models, cases * repeats, 1),
    }
    for name, sweep in sweeps.items():
        for fmt in ("table", "json"):
            out = directory / f"{name}.{fmt}"
            argv = batch_argv("plan", str(sweep), "--format", fmt)
            record(figures, f"{name}_{fmt}", measured(argv, directory, out))
            if planned(out, fmt) != total:
                print(f"  {name} --format {fmt}: {planned(out, fmt)} to run, expected {total}")
                ok = False
    write_batch(directory / "repeats", models, cases, repeats, seed=len(figures["plan_table"]))
    write_batch(directory / "single", models, cases * repeats, 1, seed=1)
    for name, batch in (("stats", "repeats"), ("stats_baseline", "single")):
        for fmt in ("table", "json"):
            argv = batch_argv("stats", str(directory / batch), "--format", fmt)
            record(figures, f"{name}_{fmt}", measured(argv, directory, directory / f"{name}.{fmt}"))
    summary = directory / "repeats" / "batch-summary.json"
    argv = [sys.executable, "-c", FLOOR, str(summary)]
    record(figures, "floor", measured(argv, directory, directory / "floor.json"))
    if not same_figures(directory / "stats.json", directory / "floor.json"):
        print("  the floor's pass@k differs from batch stats --format json")
        ok = False
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3, choices=range(1, 21), metavar="N")
    parser.add_argument("--dir", type=Path, default=None, help="where to build (default: /tmp)")
    parser.add_argument(
        "--no-pyc", action="store_true", help="let every batch process compile its modules"
    )
    args = parser.parse_args(argv)

    root = Path(tempfile.mkdtemp(prefix="repeats-scale-", dir=args.dir))
    total = args.models * args.cases * args.repeats
    print(
        f"repeats_scale: {args.models} models x {args.cases} cases x {args.repeats} repeats = "
        f"{total} jobs, JSON {BACKEND}, {args.repeat} repetitions, in {root}, "
        + ("bytecode compiled every run" if args.no_pyc else "bytecode compiled beforehand")
    )
    figures: dict[str, list[float]] = {}
    ok = True
    loads = []
    try:
        if not args.no_pyc:
            use_bytecode_cache(root)
        for rep in range(args.repeat):
            loads.append(os.getloadavg()[0])
            ok = repetition(root / f"rep-{rep}", args, figures) and ok
            print(
                f"  rep {rep} (load {loads[-1]:.2f}): "
                + ", ".join(f"{k} {v[-1]:.2f}" for k, v in figures.items() if "_rss" not in k),
                flush=True,
            )
    finally:
        loads.append(os.getloadavg()[0])
        shutil.rmtree(root, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in figures.items() if v}
    print(
        f"  load average {min(loads):.2f} to {max(loads):.2f} on {os.cpu_count()} CPUs; "
        f"medians of {args.repeat} (seconds, peak RSS):"
    )
    baseline = f"repeats: 1, {args.cases * args.repeats} cases"
    floor = "floor: json + math.comb"
    for fmt in ("table", "json"):
        goal = f"   goal < {GOAL_PLAN_SECONDS:.0f} s"
        print(
            _line(f"plan --format {fmt}", med, f"plan_{fmt}", f"plan_baseline_{fmt}", baseline)
            + goal
        )
    for fmt in ("table", "json"):
        goal = f"   goal < {GOAL_STATS_SECONDS:.0f} s"
        print(_line(f"stats --format {fmt}", med, f"stats_{fmt}", "floor", floor) + goal)
        print(_line("", med, f"stats_{fmt}", f"stats_baseline_{fmt}", f"stats of {baseline}"))
    return 0 if ok else 1


def _line(title: str, med: dict[str, Any], key: str, base: str, named: str) -> str:
    measured_seconds, base_seconds = med[key], med[base]
    return (
        f"    {title:<22}{measured_seconds:6.2f} s (CPU {med[key + '_cpu']:5.2f}) "
        f"{med[key + '_rss']:5.0f} MB   {named} {base_seconds:5.2f} s "
        f"(CPU {med[base + '_cpu']:5.2f}) {med[base + '_rss']:5.0f} MB   "
        f"{measured_seconds / base_seconds:4.1f}x"
    )


if __name__ == "__main__":
    sys.exit(main())
