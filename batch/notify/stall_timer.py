"""The driver's stall timer: :class:`StallWatch` (batch.policies.stall) kept and looked at.

The execution tells the timer when an attempt starts and ends; :meth:`StallTimer.run`, a
background task, looks at the watch at least every :data:`POLL` seconds and calls
``on_stall`` when a stall is due. ``on_recovered`` is called from :meth:`job_ended` on the
first finish after a stall. Clock and sleep are injected, so tests never wait.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from batch.policies.stall import StallWatch

__all__ = ["POLL", "StallTimer"]

#: The most a stall event can be late (seconds): one cheap wakeup per second.
POLL = 1.0


class StallTimer:
    def __init__(
        self,
        stall: float,
        *,
        on_stall: Callable[[float, int], None],
        on_recovered: Callable[[float], None],
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """``on_stall(quiet_seconds, running)``; ``on_recovered(quiet_seconds)``."""
        self.watch = StallWatch(stall, clock())
        self.running = 0
        self._on_stall = on_stall
        self._on_recovered = on_recovered
        self._clock = clock
        self._sleep = sleep

    def job_started(self) -> None:
        self.watch = self.watch.job_started(self.running, self._clock())
        self.running += 1

    def job_ended(self, *, finished: bool) -> None:
        """An attempt ended; ``finished``: with a record (passed, failed or error), not
        lost or killed, so the sweep is making progress."""
        self.running = max(0, self.running - 1)
        if not finished:
            return
        now = self._clock()
        quiet = now - self.watch.since
        self.watch, recovered = self.watch.job_finished(now)
        if recovered:
            self._on_recovered(quiet)

    def check(self) -> bool:
        """Fire a stall if one is due now; True when it fired."""
        now = self._clock()
        if not self.watch.is_due(self.running, now):
            return False
        quiet = now - self.watch.since
        self.watch = self.watch.fire()
        self._on_stall(quiet, self.running)
        return True

    async def run(self) -> None:
        """Look at the watch until cancelled."""
        while True:
            self.check()
            due = self.watch.due_at(self.running)
            wait = POLL if due is None else min(POLL, max(due - self._clock(), 0.0))
            await self._sleep(wait)
