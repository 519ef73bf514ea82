"""The worker half of the ``dask`` executor: what runs inside a Dask worker process.

:func:`run_on_worker` is the task the driver submits for one attempt. It first claims the
attempt — creates ``WorkerCall.claim`` exclusively (``O_EXCL``, on the shared filesystem) —
so that when Dask runs the same task a second time (its first worker died, or its result
was lost before the driver fetched it) the job is not run again: that run returns
``Refused("duplicate")`` and the driver treats the attempt as lost.

Each worker process runs its jobs with :func:`batch.attempt.runner.run_attempt` on one event loop
in a daemon thread (the *job loop*), whichever Dask thread runs the task, with one
:class:`~batch.processes.registry.ProcessRegistry` per driver invocation (its token), so that

- the driver's abort reaches the jobs: ``client.run(stop_invocation)`` calls ``kill_all``;
- a task Dask stops wanting (the driver died, was cut off, or released it) stops its job:
  the job loop checks twice a second that each job's task still runs on its worker;
- a worker process that dies takes its jobs with it: the registry's watchdog process stops
  their process groups when its pipe closes.

A registry keeps no ``pgids.json``: that file is the driver's, on the driver's host.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import socket
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import attrs

from batch.attempt.runner import AttemptResult, BatchContext, run_attempt
from batch.errors import RecordWriteError
from batch.plan.jobs import Job
from batch.processes.registry import ProcessRegistry
from batch.processes.spawn import pidfd_child_watcher
from batch.sweep.load import Sweep
from run_support.safe_files import append_text, open_fd

#: How often the job loop checks that each job's task still runs on its worker.
POLL_SECONDS = 0.5
#: A driver invocation's registry (and watchdog process) outlives its last job this long.
IDLE_SECONDS = 60.0
KILLED = "killed by the user's abort"
_GONE_STATES = frozenset({"cancelled", "released", "forgotten"})


@attrs.frozen
class WorkerCall:
    """Everything a worker needs for one attempt (pickled to it)."""

    job: Job
    #: The sweep without its cases and other models: a task stays small in big sweeps.
    sweep: Sweep
    batch_dir: str
    batch_id: str
    attempt: int
    #: Values the record must not hold (``BatchContext.secrets``).
    secrets: frozenset[str]
    #: The driver invocation the attempt belongs to.
    token: str
    #: The file whose exclusive creation lets exactly one run of this task start the job.
    claim: str


@attrs.frozen
class Refused:
    """What a worker returns when it did not run the job (or could not record it)."""

    #: ``duplicate`` (Dask ran the task again), ``unshared`` (no batch dir), ``write``.
    reason: str
    detail: str = ""
    errno: int | None = None


def run_on_worker(call: WorkerCall) -> AttemptResult | Refused:
    """The task the driver submits: claim the attempt, then run it on the job loop."""
    from distributed import get_worker

    if not os.path.isdir(call.batch_dir):
        return Refused("unshared", f"{socket.gethostname()}: {call.batch_dir}")
    try:
        os.close(open_fd(call.claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return Refused("duplicate")
    except FileNotFoundError:
        return Refused("unshared", f"{socket.gethostname()}: {os.path.dirname(call.claim)}")
    except OSError as exc:
        return Refused("write", call.claim, exc.errno)
    worker = get_worker()
    jobs = _job_loop()
    try:
        key = str(worker.get_current_task())  # a string: DaskExecutor submits with key=str
        result = jobs.call(jobs.run(call, key, worker))
    except concurrent.futures.CancelledError:
        return AttemptResult(None, "", "stopped on its worker: Dask cancelled the task")
    except RecordWriteError as exc:
        return Refused("write", str(exc.path), exc.error.errno)
    if result.meta is not None:
        # Where the record is, for the driver: should this worker die before the driver
        # fetches the result, the record on the shared filesystem still counts.
        with contextlib.suppress(OSError):
            # Appended to the empty claim this worker created: a symlink put there since
            # is refused (OSError), not written through.
            append_text(call.claim, result.run_dir, real_dirs=3)  # batch-logs/dask-claims/<token>
    return result


async def stop_invocation(token: str, grace: float) -> None:
    """Run on every worker (``client.run``) on the user's abort: kill the token's jobs."""
    jobs = _job_loop()
    await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(jobs.stop(token, grace), jobs.loop))


async def forget_invocation(token: str) -> None:
    """Run on every worker when the driver is done: let the token's watchdog go."""
    jobs = _job_loop()
    await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(jobs.forget(token), jobs.loop))


