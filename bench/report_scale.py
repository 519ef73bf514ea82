"""``batch report`` of 200,000 jobs in a real browser, beside the report of the commit this
tree started from; and ``events.jsonl``'s size at 100,000 and 1,000,000 jobs.

    .venv/bin/python bench/report_scale.py [--jobs 200000] [--fail-every 100]
        [--baseline 57d0014] [--events 100000,1000000]

1. Builds a batch dir of ``--jobs`` jobs (20 models, a summary as the driver writes it,
   every ``--fail-every``-th job failed with a reason and a run dir) in a fresh temp dir.
2. Writes its report with this tree and with a baseline tree (``git worktree add`` of
   ``--baseline`` in a temp dir, removed at the end), times each ``batch report``, and
   opens each page in headless Chromium (Debian's ``/usr/bin/chromium`` via Playwright;
   ``scripts/chromium-local`` installs it), timing ``goto`` until the load event and the
   grid's script has run (target: at most 10 MB, under 5 s).
3. Writes the start and finish events of N jobs through the driver's ``EventLog`` for each
   N of ``--events`` and prints the bytes on disk, with and without rotation.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from batch.execution.events import EventLog  # noqa: E402

MODELS = 20


def build(batch_dir: Path, jobs: int, fail_every: int) -> None:
    (batch_dir / "batch-logs").mkdir(parents=True)
    rows = []
    for i in range(jobs):
        case, model = f"case-{i // MODELS:06d}", f"org/model-{i % MODELS:02d}"
        failed = i % fail_every == 0
        rows.append({
            "case": case, "model": model, "status": "failed" if failed else "passed",
            "duration_seconds": 1.5, "resumed": False,
            "failure_category": "model_failure" if failed else None,
            "reason": "exit code 1: wrong answer" if failed else None, "attempts": 1,
            "run_dir": f"org_model-{i % MODELS:02d}/{case}-org_model-{i % MODELS:02d}"
                       "-20261201T000000Z-a1",
        })  # fmt: skip
    summary = {"schema": 1, "batch_id": batch_dir.name, "state": "complete", "jobs": rows}
    (batch_dir / "batch-summary.json").write_text(json.dumps(summary, indent=1))
    (batch_dir / "sweep.yaml").write_text("cases: []\nmodels: []\ncommand: [true]\n")


def write_report(tree: Path, batch_dir: Path, output: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "batch", "report", str(batch_dir), "-o", str(output)],
        check=True, stdout=subprocess.DEVNULL, cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
    )  # fmt: skip
    return time.perf_counter() - started


def browser_seconds(pages: list[Path]) -> list[float | str]:
    from playwright.sync_api import sync_playwright

    found: list[float | str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium")
        try:
            for path in pages:
                page = browser.new_page()
                started = time.perf_counter()
                try:
                    page.goto(path.as_uri(), wait_until="load", timeout=120_000)
                    page.evaluate("() => document.getElementById('grid')?.rows.length ?? 0")
                    found.append(time.perf_counter() - started)
                except Exception as exc:  # a page no browser opens is the finding
                    found.append(f"failed after {time.perf_counter() - started:.1f} s: {exc}"[:120])
                finally:
                    page.close()
        finally:
            browser.close()
    return found


def events_bytes(root: Path, jobs: int) -> tuple[int, int, float]:
    """Bytes on disk of ``jobs`` jobs' start and finish events (rotated and compressed),
    the bytes written, and the seconds it took."""
    logs = root / f"events-{jobs}" / "batch-logs"
    logs.mkdir(parents=True)
    started = time.perf_counter()
    log = EventLog(logs / "events.jsonl")
    log.emit("batch_start", pid=1, jobs=jobs, carried=0, to_run=jobs)
    written = 0
    for i in range(jobs):
        case, model = f"case-{i // MODELS:06d}", f"org/model-{i % MODELS:02d}"
        log.emit("start", case=case, model=model, attempt=1)
        log.emit("finish", case=case, model=model, attempt=1, status="passed",
                 failure_category=None, duration_seconds=0.004,
                 run_dir=f"org_model-{i % MODELS:02d}/{case}-org_model-{i % MODELS:02d}"
                         "-20261201T000000Z-a1")  # fmt: skip
    log.emit("batch_end", state="complete")
    log.close()
    seconds = time.perf_counter() - started
    on_disk = sum(path.stat().st_size for path in logs.iterdir())
    for path in logs.iterdir():
        if path.suffix == ".gz":
            import gzip

            with gzip.open(path, "rb") as file:
                written += len(file.read())
        else:
            written += path.stat().st_size
    return on_disk, written, seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--fail-every", type=int, default=100)
    parser.add_argument("--baseline", default="57d0014")
    parser.add_argument("--events", default="100000,1000000")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="report-scale-"))
    base = root / "baseline-tree"
    try:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(base),
                        args.baseline], check=True)  # fmt: skip
        batch_dir = root / "big"
        build(batch_dir, args.jobs, args.fail_every)
        print(f"{args.jobs:,} jobs, {MODELS} models, 1 in {args.fail_every} failed")
        pages = []
        for name, tree in (("this tree", ROOT), (f"baseline {args.baseline}", base)):
            output = root / f"report-{'new' if tree == ROOT else 'base'}.html"
            seconds = write_report(tree, batch_dir, output)
            pages.append(output)
            print(f"  {name}: batch report {seconds:.1f} s, {output.stat().st_size / 1e6:.1f} MB")
        for name, shown in zip(("this tree", "baseline"), browser_seconds(pages), strict=True):
            text = f"{shown:.2f} s" if isinstance(shown, float) else shown
            print(f"  {name}: headless Chromium load {text}")
        tsv = root / "report-new-failures.tsv"
        if tsv.exists():
            print(f"  report-new-failures.tsv: {tsv.stat().st_size / 1e6:.1f} MB")
        for jobs in (int(n) for n in args.events.split(",")):
            on_disk, written, seconds = events_bytes(root, jobs)
            print(f"events of {jobs:,} jobs: {written / 1e6:.0f} MB written, "
                  f"{on_disk / 1e6:.1f} MB on disk after rotation ({seconds:.1f} s)")  # fmt: skip
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)],
                       check=False)  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
