"""The ``dask`` executor: every attempt runs as a task on a Dask ``distributed`` worker.

The driver keeps what it always keeps — the scheduling (limits, stagger, retries), the lock
and the summary; a worker runs the very same :func:`batch.runner.run_attempt` as the local
executor (run dir, ``output.log``, timeout escalation, classification, atomic
``run-meta.json``) in the batch dir, which must be on a filesystem shared by the driver and
every worker (``docs/scaling.md``).

Driver side, :class:`DaskExecutor` submits one task per attempt (``pure=False``,
``retries=0``) and turns what comes back into an :class:`~batch.runner.AttemptResult`:

- the worker's record: the attempt's result, as with the local executor;
- the worker died mid-job (``KilledWorker``), or Dask ran the task a second time:
  ``meta=None`` — no record, the outcome is unknown, and the driver runs the job again;
- the scheduler connection is gone, a worker cannot see the batch dir, a worker failed:
  :class:`~batch.executor.ExecutorError` — the sweep stops, ``--resume`` goes on.

At most once: Dask reruns a task whose worker died (up to the scheduler's
``distributed.scheduler.allowed-failures``, 3 by default, and always when a worker is
retired) or whose result was lost before the driver fetched it. So each submission first
claims ``batch-logs/dask-claims/<token>/<n>`` (``O_EXCL`` on the shared filesystem); a second
run of the same task finds the claim and reports the attempt lost instead of running it.

Worker side, each worker process runs its jobs on one event loop in a daemon thread (the
*job loop*) with one :class:`~batch.processes.ProcessRegistry` per driver invocation:

- the driver's abort reaches the jobs: ``client.run(_stop_invocation)`` calls ``kill_all``;
- a task Dask stops wanting (the driver died, was cut off or cancelled it) stops its job:
  the job loop checks twice a second that each job's task still runs on the worker;
- a worker process that dies takes its jobs with it: the registry's watchdog process stops
  their process groups when its pipe closes.

``distributed`` is imported only where a cluster is used, so ``batch`` runs without it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import logging
import os
import secrets
import shutil
import signal
import socket
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import attrs

from batch.executor import ExecutorError
from batch.jobs import Job
from batch.processes import LOGS_DIR, ProcessRegistry
from batch.runner import AttemptResult, BatchContext, RecordWriteError, run_attempt
from batch.sweep import Sweep

CLAIMS_DIR = "dask-claims"
#: How often the job loop checks that each job's task still runs on its worker.
POLL_SECONDS = 0.5
#: A driver invocation's registry (and watchdog process) outlives its last job this long.
IDLE_SECONDS = 60.0
#: Bound on every call to a cluster that may not answer (connect, run, close).
CALL_TIMEOUT = 10.0
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


# --- worker side ----------------------------------------------------------------------------


def run_on_worker(call: WorkerCall) -> AttemptResult | Refused:
    """The task the driver submits: claim the attempt, then run it on the job loop."""
    from distributed import get_worker

    if not os.path.isdir(call.batch_dir):
        return Refused("unshared", f"{socket.gethostname()}: {call.batch_dir}")
    try:
        os.close(os.open(call.claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError:
        return Refused("duplicate")
    except FileNotFoundError:
        return Refused("unshared", f"{socket.gethostname()}: {os.path.dirname(call.claim)}")
    except OSError as exc:
        return Refused("write", call.claim, exc.errno)
    worker = get_worker()
    jobs = _job_loop()
    try:
        return jobs.call(jobs.run(call, worker.get_current_task(), worker))
    except concurrent.futures.CancelledError:
        return AttemptResult(None, "", "stopped on its worker: Dask cancelled the task")
    except RecordWriteError as exc:
        return Refused("write", str(exc.path), exc.error.errno)


async def _stop_invocation(token: str, grace: float) -> None:
    """Run on every worker (``client.run``) on the user's abort: kill the token's jobs."""
    jobs = _job_loop()
    await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(jobs.stop(token, grace), jobs.loop))


async def _forget_invocation(token: str) -> None:
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
            # No pgids.json: it is the driver's, on the driver's host. The watchdog stands in.
            registry = ProcessRegistry(None, kill_grace=call.sweep.kill_grace)
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


# --- driver side ----------------------------------------------------------------------------


class DaskExecutor:
    """Attempts run as tasks of the Dask cluster at ``scheduler`` or, when it is None, of a
    cluster started for the sweep: one worker process on 127.0.0.1 with
    ``sweep.max_concurrent`` slots (the driver's limits decide what runs either way)."""

    def __init__(self, sweep: Sweep, ctx: BatchContext, *, scheduler: str | None = None) -> None:
        self.sweep = sweep
        self.ctx = ctx
        self.scheduler = scheduler
        self.token = secrets.token_hex(6)
        self.batch_dir = os.path.abspath(ctx.batch_dir)
        self.claims = Path(self.batch_dir) / LOGS_DIR / CLAIMS_DIR / self.token
        self.aborting = False
        self._client: Any = None
        self._cluster: Any = None
        self._futures: set[Any] = set()
        self._count = itertools.count(1)
        self._sweeps: dict[str, Sweep] = {}
        self._log_level: int | None = None

    async def start(self) -> None:
        import distributed

        try:
            self.claims.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RecordWriteError(self.claims, exc) from exc
        # The driver reports lost workers and a lost scheduler itself, through its display.
        logger = logging.getLogger("distributed")
        self._log_level = logger.level
        logger.setLevel(logging.CRITICAL)
        address = self.scheduler
        if address is None:
            try:
                self._cluster = await _start_local_cluster(self.sweep.max_concurrent)
            except Exception as exc:  # Dask reports a failed start as RuntimeError & co
                raise ExecutorError(f"cannot start a local Dask cluster: {exc}") from None
            address = self._cluster.scheduler_address
        try:
            async with asyncio.timeout(CALL_TIMEOUT + 1):
                self._client = await distributed.Client(
                    address, asynchronous=True, set_as_default=False, timeout=CALL_TIMEOUT
                )
        except (OSError, TimeoutError) as exc:
            raise ExecutorError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
        await self._check_shared()

    async def _check_shared(self) -> None:
        """Fail early, with the reason, when a worker cannot see the batch dir."""
        async with asyncio.timeout(CALL_TIMEOUT):
            seen = await self._client.run(os.path.isdir, str(self.claims), on_error="return")
        blind = sorted(worker for worker, ok in seen.items() if ok is not True)
        if blind:
            raise ExecutorError(
                f"the batch dir {self.batch_dir} is not visible on Dask worker(s) "
                f"{', '.join(blind)}: it must be on a filesystem shared by the driver and "
                "every worker (see docs/scaling.md)"
            )

    async def run(self, job: Job, attempt: int) -> AttemptResult:
        if self.aborting:
            return AttemptResult(None, "", KILLED)
        client = self._client
        if client.status != "running":
            raise ExecutorError(self._lost_scheduler())
        n = next(self._count)
        call = WorkerCall(
            job=job,
            sweep=self._worker_sweep(job.model),
            batch_dir=self.batch_dir,
            batch_id=self.ctx.batch_id,
            attempt=attempt,
            secrets=self.ctx.secrets,
            token=self.token,
            claim=str(self.claims / str(n)),
        )
        future = client.submit(
            run_on_worker, call, key=f"batch-ledger-{self.token}-{n}", pure=False, retries=0
        )
        self._futures.add(future)
        try:
            outcome: object = await future
        except Exception as exc:
            outcome = exc
        finally:
            self._futures.discard(future)
            # Released at once: Dask would recompute a held result whose worker dies. When
            # this task is cancelled, the release is what stops the job on its worker.
            future.release()
        return self._result(job, outcome)

    def _result(self, job: Job, outcome: object) -> AttemptResult:
        from distributed import KilledWorker
        from distributed.comm import CommClosedError

        if isinstance(outcome, AttemptResult):
            return outcome
        if isinstance(outcome, Refused):
            if outcome.reason == "duplicate":
                return AttemptResult(None, "", "lost with its Dask worker (Dask ran it again)")
            if outcome.reason == "write":
                error = OSError(outcome.errno, os.strerror(outcome.errno or 0))
                raise RecordWriteError(Path(outcome.detail), error)
            raise ExecutorError(
                f"the batch dir is not visible on a Dask worker ({outcome.detail}): it must "
                "be on a filesystem shared by the driver and every worker (see docs/scaling.md)"
            )
        if self._client.status != "running":
            raise ExecutorError(self._lost_scheduler())
        if isinstance(outcome, concurrent.futures.CancelledError):
            return AttemptResult(None, "", KILLED if self.aborting else "cancelled by Dask")
        if isinstance(outcome, KilledWorker | CommClosedError):
            return AttemptResult(None, "", "lost with its Dask worker")
        raise ExecutorError(
            f"a Dask worker could not run {job.case} x {job.model}: "
            f"{type(outcome).__name__}: {outcome}"
        )

    def _lost_scheduler(self) -> str:
        address = self.scheduler or "the local cluster"
        return f"lost the connection to the Dask scheduler ({address})"

    def _worker_sweep(self, model: str) -> Sweep:
        sweep = self._sweeps.get(model)
        if sweep is None:
            sweep = self._sweeps[model] = attrs.evolve(
                self.sweep,
                # Absolute: the job's cwd is the sweep file's directory, on every host.
                path=self.sweep.path.absolute(),
                cases=(),
                models=tuple(spec for spec in self.sweep.models if spec.id == model),
            )
        return sweep

    async def kill_all(self, grace: float) -> None:
        """Stop every running attempt: the workers kill the jobs (TERM, ``grace``, KILL),
        and what Dask has not started yet is cancelled. None of them gets a record."""
        self.aborting = True
        client = self._client
        if client is None or client.status != "running":
            return  # cut off from the workers: their job loops stop the jobs by themselves
        with contextlib.suppress(Exception):
            async with asyncio.timeout(grace + CALL_TIMEOUT):
                await client.run(_stop_invocation, self.token, grace, on_error="ignore")
        pending = [future for future in self._futures if not future.done()]
        if pending:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(CALL_TIMEOUT):
                    await client.cancel(pending)

    async def close(self) -> None:
        client, cluster = self._client, self._cluster
        self._client = self._cluster = None
        # Each step bounded and allowed to fail: a cluster already gone must neither hang
        # the driver nor hide the sweep's outcome behind a traceback.
        if client is not None and client.status == "running":
            with contextlib.suppress(Exception):
                async with asyncio.timeout(CALL_TIMEOUT + self.sweep.kill_grace):
                    await client.run(_forget_invocation, self.token, on_error="ignore")
        for closable in (client, cluster):
            if closable is not None:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(CALL_TIMEOUT):
                        await closable.close()
        shutil.rmtree(self.claims, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.claims.parent.rmdir()  # only when no other invocation's claims are there
        if self._log_level is not None:
            logging.getLogger("distributed").setLevel(self._log_level)


async def _start_local_cluster(slots: int) -> Any:
    """One worker process with ``slots`` threads, on 127.0.0.1, no dashboard."""
    import dask
    from distributed import LocalCluster

    # A terminal's Ctrl-C reaches the driver's whole process group; a worker started with
    # SIGINT ignored keeps it ignored, so "Ctrl-C once: running jobs finish" still holds.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
            return await LocalCluster(
                n_workers=1,
                threads_per_worker=slots,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
                # No dashboard; its HTTP server (always started) on loopback, any free port.
                scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                memory_limit=0,
                silence_logs=logging.CRITICAL,
                asynchronous=True,
            )
    finally:
        signal.signal(signal.SIGINT, previous)