@attrs.define
class _Invocation:
    registry: ProcessRegistry
    ctx: BatchContext
    idle_since: float | None = None


class _JobLoop:
    """The worker process's jobs: one event loop in a daemon thread, whatever Dask thread
    runs the task, so one registry per invocation can see (and kill) all of them."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.invocations: dict[str, _Invocation] = {}
        self.stopped: set[str] = set()
        #: Dask key -> (token, the job's task on this loop, the Dask worker running it)
        self.jobs: dict[str, tuple[str, asyncio.Task[Any], Any]] = {}
        threading.Thread(target=self._main, name="batch-ledger-jobs", daemon=True).start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.create_task(self._watch())
        self.loop.run_forever()

    def call(self, coro: Coroutine[Any, Any, AttemptResult]) -> AttemptResult:
        """Run ``coro`` on the job loop and wait for it (from a Dask task thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def run(self, call: WorkerCall, key: str, worker: Any) -> AttemptResult:
        if call.token in self.stopped:
            return AttemptResult(None, "", KILLED)
        invocation = self.invocations.get(call.token)
        if invocation is None:
            registry = ProcessRegistry(
                None,
                kill_grace=call.sweep.kill_grace,
                containers=call.sweep.containers,
                containers_env=call.sweep.env,
            )
            ctx = BatchContext(Path(call.batch_dir), call.batch_id, registry, call.secrets)
            invocation = self.invocations[call.token] = _Invocation(registry, ctx)
        invocation.idle_since = None
        task = asyncio.current_task()
        assert task is not None
        self.jobs[key] = (call.token, task, worker)
        try:
            return await run_attempt(call.job, call.sweep, invocation.ctx, call.attempt)
        finally:
            del self.jobs[key]
            if not any(token == call.token for token, _, _ in self.jobs.values()):
                invocation.idle_since = self.loop.time()

    async def stop(self, token: str, grace: float) -> None:
        self.stopped.add(token)
        invocation = self.invocations.get(token)
        if invocation is not None:
            await invocation.registry.kill_all(grace)

    async def forget(self, token: str) -> None:
        self.stopped.add(token)  # a task Dask still starts late must not run its job
        tasks = [task for owner, task, _ in self.jobs.values() if owner == token]
        for task in tasks:
            task.cancel()  # run_attempt stops the job's group and writes no record
        if tasks:
            await asyncio.wait(tasks)
        invocation = self.invocations.pop(token, None)
        if invocation is not None:
            invocation.registry.close()

    async def _watch(self) -> None:
        with pidfd_child_watcher():  # on Python 3.11, no thread per job to reap it
            while True:
                await asyncio.sleep(POLL_SECONDS)
                for key, (_, task, worker) in list(self.jobs.items()):
                    if not _still_wanted(worker, key):
                        task.cancel()
                now = self.loop.time()
                for token, invocation in list(self.invocations.items()):
                    idle = invocation.idle_since
                    if idle is not None and now - idle > IDLE_SECONDS:
                        del self.invocations[token]
                        invocation.registry.close()


def _still_wanted(worker: Any, key: str) -> bool:
    """False once Dask gave up on the task: cancelled or released, or its worker closing."""
    from distributed.core import Status

    try:
        if worker.status in (Status.closing, Status.closed, Status.failed):
            return False
        state = worker.state.tasks.get(key)
        return state is not None and state.state not in _GONE_STATES
    except AttributeError:
        return True  # a Dask whose internals differ: never stop a job on a guess


_loop: _JobLoop | None = None
_loop_lock = threading.Lock()


def _job_loop() -> _JobLoop:
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = _JobLoop()
        return _loop
