"""The progress display: the one object that prints while a sweep runs.

The driver reports events (begin, job started/step/finished/retrying/stopped, stopping,
waiting, messages, end) to a ``Display``; nothing else in the driver prints. A terminal
gets a rich live view (``LiveDisplay`` in ``batch.display.live``: progress bar with ETA,
counts, models, running jobs); anything else gets one plain line per event and a progress
line every minute (``PlainDisplay``, here), so logs and CI output stay greppable. Both end
with the same per-model table and closing lines. Every string shown passes through
``redact``, then ``batch.printable.one_line`` (:func:`shown`). This module holds the
``Display`` protocol, ``make_display`` (which picks one), ``PlainDisplay`` and the text both
displays share.

rich is imported inside the functions that use it, and ``batch.display.live`` (which imports
rich at the top) only when a live view is made: ``batch --help`` imports this module and
importing ``rich.console`` is a large share of start-up (docs/design.md, startup time;
bench/overhead.py). The plain display writes
its final table as text (``batch.display.text.table_text``), so a sweep run without a
terminal imports no rich at all.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TextIO, cast

from batch.display.text import (
    begin_text,
    end_lines,
    final_table,
    job_label,
    outcome_text,
    shown,
    skip_text,
    table_text,
)
from batch.durations import format_duration_hms
from batch.plan.jobs import FINAL_STATUSES, Job
from batch.stop_when.rules import STOPPED

if TYPE_CHECKING:
    from rich.console import Console

#: The width the plain display gives rich for the final table: wider than any table.
UNWRAPPED = 1 << 16


class Display(Protocol):
    def begin(self, jobs: Sequence[Job], *, batch_dir: Path, carried: int, to_run: int) -> None:
        """The sweep starts: ``carried`` jobs keep recorded results, ``to_run`` will run."""

    def job_started(self, job: Job, attempt: int) -> None: ...

    def job_finished(self, job: Job) -> None:
        """``job.status`` is now its outcome (passed/failed/error)."""

    def job_step(self, job: Job, step: str) -> None:
        """A multi-step job starts its step ``step`` (the local executor reports steps)."""

    def job_retrying(self, job: Job, delay: float, reason: str) -> None: ...

    def job_stopped(self, job: Job, reason: str) -> None:
        """The job stopped without an outcome (killed, lost): no record, resume runs it."""

    def job_unstarted(self, job: Job) -> None:
        """The job did not start after all (the driver's own limits): it waits its turn
        again, and the driver says why once, as a message."""

    def job_skipped(self, job: Job, reason: str) -> None:
        """A policy (halt, breaker, budget, deadline) did not start ``job``: ``skipped``, no
        record, resume runs it; or, for a job with an outcome, its in-run retry is not
        started and the outcome stands. Either way the job is done for this invocation."""

    def stopping(self, *, killing: bool = False) -> None:
        """No new job starts (interrupt, failure); ``killing``: running ones are killed."""

    def waiting(self, reason: str | None) -> None:
        """Nothing starts until the reason clears (memory gate, model switch); None clears."""

    def message(self, text: str) -> None:
        """A warning or note for the user, e.g. "Ctrl-C again to kill"."""

    def model_limit(self, model: str, current: int, maximum: int) -> None:
        """An adaptive model may now run ``current`` of at most ``maximum`` jobs at once."""

    def pool(self, name: str, line: str) -> None:
        """A pool the sweep shares with others: ``line`` says its limits, users, refusals."""

    def end(
        self,
        jobs: Sequence[Job],
        *,
        state: str,
        elapsed: float,
        summary_path: Path,
        next_steps: Sequence[str] = (),
    ) -> None:
        """The sweep is over: print the final table, the closing line and ``next_steps``
        (what happened, what to do next). Also closes the display."""

    def close(self) -> None:
        """Give the terminal back (idempotent); call in ``finally`` in case ``end`` never runs."""


# --- plain: one line per event -------------------------------------------------------------


def _silenced(stream: TextIO) -> TextIO:
    """A sink in place of a stream whose reader is gone.

    Its file descriptor is pointed at /dev/null as well, so nothing else that writes to it
    (the interpreter's flush at exit included) fails on the broken pipe either.
    """
    devnull = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    with contextlib.suppress(AttributeError, OSError, ValueError):
        os.dup2(devnull.fileno(), stream.fileno())
    return devnull


#: Seconds between two progress lines of the plain display.
PROGRESS_EVERY = 60.0


def progress_text(done: int, total: int, eta: float | None) -> str:
    """``PROGRESS 37/120 jobs (30%), ETA 1:02:03``; the ETA unknown before a finish."""
    percent = 100 * done // total if total else 100
    when = "unknown" if eta is None else format_duration_hms(eta)
    return f"PROGRESS {done}/{total} jobs ({percent}%), ETA {when}"


class PlainDisplay:
    """One timestamped line per event, for logs, pipes and ``--no-progress``, and a
    progress line (count, percentage, ETA) every ``progress_every`` seconds.

    The progress line comes from a ticker thread that looks at ``clock`` every
    ``tick_every`` seconds (None: no thread; the caller calls :meth:`tick`); a night's
    sweep whose jobs run an hour each still shows, in its log, that it is alive.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        now: Callable[[], datetime] = datetime.now,
        redact: Callable[[str], str] = lambda s: s,
        clock: Callable[[], float] = time.monotonic,
        progress_every: float = PROGRESS_EVERY,
        tick_every: float | None = 1.0,
    ) -> None:
        self._stream = stream
        self._now = now
        self._shown = shown(redact)
        self._waiting: str | None = None
        #: Models whose stop_when SKIP line was written (batch.stop_when.rules.STOPPED).
        self._stopped_models: set[str] = set()
        self._clock = clock
        self._progress_every = progress_every
        self._tick_every = tick_every
        # The ticker thread and the driver both print.
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._total = 0
        self._done = 0
        #: Finishes of this invocation, and when it began: the rate behind the ETA.
        self._finished = 0
        self._began = 0.0
        self._last_progress: float | None = None

    def _line(self, text: str) -> None:
        # The date too: a log of a sweep that runs over midnight, or is read days later.
        self._write(f"[{self._now():%Y-%m-%d %H:%M:%S}] {self._shown(text)}\n")

    def _write(self, text: str) -> None:
        with self._lock:
            try:
                self._stream.write(text)
                self._stream.flush()
            except (BrokenPipeError, ValueError):
                # The reader went away (`| head`, a killed `tee`, a closed ssh pipe). Progress
                # lines are a courtesy; the sweep and its ledger go on without them.
                self._stream = _silenced(self._stream)

    def begin(self, jobs: Sequence[Job], *, batch_dir: Path, carried: int, to_run: int) -> None:
        self._line(begin_text(batch_dir, len(jobs), carried, to_run))
        with self._lock:
            self._total, self._done = carried + to_run, carried
            self._began = self._last_progress = self._clock()
        if self._tick_every is not None and self._ticker is None:
            self._ticker = threading.Thread(target=self._tick_loop, name="progress", daemon=True)
            self._ticker.start()

    def job_started(self, job: Job, attempt: int) -> None:
        self._line(f"START {job_label(job)} (attempt {attempt})")

    def job_finished(self, job: Job) -> None:
        duration = format_duration_hms(job.duration_seconds)
        self._line(f"DONE {job_label(job)}: {outcome_text(job)} in {duration}")
        if job.status in FINAL_STATUSES:
            with self._lock:
                self._done += 1
                self._finished += 1

    def job_retrying(self, job: Job, delay: float, reason: str) -> None:
        self._line(f"RETRY {job_label(job)} in {format_duration_hms(delay)}: {reason}")

    def job_step(self, job: Job, step: str) -> None:
        """Not logged: a log line per step would double a multi-step sweep's log."""

    def job_stopped(self, job: Job, reason: str) -> None:
        self._line(f"{job_label(job)}: {reason}; left for --resume")

    def job_unstarted(self, job: Job) -> None:
        """Its START line stands; the next one says it started after all."""

    def job_skipped(self, job: Job, reason: str) -> None:
        final = job.status in FINAL_STATUSES
        # A stop leaves all of a model's remaining cases: its first SKIP line says why and
        # how many follow; the closing lines say it again (9,700 lines would say nothing more).
        stop = not final and reason.startswith(STOPPED)
        if not stop or job.model not in self._stopped_models:
            if stop:
                self._stopped_models.add(job.model)
                reason += "; the model's other jobs left by the stop are skipped without a line"
            self._line(("DONE " if final else "SKIP ") + skip_text(job, reason))
        with self._lock:
            self._done += 1
            self._finished += final

    def stopping(self, *, killing: bool = False) -> None:
        """The driver's message about the interrupt is the log's line."""

    def waiting(self, reason: str | None) -> None:
        # The driver may report the same wait on every poll; a log needs it once.
        if reason is not None and reason != self._waiting:
            self._line(f"WAIT {reason}")
        self._waiting = reason

    def message(self, text: str) -> None:
        self._line(text)

    def model_limit(self, model: str, current: int, maximum: int) -> None:
        self._line(f"LIMIT {model}: {current}/{maximum} at once")

    def pool(self, name: str, line: str) -> None:
        self._line(f"POOL {line}")

    def tick(self) -> None:
        """Print the progress line if ``progress_every`` has passed since the last one."""
        with self._lock:
            now = self._clock()
            if self._last_progress is None or now - self._last_progress < self._progress_every:
                return
            self._last_progress = now
            eta = None
            if self._finished:
                rate = self._finished / max(now - self._began, 1e-9)
                eta = (self._total - self._done) / rate
            self._line(progress_text(self._done, self._total, eta))

    def _tick_loop(self) -> None:
        assert self._tick_every is not None
        while not self._stop.wait(self._tick_every):
            self.tick()

    def end(
        self,
        jobs: Sequence[Job],
        *,
        state: str,
        elapsed: float,
        summary_path: Path,
        next_steps: Sequence[str] = (),
    ) -> None:
        self.close()
        table = table_text(jobs, redact=self._shown)
        if table is not None:
            self._write("\n" + table)
        else:
            self._rich_table(jobs)
        # A path is copied by hand; rich's wrapping would break it across lines.
        lines = end_lines(state, elapsed, summary_path, jobs, next_steps)
        self._write("".join(self._shown(line) + "\n" for line in lines))

    def _rich_table(self, jobs: Sequence[Job]) -> None:
        """The final table by rich, for model names whose width on screen it works out; as
        wide as it needs, like :func:`~batch.display.text.table_text`'s: a log has no width."""
        from rich.console import Console

        console = Console(
            file=self._stream,
            force_terminal=False,
            no_color=True,
            highlight=False,
            emoji=False,
            width=UNWRAPPED,
        )
        try:
            console.print()
            console.print(final_table(jobs, redact=self._shown))
        except (BrokenPipeError, ValueError):
            self._stream = _silenced(self._stream)

    def close(self) -> None:
        """Stop the progress lines (idempotent)."""
        self._stop.set()
        with self._lock:
            self._last_progress = None
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join()


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
        out = cast(TextIO, console.file)  # rich types it IO[str]; it is the stream we gave
    else:
        out = stream if stream is not None else sys.stdout
        is_terminal = _isatty(out) and os.environ.get("TERM", "") not in ("dumb", "unknown")
    if not (progress and is_terminal):
        return PlainDisplay(out, now=now, redact=redact, clock=clock)
    from batch.display.live import LiveDisplay

    if console is None:
        from rich.console import Console

        console = Console(file=out)
    return LiveDisplay(console, clock=clock, redact=redact)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or file-like without isatty
        return False
