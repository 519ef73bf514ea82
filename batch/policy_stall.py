"""The ``stall`` policy: when a sweep has gone quiet long enough to tell someone.

A sweep is stalled when jobs are running and none has finished for ``stall`` seconds
(docs/notify.md). The clock starts at the sweep's start, and again at every finish and
whenever a job starts while none was running: time with nothing running (a retry's
backoff, a memory gate, a model's cooldown) is waiting, not stalling.

A stall fires once; the next finish re-arms it (and is a recovery, worth saying), so a
sweep that stalls, recovers and stalls again fires twice. Pure: the caller passes every
time in and keeps the returned :class:`StallWatch`; the driver's timer lives elsewhere.
"""

from __future__ import annotations

import attrs

__all__ = ["StallWatch"]


@attrs.frozen
class StallWatch:
    #: Seconds without a finish, while jobs run, that make a stall.
    stall: float
    #: When the quiet began: the start, the last finish, or a start after an idle spell.
    since: float
    #: True once this stall has fired; a finish clears it.
    fired: bool = False

    def due_at(self, running: int) -> float | None:
        """When a stall event is due (a clock time), or None: nothing running, or fired."""
        if running <= 0 or self.fired:
            return None
        return self.since + self.stall

    def is_due(self, running: int, now: float) -> bool:
        due = self.due_at(running)
        return due is not None and now >= due

    def fire(self) -> StallWatch:
        """The stall event was sent: no second one until a job finishes."""
        return attrs.evolve(self, fired=True)

    def job_finished(self, now: float) -> tuple[StallWatch, bool]:
        """A job finished at ``now``: the clock restarts; True when that ends a stall
        that fired (a ``recovered`` event)."""
        return StallWatch(self.stall, now), self.fired

    def job_started(self, running_before: int, now: float) -> StallWatch:
        """A job started at ``now`` while ``running_before`` others ran: after an idle
        spell the quiet counts from here."""
        if running_before > 0:
            return self
        return attrs.evolve(self, since=max(self.since, now))
