"""``batch view`` at 100,000 jobs: the server's memory, and what one live update costs.

    .venv/bin/python bench/view_scale.py [--jobs 100000] [--updates 20] [--batch 50]

Builds a batch dir of ``--jobs`` jobs (a summary as the driver writes it and an
``events.jsonl`` with a start and a finish per job), in a fresh temp dir, then:

1. starts a real ``batch view`` on it and reads its RSS once it serves (target: < 200 MB);
2. in this process, follows the same batch dir and appends ``--batch`` finish events
   ``--updates`` times, timing what the server does per update: look at the files, fold the
   new events, make the page's top part and the changed cells (target: < 50 ms);
3. beside it, the same update done the straightforward way (read the whole summary again
   and recount), the baseline the figure is a ratio to.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from batch.stats.rates import group_stats  # noqa: E402
from batch.summary.read import read_summary  # noqa: E402
from batch.view.follow import BatchFollower  # noqa: E402

MODELS = 10


def build(batch_dir: Path, jobs: int) -> list[tuple[str, str]]:
    (batch_dir / "batch-logs").mkdir(parents=True)
    keys = [(f"case-{i // MODELS:06d}", f"org/model-{i % MODELS}") for i in range(jobs)]
    rows = [
        {"case": c, "model": m, "status": "pending", "duration_seconds": None,
         "resumed": False, "failure_category": None, "attempts": 0, "run_dir": None}
        for c, m in keys
    ]  # fmt: skip
    summary = {"schema": 1, "batch_id": batch_dir.name, "state": "running", "jobs": rows}
    (batch_dir / "batch-summary.json").write_text(json.dumps(summary, indent=1))
    (batch_dir / "sweep.yaml").write_text("cases: []\nmodels: []\ncommand: [true]\n")
    with open(batch_dir / "batch-logs" / "events.jsonl", "w") as events:
        events.write(json.dumps({"t": "2026-12-01T00:00:00Z", "event": "batch_start"}) + "\n")
        for n, (c, m) in enumerate(keys[: jobs // 2]):
            events.write(json.dumps({"event": "start", "case": c, "model": m, "attempt": 1}) + "\n")
            status = "passed" if n % 3 else "failed"
            events.write(json.dumps({"event": "finish", "case": c, "model": m, "attempt": 1,
                                     "status": status, "duration_seconds": 1.5,
                                     "run_dir": f"{m}/{c}"}) + "\n")  # fmt: skip
    return keys[jobs // 2 :]


def view_rss(batch_dir: Path) -> float:
    """MB of a real ``batch view`` once it prints its URL and has read the batch."""
    process = subprocess.Popen(
        [sys.executable, "-m", "batch.cli", "view", str(batch_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 120)
        assert ready
        url = process.stdout.readline().decode().strip()
        import urllib.request

        base, token = url.split("/?token=")
        with urllib.request.urlopen(f"{base}/api/state?batch=0&token={token}", timeout=120):
            pass
        return psutil.Process(process.pid).memory_info().rss / 1e6
    finally:
        process.terminate()
        process.wait(20)


def updates(batch_dir: Path, pending: list[tuple[str, str]], count: int, size: int) -> list[float]:
    follower = BatchFollower(batch_dir)
    follower.poll()
    follower.view.changed_cells()
    events = batch_dir / "batch-logs" / "events.jsonl"
    costs = []
    for round_ in range(count):
        with open(events, "a") as file:
            for c, m in pending[round_ * size : (round_ + 1) * size]:
                event = {"event": "finish", "case": c, "model": m, "attempt": 1,
                         "status": "passed", "duration_seconds": 1.0}  # fmt: skip
                file.write(json.dumps(event) + "\n")
        start = time.perf_counter()
        follower.poll()
        json.dumps({"overview": follower.view.overview(time.time()),
                    "cells": follower.view.changed_cells()})  # fmt: skip
        costs.append(time.perf_counter() - start)
    return costs


def naive_update(batch_dir: Path) -> float:
    """The straightforward update: read the whole summary again and recount per model."""
    start = time.perf_counter()
    summary = read_summary(batch_dir)
    by_model: dict[str, list[dict[str, object]]] = {}
    for row in summary["jobs"]:
        by_model.setdefault(row["model"], []).append(row)
    json.dumps({m: group_stats(rows) for m, rows in by_model.items()})
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--batch", type=int, default=50)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="view-bench-"))
    try:
        batch_dir = root / "runs" / "bench-20261201T000000Z"
        pending = build(batch_dir, args.jobs)
        print(f"load: {os.getloadavg()[0]:.2f}; {args.jobs:,} jobs, {MODELS} models")
        rss = view_rss(batch_dir)
        print(f"batch view RSS serving the batch: {rss:.0f} MB (target < 200 MB)")
        costs = updates(batch_dir, pending, args.updates, args.batch)
        median = statistics.median(costs) * 1000
        print(f"one live update of {args.batch} finishes: median {median:.1f} ms, "
              f"max {max(costs) * 1000:.1f} ms (target < 50 ms)")  # fmt: skip
        naive = statistics.median(naive_update(batch_dir) for _ in range(3)) * 1000
        print(f"baseline, the summary read again and recounted: {naive:.0f} ms "
              f"({naive / median:.0f}x the view's update)")  # fmt: skip
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
