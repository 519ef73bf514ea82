"""The live progress view on a terminal: ``LiveDisplay``, one of the two displays.

A rich ``Live`` view pinned to the bottom of the terminal: the batch line, a progress bar
(M/N, ETA, elapsed), the outcome counts, a line per model when there are several, and the
running jobs (with the step a multi-step job is on) and those waiting to be retried.
Failures are printed above it as they come, the first :data:`MAX_FAILURE_LINES` of them;
the view counts the rest. After an interrupt the ETA gives way to what the sweep is doing
(``stopping``, ``killing``), and a job killed or lost leaves the running list.
``batch.display.plain.make_display`` picks it when the output is a terminal; the plain-text
display, the shared text helpers and the final table live in ``batch.display``.

This module imports rich at the top: it is loaded only when a live view is made
(``make_display``) or ``batch.display.plain.LiveDisplay`` is asked for, so ``batch --help`` never
pays for rich (docs/design.md, startup time).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
from rich import progress as rp
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from batch.display.live_parts import (
    EtaColumn,
    Frame,
    ModelProgress,
    RunningRow,
    model_table,
    running_table,
)
from batch.display.text import (
    begin_text,
    end_lines,
    final_table,
    job_label,
    outcome_text,
    shown,
    skip_text,
)
from batch.durations import format_duration_hms
from batch.layout import SUMMARY_NAME
from batch.plan.jobs import FINAL_STATUSES, Job
from batch.stop_when.rules import STOPPED

#: Running jobs listed in the live view (fewer on a short terminal); the rest are summed
#: up as "+N more".
MAX_RUNNING_ROWS = 10
#: Failure lines printed above the view; later failures are only counted, so a sweep that
#: fails everywhere does not bury the scrollback (the summary lists them all).
MAX_FAILURE_LINES = 50


class LiveDisplay:
    """A rich live view: batch line, progress bar, counts, models, running jobs.

    Events only update plain fields under a lock (O(1) each). One drawing thread, ~4 times a
    second, prints the lines queued since the last tick above the view and redraws the
    view, so a burst of events costs the driver nothing but the bookkeeping (printing each
    line as it came would redraw the whole view per line; bench/display.py).
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
        self._header: Text | None = None
        self._running: dict[tuple[str, str, int], RunningRow] = {}
        self._counts = dict.fromkeys(sorted(FINAL_STATUSES), 0)
        self._models: dict[str, ModelProgress] = {}
        self._carried = 0
        self._waiting: tuple[str, float] | None = None
        #: Pool name -> its line (batch.execution.pools.pool_line).
        self._pools: dict[str, str] = {}
        self._failure_lines = 0
        self._more_failures = 0
        self._skipped = 0
        self._skip_lines = 0
        self._more_skips = 0
        self._pending_lines: list[Text] = []
        self._progress = rp.Progress(
            rp.TextColumn("sweep"),
            rp.BarColumn(),
            rp.MofNCompleteColumn(),
            rp.TaskProgressColumn(),
            EtaColumn(),
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
        self._task = self._progress.add_task("sweep", total=None, start=False, note=None)
        self._live = Live(Frame(self._view), console=console, auto_refresh=False, transient=False)
        self._stop = threading.Event()
        self._drawer = threading.Thread(target=self._draw_loop, name="display", daemon=True)

    # --- events (the driver's thread) ----------------------------------------------------

    def begin(self, jobs: Sequence[Job], *, batch_dir: Path, carried: int, to_run: int) -> None:
        header = Text(self._shown(begin_text(batch_dir, len(jobs), carried, to_run)), "bold")
        with self._lock:
            self._header = header
            for job in jobs:
                model = self._models.setdefault(job.model, ModelProgress())
                model.total += 1
                if job.status in FINAL_STATUSES:
                    self._counts[job.status] += 1
                    model.counts[job.status] += 1
            self._carried = carried
        self._progress.update(self._task, total=carried + to_run, completed=carried)
        self._progress.start_task(self._task)
        # A zero sample at the start, so the first finish already yields a rate.
        self._progress.advance(self._task, 0)
        self._live.start()
        self.refresh()
        self._drawer.start()

    def job_started(self, job: Job, attempt: int) -> None:
        row = RunningRow(job, self._shown(job_label(job)), attempt, self._clock())
        with self._lock:
            # Re-inserted so the rows stay in start order (longest running first).
            self._running.pop(job.key, None)
            self._running[job.key] = row

    def job_step(self, job: Job, step: str) -> None:
        """A multi-step job starts its step ``step``."""
        shown_step = self._shown(step)
        with self._lock:
            row = self._running.get(job.key)
            if row is not None:
                row.step = shown_step

    def job_finished(self, job: Job) -> None:
        with self._lock:
            self._running.pop(job.key, None)
        self._finished(job)

    def job_retrying(self, job: Job, delay: float, reason: str) -> None:
        now = self._clock()
        with self._lock:
            row = self._running.get(job.key)
            if row is None:
                row = RunningRow(job, self._shown(job_label(job)), job.attempts, now)
                self._running[job.key] = row
            row.retry = (now + delay, self._shown(reason))
            row.step = None

    def job_unstarted(self, job: Job) -> None:
        with self._lock:
            self._running.pop(job.key, None)

    def job_stopped(self, job: Job, reason: str) -> None:
        """The job stopped without an outcome (killed, lost): off the running list."""
        with self._lock:
            self._running.pop(job.key, None)
        self._queue(f"{job_label(job)}: {reason}; left for --resume", style="yellow")

    def job_skipped(self, job: Job, reason: str) -> None:
        """A policy did not start ``job`` (``skipped``, or an in-run retry not started):
        a line above the view, and the bar moves, so a sweep with skips ends at 100 %."""
        with self._lock:
            self._running.pop(job.key, None)
        if job.status in FINAL_STATUSES:
            self._finished(job, f"; not retried: {reason}")
            return
        with self._lock:
            self._skipped += 1
            progress = self._models.setdefault(job.model, ModelProgress())
            progress.skipped += 1
            progress.stopped = progress.stopped or reason.startswith(STOPPED)
            listed = self._skip_lines < MAX_FAILURE_LINES
            if listed:
                self._skip_lines += 1
            else:
                self._more_skips += 1
        self._progress.advance(self._task, 1)
        if listed:
            self._queue(skip_text(job, reason), style="yellow")

    def pool(self, name: str, line: str) -> None:
        """A pool's limits, users and refusals: a line of the view, kept up to date."""
        with self._lock:
            self._pools[name] = line

    def model_limit(self, model: str, current: int, maximum: int) -> None:
        """``model`` may now run ``current`` jobs at once, of at most ``maximum``."""
        with self._lock:
            self._models.setdefault(model, ModelProgress()).limit = (current, maximum)

    def stopping(self, *, killing: bool = False) -> None:
        """No new job starts (first interrupt, or a failure); ``killing``: the running
        ones are being killed (second interrupt). Jobs waiting for a retry are done."""
        with self._lock:
            # The scheduler drops their retry when it stops: each ends as it last did.
            waiting = [row.job for row in self._running.values() if row.retry is not None]
            for job in waiting:
                del self._running[job.key]
        for job in waiting:
            self._finished(job)
        # Last, so no frame says "stopping" while it still lists a retry that will not come.
        self._progress.update(self._task, note="killing" if killing else "stopping")

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

    def end(
        self,
        jobs: Sequence[Job],
        *,
        state: str,
        elapsed: float,
        summary_path: Path,
        next_steps: Sequence[str] = (),
    ) -> None:
        if state != "complete":
            self._progress.update(self._task, note=state)
        with self._lock:
            self._waiting = None
            # Whatever the driver did not report: nothing runs any more.
            self._running.clear()
        self.close()
        self._console.print(final_table(jobs, redact=self._shown))
        lines = end_lines(state, elapsed, summary_path, jobs, next_steps)
        # soft_wrap: the terminal folds a long line, rich inserts no newline, so a command
        # the user is told to run is copied whole (docs/cli.md, "What it prints").
        self._console.print(Text("\n".join(self._shown(line) for line in lines)), soft_wrap=True)

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
            self._console.print(Group(*lines), soft_wrap=True)
        self._live.refresh()

    # --- bookkeeping ---------------------------------------------------------------------

    def _finished(self, job: Job, note: str = "") -> None:
        """Count ``job``'s outcome; a failure gets a line above the view (``note`` after
        it), while they fit."""
        if job.status not in FINAL_STATUSES:
            return  # a lost job whose rerun the stop dropped: it has no outcome
        with self._lock:
            self._counts[job.status] += 1
            self._models.setdefault(job.model, ModelProgress()).counts[job.status] += 1
        self._progress.advance(self._task, 1)
        if job.status == "passed":
            return  # passes only move the bar
        with self._lock:
            listed = self._failure_lines < MAX_FAILURE_LINES
            if listed:
                self._failure_lines += 1
            else:
                self._more_failures += 1
        if listed:
            duration = format_duration_hms(job.duration_seconds)
            self._queue(
                f"{job_label(job)}: {outcome_text(job)} in {duration}{note}",
                style="red" if job.status == "failed" else "magenta",
            )

    def _draw_loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.refresh()

    def _queue(self, text: str, *, style: str) -> None:
        # Text, not markup, so "[...]" in a case name is shown as written.
        line = Text(self._shown(text), style=style)
        with self._lock:
            self._pending_lines.append(line)

    # --- the view (the drawing thread) ---------------------------------------------------

    def _view(self) -> RenderableType:
        now = self._clock()
        with self._lock:
            header = self._header
            counts = dict(self._counts)
            rows = [attrs.evolve(row) for row in self._running.values()]
            models = {
                name: attrs.evolve(m, counts=dict(m.counts)) for name, m in self._models.items()
            }
            waiting = self._waiting
            pools = list(self._pools.values())
            carried = self._carried
            more_failures = self._more_failures
            skipped, more_skips = self._skipped, self._more_skips

        running = [row for row in rows if row.retry is None]
        retrying = [row for row in rows if row.retry is not None]
        parts: list[RenderableType] = []
        if more_failures:
            # Right under the last failure line printed, where a reader looks for the next.
            parts.append(
                Text(
                    f"\N{HORIZONTAL ELLIPSIS} and {more_failures} more failures, "
                    f"see {SUMMARY_NAME}",
                    style="red",
                )
            )
        if more_skips:
            parts.append(
                Text(f"\N{HORIZONTAL ELLIPSIS} and {more_skips} more skipped, see {SUMMARY_NAME}")
            )
        if header is not None:
            parts.append(header)
        line = Text.assemble(
            (f"passed {counts['passed']}", "green"),
            (f"   failed {counts['failed']}", "red"),
            (f"   error {counts['error']}", "magenta"),
            f"   running {len(running)}",
        )
        if skipped:
            line.append(f"   skipped {skipped}", style="yellow")
        if retrying:
            line.append(f"   waiting to retry {len(retrying)}", style="dim")
        if carried:
            line.append(f"   ({carried} carried over)", style="dim")
        parts += [self._progress, line]
        if len(models) > 1:
            parts.append(model_table(models, rows, self._shown))
        parts += [Text(f"pool {self._shown(line)}", style="cyan") for line in pools]
        if waiting is not None:
            reason, since = waiting
            waited = format_duration_hms(now - since)
            parts.append(Text(f"waiting {waited}: {reason}", style="yellow"))
        if rows:
            # What is left of the terminal below the rest; rich crops a view taller than
            # the screen from the bottom, so the batch line and the bar always stay.
            used = sum(self._height(part) for part in parts)
            room = self._console.height - used - 2
            parts.append(
                running_table(running + retrying, now, max(1, min(MAX_RUNNING_ROWS, room)))
            )
        return Group(*parts)

    def _height(self, part: RenderableType) -> int:
        """Lines ``part`` takes in the view (a long batch dir wraps)."""
        if isinstance(part, Table):
            return part.row_count + 1
        if isinstance(part, Text):
            return len(part.wrap(self._console, self._console.width))
        return 1
