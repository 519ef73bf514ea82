"""The ``local`` executor: attempts run as asyncio subprocesses of the driver, or as
requests to its warm workers (``batch.attempt.worker_pool``), which it starts on demand and
stops when the sweep ends."""

from __future__ import annotations

import attrs

from batch.attempt.runner import AttemptResult, BatchContext, run_attempt
from batch.attempt.worker_pool import WorkerPool
from batch.plan.jobs import Job
from batch.sweep.load import Sweep


class LocalExecutor:
    """Attempts run as process groups of this driver."""

    #: Each attempt tells its run dir as it is made (``BatchContext.on_run_dir``): the
    #: driver's ``start`` event waits for it. Remote executors' attempts do not.
    tells_run_dir = True

    def __init__(self, sweep: Sweep, ctx: BatchContext) -> None:
        self.sweep = sweep
        self.workers = None
        if sweep.uses_workers:
            self.workers = WorkerPool(
                sweep, ctx.registry, ctx.batch_dir, sweep.max_concurrent, ctx.secrets
            )
            ctx = attrs.evolve(ctx, workers=self.workers)
        self.ctx = ctx

    async def start(self) -> None:
        return None

    async def run(self, job: Job, attempt: int) -> AttemptResult:
        return await run_attempt(job, self.sweep, self.ctx, attempt)

    async def kill_all(self, grace: float) -> None:
        await self.ctx.registry.kill_all(grace)

    async def close(self) -> None:
        """Every worker gets end of input and ``kill_grace`` to exit (then it is stopped)."""
        if self.workers is not None:
            await self.workers.close(self.sweep.kill_grace)
