"""The ``slurm`` executor: Dask tasks on worker jobs the driver submits to Slurm.

For the sweep's lifetime the driver runs a dask-jobqueue ``SLURMCluster``: its scheduler
lives in the driver's event loop and each of its workers is one Slurm job (``sbatch``)
with ``cores`` job slots. The jobs themselves run through :class:`~batch.executors.dask.
DaskExecutor`, connected to that scheduler as to any other: records, claims, lost workers
and Ctrl-C work exactly as for ``dask`` (``docs/scaling.md``).

What this module adds is the worker jobs' lifetime. They carry one name, derived from the
batch dir (:func:`job_name`), so that whatever happened to the driver before — a SIGKILL
leaves jobs queued or running, and no ``atexit`` of dask-jobqueue runs — ``scancel -n NAME``
at the start and at the end of every invocation leaves nothing of this batch in the queue.
Workers are submitted as the driver hands out work (never more than the running attempts
need, nor than ``workers``), or scaled by Dask's adaptive between ``adaptive``'s bounds; a
worker job Slurm ended (``scancel``, walltime) is submitted again.

dask-jobqueue is imported only when a sweep uses Slurm, so ``batch`` runs without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import hashlib
import math
import os
import re
import shlex
import signal
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from batch.attempt.runner import AttemptResult, BatchContext
from batch.errors import ExecutorLost
from batch.executors.dask import CALL_TIMEOUT, DaskExecutor
from batch.layout import LOGS_DIR
from batch.plan.jobs import Job
from batch.sweep.features.executor import SlurmSpec
from batch.sweep.load import Sweep

if TYPE_CHECKING:
    from dask_jobqueue import SLURMCluster

#: Under the batch dir's ``batch-logs``: the worker jobs' stdout/stderr (``NAME-<jobid>.out``).
SLURM_LOGS = "slurm"
#: A worker job whose scheduler is gone (the driver killed) ends itself this much later.
DEATH_TIMEOUT = 60
#: How often lost worker jobs are replaced, and how long Dask waits before it calls one lost.
WATCH_INTERVAL = 2.0
LOST_WORKER_TIMEOUT = "2s"
#: Bound on each ``sbatch``/``scancel``/``squeue`` the driver runs itself.
COMMAND_TIMEOUT = 30.0
#: How long the driver waits for cancelled worker jobs to leave the queue (Slurm's default
#: KillWait, after which it SIGKILLs what is left), and how often it looks.
GONE_TIMEOUT = 30.0
GONE_POLL = 0.25


def job_name(batch_dir: str | os.PathLike[str]) -> str:
    """The Slurm job name of this batch dir's worker jobs: ``batch-<dir name>-<hash>``.

    The hash of the absolute path tells two batch dirs of the same name apart; the name is
    kept to ``[A-Za-z0-9._-]`` because dask-jobqueue writes ``#SBATCH -J NAME`` unquoted.
    """
    absolute = os.path.abspath(batch_dir)
    digest = hashlib.sha256(absolute.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", os.path.basename(absolute))[:40]
    return f"batch-{stem}-{digest}"


def worker_jobs(running: int, cores: int, most: int) -> int:
    """Worker jobs for ``running`` attempts at ``cores`` slots each, at most ``most``."""
    return min(most, math.ceil(running / cores))


def import_slurm_cluster() -> type[SLURMCluster]:
    """``dask_jobqueue.SLURMCluster``, imported with the driver's SIGINT handler kept.

    dask-jobqueue 0.9.0 installs ``signal.signal(SIGINT, lambda *_: sys.exit())`` when it is
    first imported (dask/dask-jobqueue#696), which would turn Ctrl-C into a quiet exit.
    """
    handler = signal.getsignal(signal.SIGINT)
    try:
        from dask_jobqueue import SLURMCluster
    finally:
        signal.signal(signal.SIGINT, handler)
    return SLURMCluster


class SlurmExecutor:
    """A ``SLURMCluster`` started for the sweep, its jobs run by a :class:`DaskExecutor`."""

    def __init__(self, sweep: Sweep, ctx: BatchContext) -> None:
        # None: ``--executor slurm`` over a sweep file without Slurm settings.
        self.spec: SlurmSpec = sweep.executor.slurm or SlurmSpec()
        self.sweep = sweep
        self.name = job_name(ctx.batch_dir)
        self.log_dir = Path(os.path.abspath(ctx.batch_dir)) / LOGS_DIR / SLURM_LOGS
        self.dask = DaskExecutor(sweep, ctx, label=f"the Slurm cluster's scheduler ({self.name})")
        self.most = self.spec.workers or math.ceil(sweep.max_concurrent / self.spec.cores)
        self._cluster: Any = None
        self._running = 0
        self._watch: asyncio.Task[None] | None = None

    async def start(self) -> None:
        # Worker jobs of an earlier invocation of this batch (a killed driver's) are orphans:
        # their scheduler is gone, whatever they run has no record and is rerun.
        await scancel(self.name)
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ExecutorLost(f"cannot write {self.log_dir}: {exc.strerror or exc}") from None
        self._cluster = await self._start_cluster()
        await self._check_submission()
        self.dask.scheduler = self._cluster.scheduler_address
        await self.dask.start()
        if self.spec.adaptive is not None:
            minimum, maximum = self.spec.adaptive
            self._cluster.adapt(minimum_jobs=minimum, maximum_jobs=maximum)
        else:
            self._watch = asyncio.get_running_loop().create_task(self._replace_lost())

    async def _start_cluster(self) -> Any:
        import dask

        cluster_class = import_slurm_cluster()
        spec = self.spec
        scheduler_options: dict[str, Any] = {"dashboard_address": ":0"}
        if spec.host is not None:
            scheduler_options["host"] = spec.host
        # The driver reruns a lost worker's jobs itself (once): Dask must not. A worker
        # gone is "lost" after 2 s rather than 15 s, so that its Slurm job is replaced soon.
        dask.config.set({"distributed.deploy.lost-worker-timeout": LOST_WORKER_TIMEOUT})
        try:
            with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
                async with asyncio.timeout(CALL_TIMEOUT * 3):
                    return await cluster_class(
                        queue=spec.queue,
                        account=spec.account,
                        job_name=self.name,
                        cores=spec.cores,
                        processes=1,
                        memory=f"{spec.memory}B",
                        walltime=spec.walltime,
                        job_extra_directives=list(spec.job_directives),
                        job_script_prologue=list(spec.prologue),
                        # ``exec``: the worker replaces the job script's shell, so it stays a
                        # child of slurmstepd. Otherwise, once a cancel's SIGTERM ends the
                        # shell, the worker (still closing) is reparented to init, and
                        # proctrack/linuxproc's SIGKILL after KillWait never reaches it.
                        python=f"exec {spec.python or shlex.quote(sys.executable)}",
                        scheduler_options=scheduler_options,
                        death_timeout=DEATH_TIMEOUT,
                        # No nanny: it would restart a dead worker, which the driver does not
                        # want (the Slurm job is replaced instead), and it costs a second
                        # Python start in every worker job.
                        nanny=False,
                        log_directory=str(self.log_dir),
                        asynchronous=True,
                    )
        except Exception as exc:  # dask-jobqueue reports bad arguments as ValueError & co
            raise ExecutorLost(f"cannot start the Slurm cluster: {exc}") from None

    async def _check_submission(self) -> None:
        """``sbatch --test-only`` of the worker job: a wrong partition, account or limit
        stops the sweep at once with Slurm's reason, instead of workers that never come."""
        with tempfile.NamedTemporaryFile("w", suffix=".sh", prefix="batch-worker-") as script:
            script.write(self._cluster.job_script())
            script.flush()
            code, output = await run_command(["sbatch", "--test-only", script.name])
        if code != 0:
            reason = " ".join(output.split()) or f"exit status {code}"
            raise ExecutorLost(f"Slurm refuses the worker job: {reason}")

    async def run(self, job: Job, attempt: int) -> AttemptResult:
        self._running += 1
        try:
            self._scale()
            return await self.dask.run(job, attempt)
        finally:
            self._running -= 1

    def _scale(self) -> None:
        """Enough worker jobs for the attempts handed out so far (never fewer: a worker is
        idle only near the end, and retiring it could take a job with it)."""
        if self._cluster is None or self.spec.adaptive is not None:
            return
        wanted = worker_jobs(self._running, self.spec.cores, self.most)
        if wanted > len(self._cluster.worker_spec):
            self._cluster.scale(jobs=wanted)

    async def _replace_lost(self) -> None:
        """Resubmit worker jobs Slurm ended: ``scale`` to the same count submits a job for
        every worker of the spec that Dask has given up as lost."""
        while True:
            await asyncio.sleep(WATCH_INTERVAL)
            cluster = self._cluster
            if cluster is not None and set(cluster.worker_spec) - set(cluster.workers):
                cluster.scale(jobs=len(cluster.worker_spec))

    async def kill_all(self, grace: float) -> None:
        if self._watch is not None:
            self._watch.cancel()
        await self.dask.kill_all(grace)

    async def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        await self.dask.close()
        cluster, self._cluster = self._cluster, None
        if cluster is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(CALL_TIMEOUT * 3):
                    await cluster.close()  # scancels each worker job it submitted
        # And whatever it had not yet heard of (a job submitted while closing).
        await scancel(self.name)


async def scancel(name: str, *, gone_within: float = GONE_TIMEOUT) -> None:
    """Cancel this user's Slurm jobs named ``name`` and wait, up to ``gone_within``, until
    Slurm lists none of them: a cancelled job stays in the queue, completing, until its
    worker has exited (at the latest KillWait after the SIGTERM). A failure changes nothing
    here."""
    user = getpass.getuser()
    with contextlib.suppress(OSError):
        await run_command(["scancel", "--name", name, "--user", user])
        deadline = asyncio.get_running_loop().time() + gone_within
        while asyncio.get_running_loop().time() < deadline:
            code, output = await run_command(["squeue", "-h", "-n", name, "-u", user, "-o", "%i"])
            if code != 0 or not output.split():
                return
            await asyncio.sleep(GONE_POLL)


async def run_command(argv: list[str]) -> tuple[int, str]:
    """Exit status and output (stdout and stderr) of ``argv``, killed after a bound."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        async with asyncio.timeout(COMMAND_TIMEOUT):
            output, _ = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        return -1, f"{argv[0]} did not answer within {COMMAND_TIMEOUT:.0f}s"
    return process.returncode or 0, output.decode("utf-8", "replace")
