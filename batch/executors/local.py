"""The ``local`` executor: attempts run as asyncio subprocesses of the driver."""

from __future__ import annotations

from batch.attempt.runner import AttemptResult, BatchContext, run_attempt
from batch.plan.jobs import Job
from batch.sweep.load import Sweep


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
