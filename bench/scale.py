"""How much of a Dask cluster the ``dask`` executor keeps busy: short jobs, many slots.

    .venv/bin/python bench/scale.py [--jobs 160] [--seconds 0.25] [--workers 2] [--slots 4]
                                    [--repeat 3] [--local]

Starts a Dask scheduler and ``--workers`` worker processes of ``--slots`` threads each on
127.0.0.1 (processes of their own, as on a real cluster), then runs a sweep of ``--jobs``
jobs of ``sleep SECONDS`` through ``run_main`` with ``--scheduler`` and ``-j`` = workers x
slots, timing the whole invocation: plan, lock, connect, every job's record, the summary,
close. The ideal wall time is jobs x seconds / (workers x slots); efficiency is ideal wall /
measured wall, best of ``--repeat``. ``--local`` also times the local executor at the same
``-j``, for reference. Every job must pass; the script exits 1 if one does not, or if the
efficiency is under the goal. The last line is the figure::

    scale: 160 jobs x 0.25 s on 2 workers x 4 slots: ideal 5.00 s, measured 5.61 s, efficiency 0.89
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from batch.commands.run import run_main
from batch.plan.planner import RunOptions

GOAL = 0.8


@contextlib.contextmanager
def cluster(directory: Path, workers: int, slots: int) -> Iterator[str]:
    """A scheduler and ``workers`` worker processes on 127.0.0.1; yields the address."""
    from distributed import Client

    file = directory / "scheduler.json"
    loopback = ["--host", "127.0.0.1", "--no-dashboard", "--dashboard-address", "127.0.0.1:0"]
    commands = [
        ["dask_scheduler", "--port", "0", "--scheduler-file", str(file)],
        [
            "dask_worker",
            "--nworkers",
            str(workers),
            "--nthreads",
            str(slots),
            "--memory-limit",
            "0",
            "--scheduler-file",
            str(file),
        ],
    ]
    # Dask never reruns a task on its own (the executor's claims would refuse it anyway).
    env = dict(os.environ, DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="0")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for command in commands:
            argv = [sys.executable, "-m", f"distributed.cli.{command[0]}", *command[1:], *loopback]
            processes.append(
                subprocess.Popen(
                    argv,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
            deadline = time.monotonic() + 30
            while not file.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        with Client(scheduler_file=str(file), set_as_default=False) as client:
            client.wait_for_workers(workers, timeout=60)
            address = client.scheduler.address
        yield address
    finally:
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def write_sweep(directory: Path, jobs: int, seconds: float) -> Path:
    sweep = {
        "name": "scale",
        "cases": [f"c{n:04d}" for n in range(jobs)],
        "models": ["m"],
        "command": ["sleep", str(seconds)],
    }
    path = directory / "sweep.yaml"
    path.write_text(json.dumps(sweep), encoding="utf-8")  # JSON is YAML
    return path


def timed_run(sweep: Path, output: Path, slots: int, scheduler: str | None) -> float:
    """Wall seconds of one invocation; raises SystemExit when a job did not pass."""
    options = RunOptions(
        output=output,
        max_concurrent=slots,
        progress=False,
        executor="dask" if scheduler else "local",
        scheduler=scheduler,
    )
    err = io.StringIO()
    started = time.perf_counter()
    status = run_main(sweep, options, out=io.StringIO(), err=err)
    wall = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"scale: the sweep exited {status}: {err.getvalue().strip()}")
    (batch_dir,) = output.iterdir()
    totals = json.loads((batch_dir / "batch-summary.json").read_text())["totals"]
    shutil.rmtree(output)
    if totals["passed"] != sum(totals.values()):
        raise SystemExit(f"scale: not every job passed: {totals}")
    return wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=160)
    parser.add_argument("--seconds", type=float, default=0.25)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--local", action="store_true", help="also time the local executor")
    args = parser.parse_args()
    slots = args.workers * args.slots
    ideal = args.jobs * args.seconds / slots
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        directory = Path(tmp)
        sweep = write_sweep(directory, args.jobs, args.seconds)
        if args.local:
            local = min(
                timed_run(sweep, directory / "runs", slots, None) for _ in range(args.repeat)
            )
            print(f"local executor, -j {slots}: {local:.2f} s, efficiency {ideal / local:.2f}")
        with cluster(directory, args.workers, args.slots) as address:
            walls = []
            for n in range(args.repeat):
                walls.append(timed_run(sweep, directory / "runs", slots, address))
                print(f"run {n + 1}: {walls[-1]:.2f} s", flush=True)
    best = min(walls)
    efficiency = ideal / best
    print(
        f"scale: {args.jobs} jobs x {args.seconds:g} s on {args.workers} workers x {args.slots} "
        f"slots: ideal {ideal:.2f} s, measured {best:.2f} s, efficiency {efficiency:.2f}"
    )
    return 0 if efficiency >= GOAL else 1


if __name__ == "__main__":  # the guard also keeps Dask's spawned processes from rerunning it
    sys.exit(main())
