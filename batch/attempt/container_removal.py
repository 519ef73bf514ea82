"""When an attempt ends, however it ends, its containers go with it: they run under the
engine, in no process group of the job, so stopping the job's group leaves them running.

:func:`remove_attempt_containers` removes the containers carrying the attempt's label (the
sweep's ``containers`` key; the removal itself is :mod:`batch.processes.containers`), and
waits for it to its end even when the attempt's task is cancelled meanwhile
(:func:`despite_cancel`): a Dask worker cancels an attempt twice a second until it ends,
and a removal cut short would leave the containers running. The runner
(:mod:`batch.attempt.runner`) calls it after the job's processes, before its record, so the
record says what was removed.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, TypeVar

from batch.attempt.run_command import AttemptContext
from run_support.safe_files import append_text

if TYPE_CHECKING:  # imported only where a sweep sets containers (see below)
    from batch.processes.containers import Removal

_T = TypeVar("_T")


async def remove_attempt_containers(attempt: AttemptContext) -> Removal | None:
    """Remove the containers carrying the attempt's label: what was removed, and why not
    all (also a warning line in ``output.log``); None when the sweep sets no ``containers``.
    Runs to its end, bounded by ``stop_timeout``, even when the attempt's task is
    cancelled."""
    spec = attempt.sweep.containers
    if spec is None:
        return None
    # Only now: a sweep without containers imports nothing of them.
    from batch.processes.containers import remove_labelled

    label = attempt.container_label
    removal = await despite_cancel(asyncio.ensure_future(remove_labelled(spec, label, attempt.env)))
    if removal.warning is None:
        attempt.registry.containers_removed(label)  # else the watchdog tries again, if need be
    else:
        with contextlib.suppress(OSError):
            append_text(attempt.log_path, f"batch: warning: {removal.warning}\n")
    return removal


async def despite_cancel(task: asyncio.Future[_T]) -> _T:
    """``task``'s result, waited for to its end even if this task is cancelled meanwhile
    (a Dask worker cancels an attempt twice a second until it ends); the cancel is raised
    after."""
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True  # this task's, not the removal's: raised once it is done
    if cancelled:
        raise asyncio.CancelledError
    return task.result()
