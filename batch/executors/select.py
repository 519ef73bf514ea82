"""Which executor runs the attempts: checked before the sweep starts, made when it runs."""

from __future__ import annotations

import importlib.util
import os
import shutil

from batch.attempt.runner import BatchContext
from batch.errors import ExecutorUnavailable
from batch.executors.base import DASK_HINT, SCHEDULER_ADDRESS_VAR, SLURM_HINT, Executor
from batch.executors.local import LocalExecutor
from batch.sweep.features.executor import ExecutorSpec
from batch.sweep.load import Sweep

#: Why ``dask`` and ``slurm`` refuse a sweep with a ``worker`` (docs/scaling.md).
WORKERS_LOCAL_ONLY = (
    "worker: runs on the local executor only; --executor {kind} does not start warm workers "
    "on its hosts yet (use command:, or --executor local; docs/scaling.md)"
)


def check_executor(spec: ExecutorSpec, *, workers: bool = False) -> None:
    """Raise :class:`ExecutorUnavailable` with an install hint when ``spec`` cannot be used
    here, or with why when the sweep's ``worker`` (``workers``) cannot run on it."""
    if workers and spec.kind != "local":
        raise ExecutorUnavailable(WORKERS_LOCAL_ONLY.format(kind=spec.kind))
    if spec.kind == "dask" and importlib.util.find_spec("distributed") is None:
        raise ExecutorUnavailable(DASK_HINT)
    if spec.kind != "slurm":
        return
    if any(importlib.util.find_spec(name) is None for name in ("distributed", "dask_jobqueue")):
        raise ExecutorUnavailable(SLURM_HINT)
    # Not needed for a cluster someone else runs.
    own_cluster = spec.scheduler_file is None and not os.environ.get(SCHEDULER_ADDRESS_VAR)
    if own_cluster and shutil.which("sbatch") is None:
        raise ExecutorUnavailable(
            "--executor slurm submits worker jobs with sbatch, which is not on PATH "
            "(run the driver on a Slurm login node)"
        )


def make_executor(
    kind: str, sweep: Sweep, ctx: BatchContext, *, scheduler: str | None = None
) -> Executor:
    """The executor named ``kind``, as ``sweep.executor`` describes it: ``dask`` without a
    scheduler starts a cluster of one local worker process with ``sweep.max_concurrent``
    slots; ``slurm`` starts one whose workers are Slurm jobs, both for the sweep's duration."""
    spec = sweep.executor
    if kind == "dask":
        from batch.executors.dask import DaskExecutor  # only now: it needs distributed

        return DaskExecutor(sweep, ctx, scheduler=scheduler, scheduler_file=spec.scheduler_file)
    if kind == "slurm":
        if spec.scheduler_file is not None or os.environ.get(SCHEDULER_ADDRESS_VAR):
            # A cluster someone else started: connect to it, as dask does.
            from batch.executors.dask import DaskExecutor

            return DaskExecutor(sweep, ctx, scheduler_file=spec.scheduler_file)
        from batch.executors.slurm import SlurmExecutor  # only now: it needs dask-jobqueue

        return SlurmExecutor(sweep, ctx)
    if kind != "local":
        raise ValueError(f"unknown executor {kind!r}")
    return LocalExecutor(sweep, ctx)
