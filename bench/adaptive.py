"""Adaptive concurrency against a rate limit: the same sweep, static and adaptive.

    .venv/bin/python bench/adaptive.py [--cases 80] [--max-concurrent 8] [--rate 6]
        [--burst 6] [--calls 3] [--latency 0.3] [--retries 3] [--backoff 1s] [--repeat 1]

One rate-limited mock model API (``tests/helpers/mock_api.py``: a token bucket on
127.0.0.1, ``429`` when it is empty) serves both sweeps. Each job makes ``--calls`` requests
one after another and gives up on the first ``429``, reporting ``api_or_credit`` (its work is
lost, as a harness's is). The sweep runs under the real ``batch`` command twice: once with a
static ``max_concurrent``, once with ``adaptive: true`` on the model; ``retries`` and
``retry_backoff`` are the same. Between runs the bucket is left to fill up again.

For each run it prints the rate-limited attempts (``finish`` events with ``api_or_credit``
in ``events.jsonl``; each is one request the server refused), the jobs still in ``error`` at
the end, the requests served (wasted ones included), the limit changes and the wall time;
then the reduction in rate-limited attempts and the time ratio::

    static   : 172 api_or_credit attempts, 26 jobs in error, 345 served, 0 limit changes, 73.0 s
    adaptive : 14 api_or_credit attempts, 0 jobs in error, 258 served, 15 limit changes, 53.5 s
    adaptive: 92% fewer api_or_credit attempts, wall time 0.73x static

Goal (issue 13): at least 80 % fewer and a time ratio of at most 1.0. The defaults make the
provider's limit a fraction of the static concurrency's demand (6 requests a second against
8 jobs of 3 calls of 0.3 s each), the case adaptive concurrency is for. With ``--repeat N``
the order alternates (static first, then adaptive first, ...) and the medians are printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from helpers.mock_api import MockApi, serve  # noqa: E402

MOCK_API = TESTS / "helpers" / "mock_api.py"


def write_sweep(directory: Path, args: argparse.Namespace, url: str, *, adaptive: bool) -> Path:
    # The breaker and the broken-setup halt are off: a static sweep against a rate limit
    # opens its breaker within a few jobs, which would compare how soon each stops rather
    # than how many 429s each draws for the same work.
    model: dict[str, object] = {
        "id": "provider/model",
        "max_concurrent": args.max_concurrent,
        "breaker": "off",
    }
    if adaptive:
        model["adaptive"] = True
    sweep = {
        "name": "adaptive" if adaptive else "static",
        "output": "runs",
        "cases": [f"c{n:03d}" for n in range(args.cases)],
        "models": [model],
        "max_concurrent": args.max_concurrent,
        "halt": "off",
        "retries": args.retries,
        "retry_backoff": args.backoff,
        "max_attempts": args.retries + 1,
        "command": [
            sys.executable,
            str(MOCK_API),
            "call",
            url,
            "--calls",
            str(args.calls),
        ],
    }
    path = directory / f"{sweep['name']}.yaml"
    path.write_text(json.dumps(sweep))
    return path


def run_once(
    directory: Path, args: argparse.Namespace, api: MockApi, *, adaptive: bool
) -> dict[str, float]:
    sweep = write_sweep(directory, args, api.url, adaptive=adaptive)
    before = api.stats()
    started = time.monotonic()
    subprocess.run(
        [str(ROOT / ".venv" / "bin" / "batch"), str(sweep), "--no-progress"],
        cwd=directory,
        stdout=subprocess.DEVNULL,
        check=False,
    )
    wall = time.monotonic() - started
    after = api.stats()
    (batch_dir,) = sorted((directory / "runs").glob(f"{sweep.stem}-*"))[-1:]
    events = [
        json.loads(line)
        for line in (batch_dir / "batch-logs" / "events.jsonl").read_text().splitlines()
    ]
    limited = sum(
        e["event"] == "finish" and e.get("failure_category") == "api_or_credit" for e in events
    )
    summary = json.loads((batch_dir / "batch-summary.json").read_text())
    return {
        "limited": limited,
        "errors": summary["totals"]["error"],
        "passed": summary["totals"]["passed"],
        "served": after["served"] - before["served"],
        "refused": after["limited"] - before["limited"],
        "changes": sum(e["event"] == "concurrency" for e in events),
        "wall": wall,
    }


def show(label: str, figures: dict[str, float]) -> None:
    print(
        f"{label:9}: {figures['limited']:.0f} api_or_credit attempts, "
        f"{figures['errors']:.0f} jobs in error, {figures['served']:.0f} served, "
        f"{figures['changes']:.0f} limit changes, "
        f"{figures['wall']:.1f} s, "
        f"{figures['wall'] / max(figures['passed'], 1):.2f} s per passed job",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=80)
    parser.add_argument("--max-concurrent", type=int, default=8)
    parser.add_argument("--rate", type=float, default=6.0, help="requests a second")
    parser.add_argument("--burst", type=float, default=6.0, help="requests saved up at most")
    parser.add_argument("--calls", type=int, default=3, help="requests per job")
    parser.add_argument("--latency", type=float, default=0.3, help="seconds per answer")
    parser.add_argument("--retries", type=int, default=3)
    parser.add_argument("--backoff", default="1s", help="retry_backoff")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {"static": [], "adaptive": []}
    with (
        tempfile.TemporaryDirectory(prefix="bench-adaptive-") as tmp,
        serve(args.rate, args.burst, args.latency) as api,
    ):
        directory = Path(tmp)
        for round_number in range(args.repeat):
            order = ("static", "adaptive") if round_number % 2 == 0 else ("adaptive", "static")
            for label in order:
                time.sleep(args.burst / args.rate)  # the bucket fills up again
                figures = run_once(directory, args, api, adaptive=label == "adaptive")
                results[label].append(figures)
                show(label, figures)
    static, adaptive = (
        {key: statistics.median(r[key] for r in results[label]) for key in results[label][0]}
        for label in ("static", "adaptive")
    )
    if args.repeat > 1:
        show("static~", static)
        show("adaptive~", adaptive)
    fewer = 1 - adaptive["limited"] / static["limited"] if static["limited"] else 0.0
    ratio = adaptive["wall"] / static["wall"]
    # The static sweep ends sooner only by leaving jobs in error for --retry-failed: the
    # time per passed job compares the same work.
    per_pass = (adaptive["wall"] / max(adaptive["passed"], 1)) / (
        static["wall"] / max(static["passed"], 1)
    )
    print(
        f"adaptive: {fewer:.0%} fewer api_or_credit attempts (goal >= 80%), wall time "
        f"{ratio:.2f}x static, time per passed job {per_pass:.2f}x static (goal <= 1)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
