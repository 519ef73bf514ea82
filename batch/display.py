"""The progress display: the one object that prints while a sweep runs.

The driver reports events (begin, job started/finished/retrying, waiting, messages, end) to
a ``Display``; nothing else in the driver prints. A terminal gets a rich live view
(``LiveDisplay``: progress bar with ETA, counts, running jobs); anything else gets one plain
line per event (``PlainDisplay``), so logs and CI output stay greppable. Both end with the
same per-model table. Every string shown passes through ``redact`` first.

rich is imported inside the functions that use it: ``batch --help`` imports this module and
``rich.console`` alone costs ~0.1 s (DESIGN §10).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TextIO

import attrs

from batch.jobs import FINAL_STATUSES, Job

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.table import Table
    from rich.text import Text

#: Running jobs listed in the live view; the rest are summed up as "+N more".
MAX_RUNNING_ROWS = 10
#: Columns of the final table, in order; "not run" appears only when some job has none.
TABLE_STATUSES = ("passed", "failed", "error", "skipped")


class Display(Protocol):
    def begin(self, jobs: Sequence[Job], *, batch_dir: Path, carried: int, to_run: int) -> None:
        """The sweep starts: ``carried`` jobs keep recorded results, ``to_run`` will run."""

    def job_started(self, job: Job, attempt: int) -> None: ...

    def job_finished(self, job: Job) -> None:
        """``job.status`` is now its outcome (passed/failed/error)."""

    def job_retrying(self, job: Job, delay: float, reason: str) -> None: ...

    def waiting(self, reason: str | None) -> None:
        """Nothing starts until the reason clears (memory gate, model switch); None clears."""

    def message(self, text: str) -> None:
        """A warning or note for the user, e.g. "Ctrl-C again to kill"."""

    def end(self, jobs: Sequence[Job], *, state: str, elapsed: float, summary_path: Path) -> None:
        """The sweep is over: print the final table. Also closes the display."""

    def close(self) -> None:
        """Give the terminal back (idempotent); call in ``finally`` in case ``end`` never runs."""


# --- text shared by both displays (pure) ---------------------------------------------------


def format_duration(seconds: float | None) -> str:
    """``0.4s``, ``42s``, ``1m02s``, ``2h03m04s``; ``?`` when unknown."""
    if seconds is None:
        return "?"
    if seconds < 10:
        return f"{max(seconds, 0.0):.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def job_label(job: Job) -> str:
    return f"{job.case} \N{MULTIPLICATION SIGN} {job.model}"


def outcome_text(job: Job) -> str:
    """``PASSED``, ``FAILED (category)``, ``ERROR (category)``."""
    text = job.status.upper()
    if job.status != "passed" and job.failure_category:
        text += f" ({job.failure_category})"
    return text


def begin_text(batch_dir: Path, n_jobs: int, carried: int, to_run: int) -> str:
    return f"Batch {batch_dir}: {n_jobs} jobs, {carried} carried over, {to_run} to run"


def end_text(state: str, elapsed: float, summary_path: Path) -> str:
    return f"Sweep {state} after {format_duration(elapsed)}. Summary: {summary_path}"


def counts_by_model(jobs: Iterable[Job]) -> dict[str, dict[str, int]]:
    """Jobs per status for each model, models in sweep order; "not run" = pending/running."""
    counts: dict[str, dict[str, int]] = {}
    for job in jobs:
        row = counts.setdefault(job.model, dict.fromkeys((*TABLE_STATUSES, "not run"), 0))
        row[job.status if job.status in TABLE_STATUSES else "not run"] += 1
    return counts


def final_table(jobs: Sequence[Job], *, redact: Callable[[str], str]) -> Table:
    """Per-model counts and a total row, as a rich Table."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    by_model = counts_by_model(jobs)
    statuses = list(TABLE_STATUSES)
    if any(row["not run"] for row in by_model.values()):
        statuses.append("not run")
    table = Table(box=box.SIMPLE_HEAD, show_footer=True)
    totals = {status: sum(row[status] for row in by_model.values()) for status in statuses}
    table.add_column("model", footer="total")
    for status in statuses:
        table.add_column(status, footer=str(totals[status]), justify="right")
    table.add_column("jobs", footer=str(len(jobs)), justify="right")
    for model, row in by_model.items():
        cells = [str(row[status]) for status in statuses]
        table.add_row(Text(redact(model)), *cells, str(sum(row.values())))
    return table


# --- plain: one line per event -------------------------------------------------------------


