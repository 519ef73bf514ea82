"""The live display's cost to the driver: job events through ``LiveDisplay``, against a
live view that prints each failure line as it comes.

    .venv/bin/python bench/display.py [--jobs 2000] [--repeat 3]

Every job is one ``job_started`` and one ``job_finished`` event, half of them failures, sent
as fast as the driver could (no job runs). ``LiveDisplay`` only updates counts under a lock
and queues lines; its drawing thread (4 frames a second, as in a real sweep) prints them.
The baseline is the straightforward live view: the same rich ``Live`` with a progress bar,
where each event advances the bar and each failure is ``console.print``-ed at once, which
redraws the whole view per line. Both draw to a terminal of 100 by 30 (an in-memory one, so
the figure is the display's own work, not the terminal's).

Each repetition times both; the figure is the median of each, and the last line is::

    display: 4000 events, LiveDisplay 0.045 s (11.4 us/event), baseline print-per-line
    6.373 s (1593 us/event), ratio 140x (goal: < 0.5 s per 2,000 jobs and >= 10x, met)

Goal: the 4,000 events of 2,000 jobs under 0.5 s in ``LiveDisplay`` (the bound of the
timed unit test this replaces), and at least 10 times cheaper than the baseline. Exits 1 if a
display did not count every job.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

from rich import progress as rp
from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from batch.display.live import LiveDisplay
from batch.display.text import job_label, outcome_text
from batch.plan.jobs import Job

GOAL_SECONDS = 0.5
GOAL_RATIO = 10.0


def terminal(out: io.StringIO) -> Console:
    return Console(file=out, force_terminal=True, width=100, height=30, color_system="truecolor")


def plan(n: int) -> list[Job]:
    return [Job(case=f"case{i:05d}", model=f"m{i % 4}") for i in range(n)]


def finish(job: Job, i: int) -> None:
    job.status = "failed" if i % 2 == 0 else "passed"
    job.duration_seconds, job.failure_category = 1.0, "model_wrong"


def time_live_display(n: int) -> float:
    jobs = plan(n)
    out = io.StringIO()
    display = LiveDisplay(terminal(out))
    display.begin(jobs, batch_dir=Path("runs/bench"), carried=0, to_run=n)
    started = time.perf_counter()
    for i, job in enumerate(jobs):
        display.job_started(job, 1)
        finish(job, i)
        display.job_finished(job)
    spent = time.perf_counter() - started
    display.close()
    if f"{n}/{n}" not in out.getvalue():
        raise SystemExit(f"LiveDisplay did not count all {n} jobs")
    return spent


def time_baseline(n: int) -> float:
    """Print each failure at once under the live view (each print redraws the view)."""
    jobs = plan(n)
    console = terminal(io.StringIO())
    progress = rp.Progress(
        rp.BarColumn(), rp.MofNCompleteColumn(), rp.TimeRemainingColumn(), console=console
    )
    task = progress.add_task("sweep", total=n)
    counts = {"passed": 0, "failed": 0}
    running: dict[tuple[str, str], str] = {}

    def view() -> Group:
        line = Text(f"passed {counts['passed']}   failed {counts['failed']}")
        rows = [Text(label) for label in list(running.values())[:10]]
        return Group(progress, line, *rows)

    live = Live(get_renderable=view, console=console, auto_refresh=True, refresh_per_second=4)
    live.start()
    started = time.perf_counter()
    for i, job in enumerate(jobs):
        running[job.key] = job_label(job)
        finish(job, i)
        del running[job.key]
        counts[job.status] += 1
        progress.advance(task, 1)
        if job.status != "passed":
            console.print(Text(f"{job_label(job)}: {outcome_text(job)} in 1.0s"))
    spent = time.perf_counter() - started
    live.stop()
    if sum(counts.values()) != n:
        raise SystemExit(f"the baseline did not count all {n} jobs")
    return spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    ours, base = [], []
    for n in range(1, args.repeat + 1):
        ours.append(time_live_display(args.jobs))
        base.append(time_baseline(args.jobs))
        print(f"run {n}: LiveDisplay {ours[-1]:.3f} s, baseline {base[-1]:.3f} s")
    events = 2 * args.jobs
    mine, theirs = statistics.median(ours), statistics.median(base)
    ratio = theirs / mine
    met = mine < GOAL_SECONDS * args.jobs / 2000 and ratio >= GOAL_RATIO
    print(
        f"display: {events} events, LiveDisplay {mine:.3f} s ({mine / events * 1e6:.1f} us/event), "
        f"baseline print-per-line {theirs:.3f} s ({theirs / events * 1e6:.0f} us/event), "
        f"ratio {ratio:.0f}x (goal: < {GOAL_SECONDS} s per 2,000 jobs and >= {GOAL_RATIO:.0f}x, "
        f"{'met' if met else 'NOT met'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
