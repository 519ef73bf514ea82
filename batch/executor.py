"""The executor boundary: the scheduler decides what runs and when; an executor runs one
attempt of one job and returns its :class:`~batch.runner.AttemptResult`.

``local`` runs attempts as asyncio subprocesses of the driver. Other executors (``dask``)
run the very same :func:`batch.runner.run_attempt` somewhere else; the driver alone keeps
the lock, the limits and the summary whatever executes the jobs.
"""

from __future__ import annotations

from typing import Protocol

from batch.jobs import Job
from batch.runner import AttemptResult, BatchContext, run_attempt
from batch.sweep import Sweep


class Executor(Protocol):
    async def start(self) -> None: ...

    async def run(self, job: Job, attempt: int) -> AttemptResult: ...

    async def kill_all(self, grace: float) -> None:
        """Stop every running attempt on the user's order; they get no record."""

    async def close(self) -> None: ...


class LocalExecutor:
    """Attempts run as process groups of this driver."""

    def __init__(self, sweep: Sweep, ctx: BatchContext) -> None:
        self.sweep = sweep
        self.ctx = ctx

    async def start(self) -> None:
        return None

    async def run(self, job: Job, attempt: int) -> AttemptResult:
        return await run_attempt(job, self.sweep, self.ctx, attempt)

    async def kill_all(self, grace: float) -> None:
        await self.ctx.registry.kill_all(grace)

    async def close(self) -> None:
        return None
