"""The ``dask`` executor: every attempt runs as a task on a Dask ``distributed`` worker.

The driver keeps what it always keeps — the scheduling (limits, stagger, retries), the lock
and the summary; a worker runs the very same :func:`batch.attempt.runner.run_attempt` as the local
executor (run dir, ``output.log``, timeout escalation, classification, atomic
``run-meta.json``) in the batch dir, which must be on a filesystem shared by the driver and
every worker (``docs/scaling.md``). The worker half is ``batch.executors.dask_worker``.

:class:`DaskExecutor` submits one task per attempt (``pure=False``, ``retries=0``) and
turns what comes back into an :class:`~batch.attempt.runner.AttemptResult`:

- the worker's record: the attempt's result, as with the local executor;
- the worker died mid-job (``KilledWorker``), or Dask ran the task a second time and the
  claim refused it: ``meta=None`` — no record, the outcome is unknown, the driver reruns it;
- the scheduler connection is gone, a worker cannot see the batch dir, a worker failed:
  :class:`~batch.errors.ExecutorLost` — the sweep stops, ``--resume`` goes on.

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
from pathlib import Path
from typing import Any

import attrs

from batch.attempt.runner import AttemptResult, BatchContext
from batch.errors import ExecutorLost, RecordWriteError
from batch.executors.base import SCHEDULER_ADDRESS_VAR
from batch.executors.dask_worker import (
    KILLED,
    Refused,
    WorkerCall,
    forget_invocation,
    run_on_worker,
    stop_invocation,
)
from batch.layout import DASK_CLAIMS, LOGS_DIR
from batch.plan.jobs import Job
from batch.sweep.load import Sweep
from run_support import jsonio
from run_support.results import RUN_META, run_meta_from_dict
from run_support.safe_files import MAX_RUN_META_BYTES, read_bytes

#: Exit statuses of a job killed by its worker's end (a batch system's TERM, then KILL).
_WORKER_END_SIGNALS = frozenset({-signal.SIGTERM, -signal.SIGKILL})
#: Bound on every call to a cluster that may not answer (connect, run, close).
CALL_TIMEOUT = 10.0


class DaskExecutor:
    """Attempts run as tasks of the Dask cluster at ``scheduler`` or, when it is None, of a
    cluster started for the sweep: one worker process on 127.0.0.1 with
    ``sweep.max_concurrent`` slots (the driver's limits decide what runs either way)."""

    def __init__(
        self,
        sweep: Sweep,
        ctx: BatchContext,
        *,
        scheduler: str | None = None,
        scheduler_file: str | None = None,
        label: str | None = None,
    ) -> None:
        self.sweep = sweep
        self.ctx = ctx
        # The sweep's or the command line's cluster, else the one Dask's own variable names.
        if scheduler is None and scheduler_file is None:
            scheduler = os.environ.get(SCHEDULER_ADDRESS_VAR) or None
        self.scheduler = scheduler
        self.scheduler_file = scheduler_file
        #: What the messages call the cluster; by default its address.
        self.label = label
        self.token = secrets.token_hex(6)
        self.batch_dir = os.path.abspath(ctx.batch_dir)
        self.claims = Path(self.batch_dir) / LOGS_DIR / DASK_CLAIMS / self.token
        self.aborting = False
        self._client: Any = None
        self._cluster: Any = None
        self._futures: set[Any] = set()
        #: Futures whose result is in, to release along with the next submit.
        self._finished: list[Any] = []
        self._count = itertools.count(1)
        self._sweeps: dict[str, Sweep] = {}
        self._log_level: int | None = None

    async def start(self) -> None:
        import distributed

        try:
            self.claims.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ExecutorLost(f"cannot write {self.claims}: {exc.strerror or exc}") from None
        # The driver reports lost workers and a lost scheduler itself, through its display.
        logger = logging.getLogger("distributed")
        self._log_level = logger.level
        logger.setLevel(logging.CRITICAL)
        address = self.scheduler
        if address is None and self.scheduler_file is None:
            try:
                self._cluster = await _start_local_cluster(self.sweep.max_concurrent)
            except Exception as exc:  # Dask reports a failed start as RuntimeError & co
                raise ExecutorLost(f"cannot start a local Dask cluster: {exc}") from None
            address = self._cluster.scheduler_address
        where = address or f"the address in {self.scheduler_file}"
        try:
            async with asyncio.timeout(CALL_TIMEOUT + 1):
                self._client = await distributed.Client(
                    address,
                    scheduler_file=self.scheduler_file,
                    asynchronous=True,
                    set_as_default=False,
                    timeout=CALL_TIMEOUT,
                )
        except (OSError, ValueError, TimeoutError) as exc:
            raise ExecutorLost(f"cannot reach the Dask scheduler at {where}: {exc}") from None
        await self._check_shared()

    async def _check_shared(self) -> None:
        """Fail early, with the reason, when a worker cannot see the batch dir."""
        async with asyncio.timeout(CALL_TIMEOUT):
            seen = await self._client.run(os.path.isdir, str(self.claims), on_error="return")
        blind = sorted(worker for worker, ok in seen.items() if ok is not True)
        if blind:
            raise ExecutorLost(
                f"the batch dir {self.batch_dir} is not visible on Dask worker(s) "
                f"{', '.join(blind)}: it must be on a filesystem shared by the driver and "
                "every worker (see docs/scaling.md)"
            )

    async def run(self, job: Job, attempt: int) -> AttemptResult:
        if self.aborting:
            return AttemptResult(None, "", KILLED)
        client = self._client
        if client.status != "running":
            raise ExecutorLost(self._lost_scheduler())
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
            run_on_worker, call, key=task_key(job, attempt, self.token, n), pure=False, retries=0
        )
        self._futures.add(future)
        # In the same message as the submit: a release sent on its own would hold the next
        # submit back by the client's batching interval (10 ms), every job.
        self._release_finished()
        try:
            outcome: object = await future
        except asyncio.CancelledError:
            future.release()  # what stops the job on its worker
            raise
        except Exception as exc:
            outcome = exc
        finally:
            self._futures.discard(future)
        # Held until then, a result whose worker dies is recomputed by Dask: that run finds
        # the attempt's claim taken and returns at once, running nothing.
        self._finished.append(future)
        return self._result(job, outcome, self.claims / str(n))

    def _recorded(self, job: Job, claim: Path) -> AttemptResult | None:
        """The attempt's record, when its worker wrote one before dying: the ledger on the
        shared filesystem, not the lost Dask result, says whether the job finished."""
        try:
            run_dir = read_bytes(claim).decode("utf-8", "replace")
            meta = run_meta_from_dict(
                jsonio.loads(
                    read_bytes(Path(self.batch_dir) / run_dir / RUN_META, MAX_RUN_META_BYTES)
                )
            )
        except (OSError, ValueError):
            return None
        if meta.key != job.key:
            return None
        if meta.stop_reason == "signal" and meta.exit_code in _WORKER_END_SIGNALS:
            # Killed along with its worker: Slurm ends a worker job (scancel, walltime) by
            # signalling every process of it at once, and the worker may still record the
            # job it took down. That is not the job's outcome; run it again.
            return None
        meta.run_dir = run_dir
        return AttemptResult(meta, run_dir, "recorded before its Dask worker died")

    def _release_finished(self) -> None:
        finished, self._finished = self._finished, []
        for future in finished:
            future.release()

    def _result(self, job: Job, outcome: object, claim: Path) -> AttemptResult:
        from distributed import KilledWorker
        from distributed.comm import CommClosedError

        if isinstance(outcome, AttemptResult):
            return outcome
        if isinstance(outcome, Refused):
            if outcome.reason == "duplicate":
                # Dask reran a task whose first run may have recorded before its worker
                # died: the record, not the lost result, says whether the job finished.
                return self._recorded(job, claim) or AttemptResult(
                    None, "", "lost with its Dask worker (Dask ran it again)"
                )
            if outcome.reason == "write":
                error = OSError(outcome.errno, os.strerror(outcome.errno or 0))
                raise RecordWriteError(Path(outcome.detail), error)
            raise ExecutorLost(
                f"the batch dir is not visible on a Dask worker ({outcome.detail}): it must "
                "be on a filesystem shared by the driver and every worker (see docs/scaling.md)"
            )
        if self._client.status != "running":
            raise ExecutorLost(self._lost_scheduler())
        if isinstance(outcome, concurrent.futures.CancelledError):
            if self.aborting:
                return AttemptResult(None, "", KILLED)
            return self._recorded(job, claim) or AttemptResult(None, "", "cancelled by Dask")
        if isinstance(outcome, KilledWorker | CommClosedError):
            return self._recorded(job, claim) or AttemptResult(
                None, "", "lost with its Dask worker"
            )
        raise ExecutorLost(
            f"a Dask worker could not run {job.case} x {job.model}: "
            f"{type(outcome).__name__}: {outcome}"
        )

    def _lost_scheduler(self) -> str:
        address = self.label or self.scheduler or self.scheduler_file or "the local cluster"
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
                await client.run(stop_invocation, self.token, grace, on_error="ignore")
        pending = [future for future in self._futures if not future.done()]
        if pending:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(CALL_TIMEOUT):
                    await client.cancel(pending)

    async def close(self) -> None:
        self._release_finished()
        client, cluster = self._client, self._cluster
        self._client = self._cluster = None
        # Each step bounded and allowed to fail: a cluster already gone must neither hang
        # the driver nor hide the sweep's outcome behind a traceback.
        if client is not None and client.status == "running":
            with contextlib.suppress(Exception):
                async with asyncio.timeout(CALL_TIMEOUT + self.sweep.kill_grace):
                    await client.run(forget_invocation, self.token, on_error="ignore")
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


def task_key(job: Job, attempt: int, token: str, n: int) -> str:
    """The Dask key of an attempt: its case and model first, for the dashboard (which groups
    by the key's leading words), then the invocation and a counter, which make it unique."""
    repeat = f" r{job.repeat}" if job.repeat != 1 else ""
    return f"{job.case} x {job.model}{repeat} #{attempt}-{token}-{n}"


async def _start_local_cluster(slots: int) -> Any:
    """One worker process with ``slots`` threads, on 127.0.0.1, no dashboard."""
    import dask
    from distributed import LocalCluster

    # A terminal's Ctrl-C reaches the driver's whole process group; a worker started with
    # SIGINT ignored keeps it ignored, so "Ctrl-C once: running jobs finish" still holds.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Dask's nanny sets OMP_NUM_THREADS=1 and the like (``pre-spawn-environ``) in its own
    # process, the driver here, and in its worker, for numpy in the worker; every job would
    # inherit them, though a job's environment is the user's whatever runs it. Nothing of
    # numpy runs in a worker here: its threads only wait for the jobs' processes.
    settings = {
        "distributed.scheduler.allowed-failures": 0,
        "distributed.nanny.pre-spawn-environ": {},
    }
    try:
        with dask.config.set(settings):
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
