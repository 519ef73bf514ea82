"""Time ``load_recorded_runs`` on a 100,000-record ledger against the straightforward reader.

    .venv/bin/python bench/ledger_scan.py [--models 10] [--cases 10000] [--repeat 3]

Each repetition builds a fresh ledger (one ``run-meta.json`` per case x model, as the runner
writes them) in its own directory, flushes it to disk, waits out the index's racy window so
the ledger is "old" as it is when a sweep is resumed, then times, in this order:

- baseline: sorted ``glob("*/*/run-meta.json")``, ``json.loads`` and ``run_meta_from_dict``
  per file, newest record per (case, model) — what a reader without an index does;
- first call: ``load_recorded_runs`` with no index yet (it builds ``.ledger-index``);
- indexed: ``load_recorded_runs`` again, served from the index (the figure that matters);
- no index: ``load_recorded_runs(use_index=False)``, for reference;
- baseline again, and the faster of its two runs counts (no cold-cache penalty for it).

Every result is compared with the baseline's; the script exits 1 if any differs. The ledgers
are deleted only after the last repetition (mass deletes are slow and would disturb the
timings). The last line is the figure, best of the repetitions::

    ledger_scan: 100000 records, baseline 9.41 s, load_recorded_runs 1.23 s (indexed), ratio 7.6x
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from run_support import jsonio
from run_support.ledger_scan import RACY_WINDOW_NS
from run_support.results import (
    InvalidRecord,
    RunMeta,
    load_recorded_runs,
    run_meta_from_dict,
    run_meta_to_dict,
    timestamp_order,
)

GOAL_RATIO = 3.0
GOAL_SECONDS = 2.0
_OUTCOMES = (
    ("passed", None),
    ("passed", None),
    ("passed", None),
    ("failed", "model_failure"),
    ("error", "infra_failure"),
    ("error", "api_or_credit"),
)


def safe(name: str) -> str:
    return name.replace("/", "--").replace(":", "--")


def build_ledger(batch_dir: Path, models: int, cases: int) -> int:
    """One record per (case, model), in the runner's layout and format; returns the count."""
    batch_dir.mkdir(parents=True)
    count = 0
    for m in range(models):
        model = f"provider/model-{m}:latest"
        model_dir = batch_dir / safe(model)
        model_dir.mkdir()
        for c in range(cases):
            case = f"case-{c:05d}"
            outcome, category = _OUTCOMES[(c + m) % len(_OUTCOMES)]
            seconds = (c * 7 + m) % 3600
            stamp = (
                f"2026-11-30T{seconds // 3600 + 3:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
            )
            run_name = f"{case}-{safe(model)}-{stamp.replace('-', '').replace(':', '')}000000Z-a1"
            meta = RunMeta(
                test_case=case,
                model=model,
                outcome=outcome,
                failure_category=category,
                timestamp=f"{stamp}.000000Z",
                finished_at=f"{stamp}.500000Z",
                duration_seconds=round(1 + (c % 97) * 0.37, 3),
                stop_reason="exit",
                exit_code={"passed": 0, "failed": 1}.get(outcome, 2),
                batch_id="batch-20261130T030000Z",
                run_dir=f"{model_dir.name}/{run_name}",
                result={"score": 1.0 if outcome == "passed" else 0.0, "turns": c % 13},
            )
            run_dir = model_dir / run_name
            run_dir.mkdir()
            # The runner writes atomically with fsync; a plain write builds the same files
            # much faster, and the reader cannot tell the difference.
            (run_dir / "run-meta.json").write_bytes(
                jsonio.dumps(run_meta_to_dict(meta), indent=True)
            )
            count += 1
    return count


def baseline(batch_dir: Path) -> dict[tuple[str, str], RunMeta]:
    """The straightforward reader: sorted glob, json.loads per file, newest per pair."""
    newest: dict[tuple[str, str], RunMeta] = {}
    for path in sorted(glob.glob(os.path.join(glob.escape(str(batch_dir)), "*/*/run-meta.json"))):
        try:
            with open(path, "rb") as handle:
                meta = run_meta_from_dict(json.loads(handle.read()))
        except (OSError, ValueError, InvalidRecord):
            continue
        meta.run_dir = os.path.relpath(os.path.dirname(path), batch_dir)
        current = newest.get(meta.key)
        if current is None or (timestamp_order(meta.timestamp), meta.run_dir) > (
            timestamp_order(current.timestamp),
            current.run_dir,
        ):
            newest[meta.key] = meta
    return newest


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3, choices=range(1, 21), metavar="N")
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to build (default: a temp dir)"
    )
    args = parser.parse_args(argv)

    root = Path(tempfile.mkdtemp(prefix="ledger-bench-", dir=args.dir))
    times: dict[str, list[float]] = {"baseline": [], "first": [], "indexed": [], "no_index": []}
    identical = True
    records = 0
    print(
        f"ledger_scan: JSON backend {jsonio.BACKEND}, {args.models} models x {args.cases} cases, "
        f"{args.repeat} repetitions, in {root}"
    )
    try:
        for rep in range(args.repeat):
            batch_dir = root / f"rep-{rep}"
            build_seconds, records = timed(
                partial(build_ledger, batch_dir, args.models, args.cases)
            )
            # Flush the build's dirty pages so write-back does not run during the timings,
            # and let the records age past the index's racy window, as they have on resume.
            os.sync()
            time.sleep(RACY_WINDOW_NS / 1e9 + 0.5)
            seconds, expected = timed(partial(baseline, batch_dir))
            times["baseline"].append(seconds)
            for label, call in (
                ("first", partial(load_recorded_runs, batch_dir)),
                ("indexed", partial(load_recorded_runs, batch_dir)),
                ("no_index", partial(load_recorded_runs, batch_dir, use_index=False)),
            ):
                seconds, got = timed(call)
                times[label].append(seconds)
                same = dict(got) == expected and not got.unreadable and len(got) == records
                identical = identical and same
                if not same:
                    print(f"  rep {rep}: {label} result DIFFERS from the baseline", file=sys.stderr)
            # Once more, now that every file has been read before: the baseline's best case.
            seconds, _ = timed(partial(baseline, batch_dir))
            times["baseline"][-1] = min(times["baseline"][-1], seconds)
            print(
                f"  rep {rep}: built {records} records in {build_seconds:.1f} s; "
                + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items())
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)

    best = {k: min(v) for k, v in times.items()}
    ratio = best["baseline"] / best["indexed"]
    print("  medians: " + ", ".join(f"{k} {statistics.median(v):.2f} s" for k, v in times.items()))
    met = ratio >= GOAL_RATIO and best["indexed"] < GOAL_SECONDS
    print(
        f"  first call (builds the index) {best['first']:.2f} s; "
        f"no index {best['no_index']:.2f} s; "
        f"goal >= {GOAL_RATIO:.0f}x and < {GOAL_SECONDS:.0f} s: {'met' if met else 'NOT met'}; "
        f"results {'identical' if identical else 'DIFFER'}"
    )
    print(
        f"ledger_scan: {records} records, baseline {best['baseline']:.2f} s, "
        f"load_recorded_runs {best['indexed']:.2f} s (indexed), ratio {ratio:.1f}x"
    )
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
