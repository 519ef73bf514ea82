"""How much of a Slurm allocation the ``slurm`` executor keeps busy: short jobs, few CPUs.

    .venv/bin/python bench/slurm_scale.py [--jobs 160] [--seconds 0.25] [--workers 2]
                                          [--cores 1] [--repeat 2]

Starts (or reuses) the one-node Slurm of ``scripts/slurm-local``, then runs a sweep of
``--jobs`` jobs of ``sleep SECONDS`` with ``executor: {kind: slurm, workers, cores}`` and
``-j`` = workers x cores through ``run_main``, timing the whole invocation: plan, lock,
the cluster's start, ``sbatch`` of the worker jobs and their Python start, every job's
record, the summary, ``scancel``. The ideal wall time is jobs x seconds / (workers x
cores). Two efficiencies, best of ``--repeat``:

- *whole*: ideal / the invocation's wall time — what a user waits, worker start included;
- *jobs*: ideal / from the first job's start to the last job's end (``events.jsonl``) —
  how busy the driver keeps the slots once the workers are there.

Every job must pass and leave the queue empty; the script exits 1 if not. The last line
is the figure::

    slurm_scale: 160 jobs x 0.25 s on 2 workers x 1 cores: ideal 20.00 s, measured 27.10 s
    (efficiency 0.74), jobs phase 21.30 s (efficiency 0.94)
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from batch.cli import handle
from batch.commands.run import run_main
from batch.executors.slurm import job_name
from batch.plan.planner import RunOptions

ROOT = Path(__file__).resolve().parent.parent


def start_slurm() -> str:
    """``scripts/slurm-local start``; returns the partition and sets ``SLURM_CONF``."""
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "slurm-local"), "start"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"slurm_scale: Slurm could not be started:\n{done.stderr}")
    for line in done.stdout.splitlines():
        if line.startswith("export SLURM_CONF="):
            os.environ["SLURM_CONF"] = line.removeprefix("export SLURM_CONF=")
    return os.environ.get("SLURM_LOCAL_PARTITION", "debug")


def write_sweep(directory: Path, args: argparse.Namespace, partition: str) -> Path:
    sweep = {
        "name": "slurm-scale",
        "cases": [f"c{n:04d}" for n in range(args.jobs)],
        "models": ["m"],
        "command": ["sleep", str(args.seconds)],
        "executor": {
            "kind": "slurm",
            "partition": partition,
            "workers": args.workers,
            "cores": args.cores,
            "memory": "512MiB",
            "walltime": "00:30:00",
            "host": "127.0.0.1",
        },
    }
    path = directory / "sweep.yaml"
    path.write_text(json.dumps(sweep), encoding="utf-8")  # JSON is YAML
    return path


def timed_run(sweep: Path, output: Path, slots: int) -> tuple[float, float]:
    """Wall seconds of one invocation and of its jobs phase; SystemExit when a job failed."""
    options = RunOptions(output=output, max_concurrent=slots, progress=False)
    err = io.StringIO()
    started = time.perf_counter()
    status = handle(lambda: run_main(sweep, options, out=io.StringIO(), err=err), err)
    wall = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"slurm_scale: the sweep exited {status}: {err.getvalue().strip()}")
    (batch_dir,) = output.iterdir()
    totals = json.loads((batch_dir / "batch-summary.json").read_text())["totals"]
    if totals["passed"] != sum(totals.values()):
        raise SystemExit(f"slurm_scale: not every job passed: {totals}")
    events = [json.loads(line) for line in (batch_dir / "batch-logs/events.jsonl").open()]
    stamps = [
        datetime.fromisoformat(event["t"].replace("Z", "+00:00")).timestamp()
        for event in events
        if event["event"] in ("start", "finish")
    ]
    queued = subprocess.run(
        ["squeue", "-h", "-n", job_name(batch_dir)], capture_output=True, text=True, check=True
    ).stdout
    if queued.strip():
        raise SystemExit(f"slurm_scale: worker jobs left in the queue:\n{queued}")
    shutil.rmtree(output)
    return wall, max(stamps) - min(stamps)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=160)
    parser.add_argument("--seconds", type=float, default=0.25)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    partition = start_slurm()
    slots = args.workers * args.cores
    ideal = args.jobs * args.seconds / slots
    with tempfile.TemporaryDirectory(prefix="bench-slurm-") as tmp:
        directory = Path(tmp)
        sweep = write_sweep(directory, args, partition)
        runs = []
        for n in range(args.repeat):
            runs.append(timed_run(sweep, directory / "runs", slots))
            print(f"run {n + 1}: {runs[-1][0]:.2f} s, jobs phase {runs[-1][1]:.2f} s", flush=True)
    wall = min(run[0] for run in runs)
    phase = min(run[1] for run in runs)
    print(
        f"slurm_scale: {args.jobs} jobs x {args.seconds:g} s on {args.workers} workers x "
        f"{args.cores} cores: ideal {ideal:.2f} s, measured {wall:.2f} s (efficiency "
        f"{ideal / wall:.2f}), jobs phase {phase:.2f} s (efficiency {ideal / phase:.2f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
