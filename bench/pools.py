"""One provider key, several sweeps: refusals, errors, the key's use and each sweep's share.

    .venv/bin/python bench/pools.py [--sweeps 1 3 5] [--jobs 240] [--mode today pool]
        [--rate 6] [--burst 6] [--latency 0.3] [--retries 3] [--backoff 1s]
        [--max-concurrent 8] [--pool-rate 6]

One rate-limited mock model API (``tests/helpers/mock_api.py``: a token bucket of
``--rate`` requests a second on 127.0.0.1, ``429`` when it is empty) is the key. ``--jobs``
jobs in all, split evenly over N sweeps started together, each a real ``batch`` driver
(a subprocess from the venv); every job makes one request and gives up on a ``429``,
reporting ``api_or_credit`` (what the adaptive rule counts as a refusal). Each sweep's model
has ``max_concurrent``, ``retries`` (``retry_backoff``, doubling) and ``max_attempts =
retries + 1``; its breaker and the broken-setup halt are off, so what is compared is how
the limit is shared, not how soon a sweep gives up.

Modes:

- ``today``: each model ``adaptive: true``, each driver adapting on its own;
- ``pool``: every sweep declares ``pools: {key: {max_concurrent, rate: --pool-rate,
  adaptive: true}}`` and its model ``pool: key``: one limit shared by every driver (the
  pool's state under a temporary ``XDG_STATE_HOME``);
- ``pool-norate``: the same pool without a ``rate`` (concurrency only, adaptive).

``--handover N`` measures instead how soon a SIGKILLed driver's slots go to another sweep:
a holder sweep fills a pool of 2 with two long jobs, a waiter sweep of the same pool waits;
the holder is SIGKILLed and the time until the waiter's first job starts (its ``start``
event) is taken, N times (``--redis-url``: through that Redis store instead of the local
one; each round uses its own database number 1-15 in turn).

Per run it prints: refused % (429s over all requests), jobs in ``error`` at the end (all
sweeps), key use (requests served over ``rate`` times the time from the first request served to
the last), wall time, and each sweep's share of the requests served until the first sweep
ended (equal demand: 1/N each is fair), then in brackets each sweep's share of the starts
made while every sweep was starting jobs (from their ``start`` events: no head start).
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from helpers.mock_api import MockApi, serve  # noqa: E402

MOCK_API = TESTS / "helpers" / "mock_api.py"
BATCH = ROOT / ".venv" / "bin" / "batch"


def write_sweep(directory: Path, name: str, jobs: int, args: argparse.Namespace, url: str) -> Path:
    model: dict[str, Any] = {
        "id": "provider/model",
        "max_concurrent": args.max_concurrent,
        "breaker": "off",
    }
    sweep: dict[str, Any] = {
        "name": name,
        "output": "runs",
        "cases": [f"c{n:03d}" for n in range(jobs)],
        "models": [model],
        "max_concurrent": args.max_concurrent,
        "halt": "off",
        "retries": args.retries,
        "retry_backoff": args.backoff,
        "max_attempts": args.retries + 1,
        "command": [sys.executable, str(MOCK_API), "call", url, "--caller", name],
    }
    if args.mode_now == "today":
        model["adaptive"] = True
    else:
        pool: dict[str, Any] = {"max_concurrent": args.max_concurrent, "adaptive": True}
        if args.mode_now == "pool":
            pool["rate"] = f"{args.pool_rate}/s"
        sweep["pools"] = {"key": pool}
        model["pool"] = "key"
    path = directory / f"{name}.yaml"
    path.write_text(json.dumps(sweep))
    return path


def run_once(
    directory: Path, sweeps: int, args: argparse.Namespace, api: MockApi
) -> dict[str, Any]:
    per_sweep = args.jobs // sweeps
    names = [f"{args.mode_now}{sweeps}-s{n}" for n in range(sweeps)]
    paths = [write_sweep(directory, name, per_sweep, args, api.url) for name in names]
    env = {**os.environ, "XDG_STATE_HOME": str(directory / f"state-{names[0]}")}
    before = api.stats()
    started = time.monotonic()
    drivers = [
        subprocess.Popen(
            [str(BATCH), str(path), "--no-progress"],
            cwd=directory,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for path in paths
    ]
    first_served = last_served = None
    served_seen = before["served"]
    shares_at: dict[str, Any] | None = None
    while any(d.poll() is None for d in drivers):
        time.sleep(0.05)
        now, stats = time.monotonic(), api.stats()
        if stats["served"] != served_seen:
            served_seen = stats["served"]
            first_served = first_served or now
            last_served = now
        if shares_at is None and any(d.poll() is not None for d in drivers):
            shares_at = stats
    wall = time.monotonic() - started
    after = api.stats()
    shares_at = shares_at or after
    served = after["served"] - before["served"]
    refused = after["limited"] - before["limited"]
    busy = (last_served or started) - (first_served or started)
    by_caller = shares_at["by_caller"]
    earlier = before["by_caller"]
    counts = [
        by_caller.get(n, {}).get("served", 0) - earlier.get(n, {}).get("served", 0) for n in names
    ]
    errors = 0
    starts = {}
    for name in names:
        (batch_dir,) = sorted((directory / "runs").glob(f"{name}-*"))[-1:]
        summary = json.loads((batch_dir / "batch-summary.json").read_text())
        errors += summary["totals"]["error"]
        starts[name] = sorted(e["t"] for e in _events(batch_dir) if e["event"] == "start")
    # The starts while every sweep was starting jobs (as tests/e2e/test_pools.py counts).
    since = max(times[0] for times in starts.values())
    until = min(times[-1] for times in starts.values())
    window = [sum(since <= t <= until for t in starts[name]) for name in names]
    return {
        "refused_pct": 100 * refused / max(served + refused, 1),
        "errors": errors,
        "use_pct": 100 * served / (args.rate * busy) if busy > 0 else 0.0,
        "wall": wall,
        "served": served,
        "refused": refused,
        "shares": [100 * c / max(sum(counts), 1) for c in counts],
        "window_shares": [100 * c / max(sum(window), 1) for c in window],
        "exits": [d.returncode for d in drivers],
    }


def handover_once(directory: Path, store: str | None) -> float:
    """Seconds from SIGKILLing a driver that holds a pool's slots to another's first start."""
    fake = [sys.executable, str(TESTS / "helpers" / "fake_agent.py")]
    env = {**os.environ, "XDG_STATE_HOME": str(directory / "state")}
    drivers = {}
    for name, action in (("holder", "sleep=60"), ("waiter", "pass")):
        sweep: dict[str, Any] = {
            "name": name,
            "output": "runs",
            "cases": ["c0", "c1"],
            "models": [{"id": "m", "pool": "key"}],
            "pools": {"key": {"max_concurrent": 2}},
            "max_concurrent": 2,
            "command": [*fake, action],
        }
        if store is not None:
            sweep["pools_store"] = store
        path = directory / f"{name}.yaml"
        path.write_text(json.dumps(sweep))
        drivers[name] = subprocess.Popen(
            [str(BATCH), str(path), "--no-progress"],
            cwd=directory,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        if name == "holder":
            while _starts(directory, "holder") < 2:
                time.sleep(0.02)
    waiter = drivers["waiter"]
    assert waiter.stdout is not None
    while b"POOL key:" not in waiter.stdout.readline():
        pass
    time.sleep(0.5)
    killed = time.time()
    os.kill(drivers["holder"].pid, 9)
    drivers["holder"].wait()
    waiter.stdout.read()
    waiter.wait()
    (batch_dir,) = sorted((directory / "runs").glob("waiter-*"))[-1:]
    first = min(e["t"] for e in _events(batch_dir) if e["event"] == "start")
    started = datetime.strptime(first, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()
    for leftover in (directory / "runs").iterdir():
        shutil.rmtree(leftover)
    return started - killed


def _events(batch_dir: Path) -> list[dict[str, Any]]:
    lines = (batch_dir / "batch-logs" / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _starts(directory: Path, name: str) -> int:
    found = sorted((directory / "runs").glob(f"{name}-*/batch-logs/events.jsonl"))
    if not found:
        return 0
    return sum(e["event"] == "start" for e in _events(found[-1].parent.parent))


def handover(rounds: int, redis_url: str | None) -> None:
    times = []
    with tempfile.TemporaryDirectory(prefix="bench-pools-kill-") as tmp:
        for number in range(rounds):
            store = None
            if redis_url is not None:
                store = f"{redis_url.rstrip('/').rsplit('/', 1)[0]}/{number % 15 + 1}"
            times.append(handover_once(Path(tmp), store))
            print(f"round {number + 1}: {times[-1]:.2f} s", flush=True)
    where = "redis" if redis_url else "local"
    print(
        f"{where} store: a SIGKILLed driver's slots taken by another sweep after "
        f"{statistics.median(times):.2f} s (median of {rounds}), {max(times):.2f} s at most"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, nargs="+", default=[1, 3, 5])
    parser.add_argument("--jobs", type=int, default=240, help="jobs in all, over the sweeps")
    parser.add_argument(
        "--mode", nargs="+", default=["today"], choices=["today", "pool", "pool-norate"]
    )
    parser.add_argument("--rate", type=float, default=6.0, help="the key's requests a second")
    parser.add_argument("--burst", type=float, default=6.0, help="requests saved up at most")
    parser.add_argument("--latency", type=float, default=0.3, help="seconds per answer")
    parser.add_argument("--retries", type=int, default=3)
    parser.add_argument("--backoff", default="1s", help="retry_backoff")
    parser.add_argument("--max-concurrent", type=int, default=8)
    parser.add_argument("--pool-rate", type=float, default=6.0, help="the pool's rate (pool)")
    parser.add_argument(
        "--handover", type=int, default=0, metavar="N", help="measure N SIGKILL handovers instead"
    )
    parser.add_argument("--redis-url", default=None, help="--handover through this Redis")
    args = parser.parse_args()
    if args.handover:
        print(f"loadavg: {Path('/proc/loadavg').read_text().strip()}", flush=True)
        handover(args.handover, args.redis_url)
        print(f"loadavg: {Path('/proc/loadavg').read_text().strip()}", flush=True)
        return 0
    print(f"loadavg: {Path('/proc/loadavg').read_text().strip()}", flush=True)
    print(
        f"{'mode':12} {'sweeps':>6} {'refused':>8} {'error':>6} {'key use':>8} {'wall':>7}  shares",
        flush=True,
    )
    with (
        tempfile.TemporaryDirectory(prefix="bench-pools-") as tmp,
        serve(args.rate, args.burst, args.latency) as api,
    ):
        for mode in args.mode:
            args.mode_now = mode
            for sweeps in args.sweeps:
                time.sleep(args.burst / args.rate)  # the bucket fills up again
                r = run_once(Path(tmp), sweeps, args, api)
                shares = " ".join(f"{s:.0f}%" for s in r["shares"])
                window = "/".join(f"{s:.0f}" for s in r["window_shares"])
                print(
                    f"{mode:12} {sweeps:>6} {r['refused_pct']:>7.0f}% {r['errors']:>6} "
                    f"{r['use_pct']:>7.0f}% {r['wall']:>6.1f}s  {shares}"
                    f"  ({r['served']} served, {r['refused']} refused, exits {r['exits']}; "
                    f"starts while all ran: {window} %)",
                    flush=True,
                )
    print(f"loadavg: {Path('/proc/loadavg').read_text().strip()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
