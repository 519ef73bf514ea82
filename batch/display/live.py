"""The live progress view on a terminal: ``LiveDisplay``, one of the two displays.

A rich ``Live`` view holding a progress bar (M/N, ETA, elapsed), the outcome counts and the
running jobs, with failures printed above it as they come. ``batch.display.plain.make_display``
picks it when the output is a terminal; the plain-text display, the shared text helpers and
the final table live in ``batch.display``.

This module imports rich at the top: it is loaded only when a live view is made
(``make_display``) or ``batch.display.plain.LiveDisplay`` is asked for, so ``batch --help`` never
pays for rich (docs/design.md, startup time).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from itertools import islice
from pathlib import Path

import attrs
from rich import progress as rp
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from batch.display.text import begin_text, end_lines, final_table, job_label, outcome_text, shown
from batch.durations import format_duration_hms
from batch.plan.jobs import FINAL_STATUSES, Job

#: Running jobs listed in the live view; the rest are summed up as "+N more".
MAX_RUNNING_ROWS = 10


@attrs.define
class _Running:
    label: str
    attempt: int
    started: float
    #: Set while the job waits to be retried: (clock time of the retry, reason).
    retry: tuple[float, str] | None = None


class LiveDisplay:
    """A rich live view: progress bar (M/N, ETA, elapsed), counts, running jobs.

    Events only update plain fields under a lock (O(1) each). One drawing thread, ~4 times a
    second, prints the finish lines queued since the last tick above the view and redraws
    the view, so a burst of events costs the driver nothing but the bookkeeping (printing
    each line as it came would redraw the whole view per line, ~1.5 ms each).
    """

    def __init__(
        self,
        console: Console,
        *,
        clock: Callable[[], float] = time.monotonic,
        redact: Callable[[str], str] = lambda s: s,
        refresh_per_second: float = 4.0,
    ) -> None:
        self._console = console
        self._clock = clock
        self._shown = shown(redact)
        self._interval = 1 / refresh_per_second
        self._lock = threading.Lock()
        self._running: dict[tuple[str, str], _Running] = {}
        self._counts = dict.fromkeys(sorted(FINAL_STATUSES), 0)
        self._carried = 0
        self._waiting: tuple[str, float] | None = None
        self._pending_lines: list[Text] = []
        self._progress = rp.Progress(
            rp.TextColumn("sweep"),
            rp.BarColumn(),
            rp.MofNCompleteColumn(),
            rp.TaskProgressColumn(),
            rp.TextColumn("ETA"),
            rp.TimeRemainingColumn(),
            rp.TextColumn("elapsed"),
            rp.TimeElapsedColumn(),
            console=console,
            get_time=clock,
            auto_refresh=False,
            # Jobs take minutes to hours: rich's default 30 s window would hold too few
            # finishes for an ETA. The sample deque is capped at 1,000, so the rate is over
            # the last 1,000 finishes (or the whole run), measured from begin().
            speed_estimate_period=7 * 24 * 3600,
        )
        self._task = self._progress.add_task("sweep", total=None, start=False)
        self._live = Live(
            console=console, get_renderable=self._view, auto_refresh=False, transient=False
        )
        self._stop = threading.Event()
        self._drawer = threading.Thread(target=self._draw_loop, name="display", daemon=True)

    def begin(self, jobs: Sequence[Job], *, batch_dir: Path, carried: int, to_run: int) -> None:
        with self._lock:
            for job in jobs:
                if job.status in FINAL_STATUSES:
                    self._counts[job.status] += 1
            self._carried = carried
        self._queue(begin_text(batch_dir, len(jobs), carried, to_run), style="bold")
        self._progress.update(self._task, total=carried + to_run, completed=carried)
        self._progress.start_task(self._task)
        # A zero sample at the start, so the first finish already yields a rate.
        self._progress.advance(self._task, 0)
        self._live.start()
        self.refresh()
        self._drawer.start()

    def job_started(self, job: Job, attempt: int) -> None:
        row = _Running(self._shown(job_label(job)), attempt, self._clock())
        with self._lock:
            # Re-inserted so the rows stay in start order (longest running first).
            self._running.pop(job.key, None)
            self._running[job.key] = row

    def job_finished(self, job: Job) -> None:
        final = job.status in FINAL_STATUSES
        with self._lock:
            self._running.pop(job.key, None)
            if final:
                self._counts[job.status] += 1
        if final:
            self._progress.advance(self._task, 1)
        if job.status != "passed":
            # Failures stay in the scrollback; passes only move the bar.
            duration = format_duration_hms(job.duration_seconds)
            self._queue(
                f"{job_label(job)}: {outcome_text(job)} in {duration}",
                style="red" if job.status == "failed" else "magenta",
            )

    def job_retrying(self, job: Job, delay: float, reason: str) -> None:
        now = self._clock()
        with self._lock:
            row = self._running.get(job.key)
            if row is None:
                row = _Running(self._shown(job_label(job)), job.attempts, now)
                self._running[job.key] = row
            row.retry = (now + delay, self._shown(reason))

    def waiting(self, reason: str | None) -> None:
        shown = None if reason is None else self._shown(reason)
        with self._lock:
            if shown is None:
                self._waiting = None
            elif self._waiting is None or self._waiting[0] != shown:
                self._waiting = (shown, self._clock())

    def message(self, text: str) -> None:
        # Messages are rare and urgent ("Ctrl-C again to kill"): shown now, not next tick.
        self._queue(text, style="yellow")
        self.refresh()

    def end(self, jobs: Sequence[Job], *, state: str, elapsed: float, summary_path: Path) -> None:
        with self._lock:
            self._waiting = None
        self.close()
        self._console.print(final_table(jobs, redact=self._shown))
        lines = end_lines(state, elapsed, summary_path, jobs)
        self._console.print(Text("\n".join(self._shown(line) for line in lines)))

    def close(self) -> None:
        """Stop drawing, leaving the last frame on screen; idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._drawer.is_alive():
            self._drawer.join()
        if self._live.is_started:
            self.refresh()
            self._live.stop()

    def refresh(self) -> None:
        """Print queued lines above the view and redraw it (the drawing thread's tick)."""
        with self._lock:
            lines, self._pending_lines = self._pending_lines, []
        if lines:
            self._console.print(Group(*lines))
        self._live.refresh()

    def _draw_loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.refresh()

    def _queue(self, text: str, *, style: str) -> None:
        # Text, not markup, so "[...]" in a case name is shown as written.
        line = Text(self._shown(text), style=style)
        with self._lock:
            self._pending_lines.append(line)

    def _view(self) -> RenderableType:
        now = self._clock()
        with self._lock:
            counts = dict(self._counts)
            rows = [attrs.evolve(row) for row in islice(self._running.values(), MAX_RUNNING_ROWS)]
            n_running = len(self._running)
            waiting = self._waiting
            carried = self._carried

        line = Text.assemble(
            (f"passed {counts['passed']}", "green"),
            (f"   failed {counts['failed']}", "red"),
            (f"   error {counts['error']}", "magenta"),
            f"   running {n_running}",
        )
        if carried:
            line.append(f"   ({carried} carried over)", style="dim")
        parts: list[RenderableType] = [self._progress, line]
        if waiting is not None:
            reason, since = waiting
            waited = format_duration_hms(now - since)
            parts.append(Text(f"waiting {waited}: {reason}", style="yellow"))
        if rows:
            table = Table(box=None, padding=(0, 2, 0, 0), show_edge=False)
            table.add_column("running")
            table.add_column("attempt", justify="right")
            table.add_column("time", justify="right")
            table.add_column("")
            for row in rows:
                # Text cells: a "[...]" in a name is not markup.
                label, attempt = Text(row.label), str(row.attempt)
                if row.retry is None:
                    table.add_row(label, attempt, format_duration_hms(now - row.started))
                else:
                    at, reason = row.retry
                    wait = f"retry in {format_duration_hms(max(at - now, 0.0))}"
                    table.add_row(label, attempt, wait, Text(reason), style="dim")
            if n_running > len(rows):
                table.add_row(f"+{n_running - len(rows)} more", style="dim")
            parts.append(table)
        return Group(*parts)