class PlainDisplay:
    """One timestamped line per event, for logs, pipes and ``--no-progress``."""

    def __init__(
        self,
        stream: TextIO,
        *,
        now: Callable[[], datetime] = datetime.now,
        redact: Callable[[str], str] = lambda s: s,
    ) -> None:
        self._stream = stream
        self._now = now
        self._redact = redact
        self._waiting: str | None = None

    def _line(self, text: str) -> None:
        self._stream.write(f"[{self._now():%H:%M:%S}] {self._redact(text)}\n")
        self._stream.flush()

    def begin(self, jobs: Sequence[Job], *, batch_dir: Path, carried: int, to_run: int) -> None:
        self._line(begin_text(batch_dir, len(jobs), carried, to_run))

    def job_started(self, job: Job, attempt: int) -> None:
        self._line(f"START {job_label(job)} (attempt {attempt})")

    def job_finished(self, job: Job) -> None:
        duration = format_duration(job.duration_seconds)
        self._line(f"DONE {job_label(job)}: {outcome_text(job)} in {duration}")

    def job_retrying(self, job: Job, delay: float, reason: str) -> None:
        self._line(f"RETRY {job_label(job)} in {format_duration(delay)}: {reason}")

    def waiting(self, reason: str | None) -> None:
        # The driver may report the same wait on every poll; a log needs it once.
        if reason is not None and reason != self._waiting:
            self._line(f"WAIT {reason}")
        self._waiting = reason

    def message(self, text: str) -> None:
        self._line(text)

    def end(self, jobs: Sequence[Job], *, state: str, elapsed: float, summary_path: Path) -> None:
        from rich.console import Console

        console = Console(
            file=self._stream, force_terminal=False, no_color=True, highlight=False, emoji=False
        )
        console.print()
        console.print(final_table(jobs, redact=self._redact))
        console.print(self._redact(end_text(state, elapsed, summary_path)), markup=False)
        self._stream.flush()

    def close(self) -> None:
        """Nothing to give back: plain output holds no terminal state."""


# --- live: rich view on a terminal ---------------------------------------------------------


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
        from rich import progress as rp
        from rich.live import Live

        self._console = console
        self._clock = clock
        self._redact = redact
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
        row = _Running(self._redact(job_label(job)), attempt, self._clock())
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
            duration = format_duration(job.duration_seconds)
            self._queue(
                f"{job_label(job)}: {outcome_text(job)} in {duration}",
                style="red" if job.status == "failed" else "magenta",
            )

    def job_retrying(self, job: Job, delay: float, reason: str) -> None:
        now = self._clock()
        with self._lock:
            row = self._running.get(job.key)
            if row is None:
                row = _Running(self._redact(job_label(job)), job.attempts, now)
                self._running[job.key] = row
            row.retry = (now + delay, self._redact(reason))

    def waiting(self, reason: str | None) -> None:
        shown = None if reason is None else self._redact(reason)
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
        from rich.text import Text

        with self._lock:
            self._waiting = None
        self.close()
        self._console.print(final_table(jobs, redact=self._redact))
        self._console.print(Text(self._redact(end_text(state, elapsed, summary_path))))

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
            from rich.console import Group

            self._console.print(Group(*lines))
        self._live.refresh()

    def _draw_loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.refresh()

    def _queue(self, text: str, *, style: str) -> None:
        from rich.text import Text

        # Text, not markup, so "[...]" in a case name is shown as written.
        line = Text(self._redact(text), style=style)
        with self._lock:
            self._pending_lines.append(line)

    def _view(self) -> RenderableType:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

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
            parts.append(Text(f"waiting {format_duration(now - since)}: {reason}", style="yellow"))
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
                    table.add_row(label, attempt, format_duration(now - row.started))
                else:
                    at, reason = row.retry
                    wait = f"retry in {format_duration(max(at - now, 0.0))}"
                    table.add_row(label, attempt, wait, Text(reason), style="dim")
            if n_running > len(rows):
                table.add_row(f"+{n_running - len(rows)} more", style="dim")
            parts.append(table)
        return Group(*parts)


def make_display(
    *,
    console: Console | None = None,
    stream: TextIO | None = None,
    progress: bool = True,
    clock: Callable[[], float] = time.monotonic,
    redact: Callable[[str], str] = lambda s: s,
    now: Callable[[], datetime] = datetime.now,
) -> Display:
    """The live view when ``progress`` and the output is a terminal, else plain lines.

    Output goes to ``console`` if given, else ``stream`` (default stdout). ``clock`` times
    jobs and the ETA; ``now`` is the wall clock for plain lines' timestamps.
    """
    if console is not None:
        is_terminal = console.is_terminal and not console.is_dumb_terminal
        out = console.file
    else:
        out = stream if stream is not None else sys.stdout
        is_terminal = _isatty(out) and os.environ.get("TERM", "") not in ("dumb", "unknown")
    if not (progress and is_terminal):
        return PlainDisplay(out, now=now, redact=redact)
    if console is None:
        from rich.console import Console

        console = Console(file=out)
    return LiveDisplay(console, clock=clock, redact=redact)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or file-like without isatty
        return False
