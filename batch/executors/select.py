"""Which executor runs the attempts: checked before the sweep starts, made when it runs."""

from __future__ import annotations

import importlib.util

from batch.attempt.runner import BatchContext
from batch.errors import ExecutorUnavailable
from batch.executors.base import DASK_HINT, Executor
from batch.executors.local import LocalExecutor
from batch.sweep.load import ExecutorSpec, Sweep


def check_executor(spec: ExecutorSpec) -> None:
    """Raise :class:`ExecutorUnavailable` with an install hint when ``spec`` cannot be used here."""
    if spec.kind == "dask" and importlib.util.find_spec("distributed") is None:
        raise ExecutorUnavailable(DASK_HINT)


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
