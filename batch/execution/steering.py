"""The driver's side of steering (``batch steer``, ``batch view``; batch.steering):
take each request within a second, act on it, say so, and write it to ``events.jsonl``.

- ``pause``: no job starts until ``continue`` (running ones go on); a gate that waits.
- ``stop``: as one Ctrl-C, the running jobs finish and nothing new starts; ``--resume``
  goes on from there.
- ``skip MODEL``: the model's jobs that have not started are skipped at once, as by an
  open breaker, with ``skip_reason`` ``skipped by hand (batch control)``, and so is every
  one that comes up later (a retry, a later block); ``unskip`` takes that back for those
  not skipped yet (the skipped ones have no record: ``--resume`` runs them).
- ``concurrency N`` / ``concurrency MODEL N``: the sweep's or a model's limit from now on
  (an adaptive model's limit moves by itself and is refused).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from batch.execution.gate import GateDecision
from batch.execution.scheduler import Scheduler
from batch.plan.jobs import Job
from batch.steering import Control, ControlError, take_requests

#: The ``skip_reason`` of a job skipped by ``skip MODEL``.
SKIPPED_BY_HAND = "skipped by hand (batch control)"
#: Seconds between two looks for requests: a control is taken within this.
POLL_INTERVAL = 0.5


class ControlRuntime:
    """The controls' state (paused, skipped models) and the loop that takes requests."""

    def __init__(
        self,
        batch_dir: Path,
        scheduler: Scheduler,
        *,
        models: frozenset[str],
        adaptive: frozenset[str],
        stop: Callable[[str], None],
        emit: Callable[..., Any],
        message: Callable[[str], None],
        clock: Callable[[], float],
    ) -> None:
        self.batch_dir = batch_dir
        self.scheduler = scheduler
        self.models = models
        self.adaptive = adaptive
        self._stop = stop
        self._emit = emit
        self._message = message
        self._clock = clock
        self.paused = False
        self.skipped: set[str] = set()
        self._warned: str | None = None

    def gate(self, job: Job) -> GateDecision:
        """Whether ``job`` may start as far as the controls go."""
        if job.model in self.skipped:
            return GateDecision.skip(SKIPPED_BY_HAND)
        if self.paused:
            # Asked again at the next poll: a paused sweep must not end for want of a wake.
            return GateDecision.wait("paused by hand", until=self._clock() + POLL_INTERVAL)
        return GateDecision.start()

    async def follow(self) -> None:
        """Take requests until cancelled."""
        while True:
            self.take()
            await asyncio.sleep(POLL_INTERVAL)

    def take(self) -> None:
        """Act on every request waiting, oldest first."""
        try:
            requests = take_requests(self.batch_dir)
        except OSError as exc:  # batch-logs/ unreadable: the sweep goes on without controls
            where = f"{exc.filename}: " if exc.filename else ""
            warning = f"warning: controls not read: {where}{exc.strerror}"
            if warning != self._warned:  # said once, not twice a second
                self._message(warning)
            self._warned = warning
            return
        self._warned = None
        for request in requests:
            if isinstance(request, ControlError):
                self._refuse(None, str(request), request.request)
                continue
            try:
                said = self.apply(request)
            except ControlError as exc:
                self._refuse(request, str(exc))
                continue
            self._message(f"control ({request.source}): {said}")
            self._emit("control", **_fields(request), outcome="taken", message=said)
            self.scheduler.wake()

    def apply(self, control: Control) -> str:
        """Act on ``control``; what the driver says it did. :class:`ControlError` refuses."""
        model = control.model
        if model is not None and model not in self.models:
            raise ControlError(f"no model {model!r} in this sweep")
        if control.action == "pause":
            self.paused = True
            return "paused: no new job starts until continue; running jobs go on"
        if control.action == "continue":
            self.paused = False
            return "continuing: jobs start again"
        if control.action == "stop":
            self._stop(control.source)
            return "stopping: no new job starts; running jobs finish (--resume goes on)"
        if control.action == "skip":
            assert model is not None
            self.skipped.add(model)
            count = self.scheduler.skip_queued(model, SKIPPED_BY_HAND)
            return f"skipped {count} job(s) of {model} not started yet"
        if control.action == "unskip":
            assert model is not None
            self.skipped.discard(model)
            return f"{model}: its jobs not skipped yet start again (the skipped run on --resume)"
        assert control.action == "concurrency" and control.number is not None
        if model is None:
            self.scheduler.max_concurrent = control.number
            return f"max_concurrent {control.number}"
        if model in self.adaptive:
            raise ControlError(f"{model} is adaptive: its limit moves by itself")
        self.scheduler.model_limits[model] = control.number
        return f"{model}: max_concurrent {control.number}"

    def _refuse(self, control: Control | None, reason: str, request: str | None = None) -> None:
        """Say ``control`` (None: a file that is no request, of id ``request``) is refused:
        the answer names the request it refuses, and no other requester takes it."""
        self._message(f"control refused: {reason}")
        fields = {"request": request} if control is None and request else {}
        if control is not None:
            fields = _fields(control)
        self._emit("control", **fields, outcome="refused", message=reason)


def _fields(control: Control) -> dict[str, Any]:
    fields: dict[str, Any] = {"action": control.action, "source": control.source}
    if control.request is not None:
        fields["request"] = control.request
    if control.model is not None:
        fields["model"] = control.model
    if control.number is not None:
        fields["number"] = control.number
    return fields
