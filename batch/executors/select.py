"""The executor boundary: the scheduler decides what runs and when; an executor runs one
attempt of one job and returns its :class:`~batch.attempt.runner.AttemptResult`.

``local`` runs attempts as asyncio subprocesses of the driver. Other executors (``dask``,
in ``batch.executors.dask``) run the very same :func:`batch.attempt.runner.run_attempt` somewhere
else; the driver alone keeps the lock, the limits and the summary whatever executes the
jobs. An attempt that comes back with ``meta=None`` has no record: killed on the user's
abort, or lost with the worker that ran it (the driver reruns those).
"""

from __future__ import annotations

import importlib.util
from typing import Protocol

from batch.attempt.runner import AttemptResult, BatchContext, run_attempt
from batch.plan.jobs import Job
from batch.sweep.load import ExecutorSpec, Sweep

DASK_HINT = "--executor dask needs Dask distributed: pip install 'batch-ledger[dask]'"


class ExecutorError(Exception):
    """The executor cannot go on: no cluster, the scheduler connection lost, a worker that
    cannot see the batch dir. The sweep stops; what ran is recorded and ``--resume`` goes on.
    """


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


def choose_executor(
    from_sweep: ExecutorSpec, kind: str | None = None, scheduler: str | None = None
) -> ExecutorSpec:
    """The command line's ``--executor``/``--scheduler`` over the sweep's ``executor:``.

    ``--scheduler`` alone means dask; ``--executor dask`` alone keeps the sweep's scheduler
    if it names one, else a local cluster. Raises ``ValueError`` for ``local`` + scheduler.
    """
    if scheduler is not None:
        if kind == "local":
            raise ValueError("--scheduler needs --executor dask")
        return ExecutorSpec(kind="dask", scheduler=scheduler)
    if kind is None or kind == from_sweep.kind:
        return from_sweep
    return ExecutorSpec(kind=kind)


def check_executor(spec: ExecutorSpec) -> None:
    """Raise :class:`ExecutorError` with an install hint when ``spec`` cannot be used here."""
    if spec.kind == "dask" and importlib.util.find_spec("distributed") is None:
        raise ExecutorError(DASK_HINT)


def make_executor(
    kind: str, sweep: Sweep, ctx: BatchContext, *, scheduler: str | None = None
) -> Executor:
    """The executor named ``kind``. ``dask`` without ``scheduler`` starts a cluster of one
    local worker process with ``sweep.max_concurrent`` slots for the sweep's duration."""
    if kind == "dask":
        from batch.executors.dask import DaskExecutor  # only now: it needs distributed

        return DaskExecutor(sweep, ctx, scheduler=scheduler)
    if kind != "local":
        raise ValueError(f"unknown executor {kind!r}")
    return LocalExecutor(sweep, ctx)
