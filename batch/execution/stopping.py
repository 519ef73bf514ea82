"""How a running sweep stops: interrupts, a stop by hand, a halt, a failure of the driver's
own (a batch dir it cannot write, a lost executor), and the killing of running jobs.

First interrupt (Ctrl-C, SIGTERM, ``batch steer stop``): start nothing new; second: kill
the running jobs. A policy's halt acts as one (``soon``) or the other (``now``). A failure
of the driver's own starts nothing new and is said once per kind.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from batch.display.plain import Display
from batch.execution.policy_runtime import stops_starting
from batch.execution.scheduler import Scheduler
from batch.policies.halt import Halt


class Stopping:
    """What has stopped the sweep so far, and the acts that stop it."""

    def __init__(
        self,
        scheduler: Scheduler,
        display: Display,
        *,
        emit: Callable[..., None],
        notify: Callable[..., None],
        kill_all: Callable[[], Coroutine[Any, Any, None]],
        halt: Callable[[], Halt | None],
    ) -> None:
        self.scheduler = scheduler
        self.display = display
        self._emit = emit
        self._notify = notify
        self._kill_all = kill_all
        self._halt = halt
        self.interrupts = 0
        #: What stopped the sweep early ("write", "executor", "limits"); each is said once.
        self.failures: set[str] = set()
        #: True once running jobs are being killed (a second interrupt, ``halt now``): an
        #: attempt that ends without a record was killed on purpose, not lost.
        self.killing = False
        self._kill: asyncio.Task[None] | None = None

    @property
    def interrupted(self) -> bool:
        """Whether the sweep ends interrupted: by the user, or by a failure of its own."""
        return self.interrupts > 0 or bool(self.failures)

    def on_signal(self) -> None:
        self.interrupts += 1
        if self.interrupts == 1:
            self._interrupt()
            self.display.message(
                f"interrupted: starting no new jobs; {len(self.scheduler.running)} running "
                "job(s) will finish. Interrupt again to kill them."
            )
        elif self.interrupts == 2:
            self.kill_running()

    def by_hand(self, source: str) -> None:
        """``batch steer stop``: as one Ctrl-C (a Ctrl-C after it kills the running jobs)."""
        if self.interrupts == 0:
            self.interrupts = 1
            self._interrupt(by=source)

    def _interrupt(self, **fields: Any) -> None:
        """The first interrupt: start nothing new, let the running jobs finish."""
        self.scheduler.stop()
        self.display.stopping()
        self._emit("interrupt", running=len(self.scheduler.running), **fields)
        self._notify("interrupt")

    def on_failure(self, kind: str, message: str) -> None:
        """Start no more jobs; say why once per kind (every job hitting it would repeat it)."""
        if kind not in self.failures:
            self.display.message(f"error: {message}")
        self.failures.add(kind)
        self.scheduler.stop()
        self.display.stopping()

    def on_halt(self, halt: Halt | None) -> bool:
        """A policy halted the sweep: ``soon`` starts nothing new, ``now`` also kills the
        running jobs. A deadline that only refused some starts goes on with the others.
        Returns whether the sweep stops starting."""
        if not stops_starting(halt):
            return False
        assert halt is not None
        self.scheduler.stop()
        if halt.mode == "now" and self.scheduler.running:
            self.kill_running()
        else:
            self.display.stopping()
        return True

    def kill_running(self) -> None:
        if self.killing:
            return
        self.killing = True
        self._emit("kill", running=len(self.scheduler.running))
        self.display.message("killing running jobs (no record is written for them)")
        self.display.stopping(killing=True)
        # Held: the event loop keeps only a weak reference to a task.
        self._kill = asyncio.get_running_loop().create_task(self._kill_all())

    def kill_reason(self, said: str) -> str:
        """Why a running job was killed: the user's second Ctrl-C, or the halt that stopped
        the running jobs (``halt now``, the deadline), never the one for the other."""
        halt = self._halt()
        if self.interrupts >= 2 or halt is None:
            return said or "killed by the user's abort"
        if halt.rule == "deadline":
            return "stopped at the deadline"
        return "stopped by the halt rule (halt now)"
