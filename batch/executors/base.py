"""The executor boundary: the scheduler decides what runs and when; an executor runs one
attempt of one job and returns its :class:`~batch.attempt.runner.AttemptResult`.

``local`` runs attempts as asyncio subprocesses of the driver. Other executors (``dask``,
in ``batch.executors.dask``, and ``slurm`` on top of it) run the very same
:func:`batch.attempt.runner.run_attempt` somewhere else; the driver alone keeps the lock,
the limits and the summary whatever executes the jobs. An attempt that comes back with
``meta=None`` has no record: killed on the user's abort, or lost with the worker that ran
it (the driver reruns those).
"""

from __future__ import annotations

from typing import Protocol

from batch.attempt.runner import AttemptResult
from batch.plan.jobs import Job

DASK_HINT = "--executor dask needs Dask distributed: pip install 'batch-ledger[dask]'"
#: Dask's own variable for the scheduler to use: a cluster someone else runs, used by
#: ``dask`` and ``slurm`` when the sweep and the command line name none.
SCHEDULER_ADDRESS_VAR = "DASK_SCHEDULER_ADDRESS"
SLURM_HINT = "--executor slurm needs dask-jobqueue: pip install 'batch-ledger[slurm]'"


class Executor(Protocol):
    """An executor whose attempts tell their run dir as it is made (through
    ``BatchContext.on_run_dir``, only where they run in the driver) says so with a true
    ``tells_run_dir`` attribute; the driver's ``start`` event then waits for it."""

    async def start(self) -> None: ...

    async def run(self, job: Job, attempt: int) -> AttemptResult: ...

    async def kill_all(self, grace: float) -> None:
        """Stop every running attempt on the user's order; they get no record."""

    async def close(self) -> None: ...
