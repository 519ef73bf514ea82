"""The sweep's notify commands and stall timer, as one execution drives them (docs/notify.md).

:class:`NotifyRuntime` builds the :class:`~batch.notify.commands.Notifier` (``notify``) and
the :class:`~batch.notify.stall_timer.StallTimer` (``stall``) of a sweep, fires events
with the counts as they are at that moment, reports each notify command's outcome
(``events.jsonl``, once on screen when it fails) and waits, bounded, for the last ones at
the end. The execution tells it when attempts start and end, and which events happen.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from batch.durations import format_duration
from batch.layout import LOGS_DIR, NOTIFY_LOG
from batch.notify.commands import Notifier, NotifyResult
from batch.notify.payload import event_payload
from batch.notify.stall_timer import StallTimer
from batch.processes.registry import ProcessRegistry
from batch.sweep.load import Sweep
from batch.sweep.secrets import Redactor
from run_support.results import utc_stamp

__all__ = ["NotifyRuntime"]

#: How the batch stands now: its state and every job's status.
Standing = Callable[[], tuple[str, Sequence[str]]]


class NotifyRuntime:
    def __init__(
        self,
        sweep: Sweep,
        *,
        batch_dir: Path,
        registry: ProcessRegistry,
        redact: Redactor,
        standing: Standing,
        emit: Callable[..., None],
        message: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._batch_dir = batch_dir
        self._standing = standing
        self._emit = emit
        self._message = message
        #: Commands whose failure was said on screen: once each, the log has every run.
        self._failed: set[tuple[str, ...]] = set()
        self.notifier = None
        if sweep.notify is not None:
            self.notifier = Notifier(
                sweep.notify,
                base_env=os.environ,
                # As for ``command``: relative paths in a notify command start at the sweep.
                cwd=sweep.path.resolve().parent,
                log_path=batch_dir / LOGS_DIR / NOTIFY_LOG,
                redact=redact,
                on_result=self._notified,
                registry=registry,
            )
        self.stall_timer = None
        if sweep.stall is not None:
            self.stall_timer = StallTimer(
                sweep.stall, on_stall=self._on_stall, on_recovered=self._on_recovered, clock=clock
            )

    # --- events --------------------------------------------------------------------------

    def notify(self, event: str, **fields: Any) -> None:
        """Run the notify commands on ``event`` in the background; returns at once."""
        if self.notifier is None:
            return
        state, statuses = self._standing()
        self.notifier.fire(
            event_payload(
                event,
                batch_dir=self._batch_dir,
                state=state,
                statuses=statuses,
                stamp=utc_stamp(),
                **fields,
            )
        )

    def _notified(self, result: NotifyResult) -> None:
        command = shlex.join(result.argv)
        status = "ok" if result.ok else "failed"
        # "on", not "event": that key is the line's own event name (``notify``).
        self._emit("notify", on=result.event, command=command, status=status, reason=result.reason)
        if not result.ok and result.argv not in self._failed:
            self._failed.add(result.argv)
            self._message(
                f"warning: notify command {command} failed on {result.event}: {result.reason}; "
                f"see {LOGS_DIR}/{NOTIFY_LOG}"
            )

    def _on_stall(self, quiet: float, running: int) -> None:
        self._emit("stall", seconds=round(quiet, 3), running=running)
        self._message(f"stalled: no job finished for {format_duration(quiet)} ({running} running)")
        self.notify("stall", stalled_seconds=round(quiet, 3), running=running)

    def _on_recovered(self, quiet: float) -> None:
        self._emit("recovered", seconds=round(quiet, 3))
        self._message(f"recovered: a job finished after {format_duration(quiet)}")
        self.notify("recovered", stalled_seconds=round(quiet, 3))

    # --- the stall timer -----------------------------------------------------------------

    def job_started(self) -> None:
        if self.stall_timer is not None:
            self.stall_timer.job_started()

    def job_ended(self, *, finished: bool) -> None:
        """An attempt ended; ``finished``: with a record (progress), not lost or killed."""
        if self.stall_timer is not None:
            self.stall_timer.job_ended(finished=finished)

    def start_timer(self) -> asyncio.Task[None] | None:
        """The stall timer's background task (the caller cancels it), or None."""
        if self.stall_timer is None:
            return None
        return asyncio.get_running_loop().create_task(self.stall_timer.run())

    # --- the end -------------------------------------------------------------------------

    async def drain(self) -> None:
        """Wait for the last notifications (the ``end`` event's), then kill what is left.

        The bound is the commands' own limit and kill grace, and a little, for each event
        not yet delivered (events are delivered one after another): a command that hangs is
        stopped by its own timeout (logged as such), the ``end`` event behind it still gets
        its own, and a notifier never holds the driver's exit longer. A Ctrl-C or SIGTERM
        meanwhile ends the wait, not the run.
        """
        if self.notifier is None or not self.notifier.pending:
            return
        loop = asyncio.get_running_loop()
        drain = loop.create_task(self.notifier.drain())
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, drain.cancel)
        try:
            await asyncio.wait({drain})
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
        if drain.cancelled():
            self._message("not waiting for the notify commands: killing them")
            await self.notifier.drain(0)
