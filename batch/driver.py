"""``batch SWEEP``: plan the sweep, run it under the scheduler, keep the summary true.

The flow of one invocation: load the sweep, build the job matrix, pick the batch dir (new,
or the one to resume), take its lock, stop leftovers of a dead driver, decide every job
against the ledger, then execute the plan. Every outcome lands in the job list, and the
summary is a throttled view of it that is rewritten on every state change that matters
(start, finish, interrupt), so it is valid at every moment.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

import attrs

from batch import batchdir
from batch.display import Display, job_label, make_display
from batch.events import EventLog
from batch.executor import (
    Executor,
    ExecutorError,
    check_executor,
    choose_executor,
    make_executor,
)
from batch.jobs import FINAL_STATUSES, Job
from batch.lock import BatchLock, LockedError
from batch.matrix import blocks, build_jobs, select
from batch.memgate import MemoryGate
from batch.processes import ProcessRegistry, pidfd_child_watcher, reap_leftovers
from batch.queue import LOG_NAME, QueueRuntime, before_block_hook
from batch.resume import apply_resume, decide, step_retry_point
from batch.runner import BatchContext, RecordWriteError
from batch.scheduler import Scheduler
from batch.secrets import redact_text, secret_values
from batch.summary import ThrottledWriter, build_summary, write_summary
from batch.sweep import Sweep, SweepError, load_sweep, sweep_snapshot
from run_support.atomic import atomic_write_bytes
from run_support.results import RunMeta, job_status, load_recorded_runs, utc_stamp

EXIT_OK, EXIT_ERRORS, EXIT_USAGE, EXIT_LOCKED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
MAX_BACKOFF = 3600.0
#: Reruns, in one invocation, of a job whose attempt was lost with its (Dask) worker.
LOST_RERUNS = 1


@attrs.frozen
class RunOptions:
    output: Path | None = None
    #: None: a new batch dir; "": resume the newest; otherwise the batch dir to resume.
    resume: str | None = None
    retry_failed: bool = False
    retry_categories: tuple[str, ...] = ()
    max_concurrent: int | None = None
    case_globs: tuple[str, ...] = ()
    model_globs: tuple[str, ...] = ()
    dry_run: bool = False
    progress: bool = True
    #: None: the sweep's ``executor:`` (default local).
    executor: str | None = None
    #: A Dask scheduler address; implies ``executor="dask"``.
    scheduler: str | None = None


class UsageError(Exception):
    """A problem with the command line or the files it names; exit status 2."""


def retry_delay(backoff: float, retry_number: int) -> float:
    """Seconds before automatic retry ``retry_number`` (1-based): doubling, capped at 1 h."""
    return min(backoff * 2 ** (retry_number - 1), MAX_BACKOFF)


def exit_status(jobs: Sequence[Job], *, interrupted: bool) -> int:
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_ERRORS if any(job.status == "error" for job in jobs) else EXIT_OK


@attrs.define
class Plan:
    """Everything decided before the first job starts."""

    sweep: Sweep
    jobs: list[Job]
    batch_dir: Path | None
    carried: int = 0
    retried: int = 0
    to_run: int = 0
    unreadable: list[tuple[str, str]] = attrs.Factory(list)


def make_plan(sweep_path: Path, options: RunOptions, *, read_only: bool = False) -> Plan:
    """Decide every job of the sweep; reads the ledger and, unless ``read_only``, refreshes
    the ledger index. Writes nothing else."""
    sweep = load_sweep(sweep_path)
    if options.output is not None:
        sweep = attrs.evolve(sweep, output=options.output)
    if options.max_concurrent is not None:
        sweep = attrs.evolve(sweep, max_concurrent=options.max_concurrent)
    try:
        executor = choose_executor(sweep.executor, options.executor, options.scheduler)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    sweep = attrs.evolve(sweep, executor=executor)
    jobs = build_jobs(sweep)
    selected = select(jobs, options.case_globs, options.model_globs)
    if not selected:
        raise UsageError("no job matches --cases/--models")
    resume = options.resume
    if resume is None and (options.retry_failed or options.retry_categories):
        resume = ""  # --retry-failed implies --resume
    plan = Plan(sweep=sweep, jobs=jobs, batch_dir=None)
    recorded: Mapping[tuple[str, str], RunMeta] = {}
    if resume is not None:
        try:
            plan.batch_dir = batchdir.resolve_resume_dir(resume, sweep.output, sweep.name)
        except batchdir.BatchDirError as exc:
            raise UsageError(str(exc)) from None
        found = load_recorded_runs(plan.batch_dir, update_index=not read_only)
        plan.unreadable, recorded = found.unreadable, found
        decided = apply_resume(
            jobs,
            recorded,
            retry_failed=options.retry_failed,
            retry_categories=options.retry_categories or None,
            non_model_categories=sweep.non_model_categories,
            steps=sweep.steps,
        )
        plan.jobs = decided.jobs
    chosen = {job.key for job in selected}
    for index, job in enumerate(plan.jobs):
        if not job.needs_run or job.key in chosen:
            continue
        record = recorded.get(job.key)
        if record is not None:
            # Left out, so not retried: its recorded result stands, as under plain --resume.
            plan.jobs[index] = decide(job, record, (), sweep.non_model_categories, sweep.steps)
        else:
            job.decision, job.status = "carry", "skipped"
            job.reason = "not selected by --cases/--models"
    plan.carried = sum(job.decision == "carry" for job in plan.jobs)
    plan.retried = sum(job.decision == "retry" for job in plan.jobs)
    plan.to_run = len(plan.jobs) - plan.carried
    return plan


def run_sweep(
    sweep_path: Path,
    options: RunOptions,
    *,
    stream: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run (or resume) a sweep; returns the exit status (DESIGN §8)."""
    try:
        plan = make_plan(sweep_path, options)
        check_executor(plan.sweep.executor)
    except (SweepError, UsageError, ExecutorError) as exc:
        print(str(exc) if isinstance(exc, SweepError) else f"error: {exc}", file=err)
        return EXIT_USAGE
    secrets = secret_values(plan.sweep.env, *(model.env for model in plan.sweep.models))

    def redact(text: str) -> str:
        return redact_text(text, secrets)

    display = make_display(stream=stream, progress=options.progress, redact=redact)
    try:
        if plan.batch_dir is None:
            plan.batch_dir = batchdir.create_batch_dir(plan.sweep.output, plan.sweep.name)
        lock = BatchLock(plan.batch_dir)
        lock.acquire()
    except LockedError as exc:
        print(f"error: {exc}", file=err)
        return EXIT_LOCKED
    except OSError as exc:
        where = exc.filename if exc.filename is not None else plan.sweep.output
        why = "not a directory" if isinstance(exc, FileExistsError) else exc.strerror or exc
        print(f"error: cannot write {where}: {why}; nothing was started", file=err)
        return EXIT_ERRORS
    try:
        if lock.took_over:
            pid, host = lock.took_over
            display.message(f"warning: took over the lock of a dead driver (pid {pid} on {host})")
        reaped = reap_leftovers(plan.batch_dir, grace=plan.sweep.kill_grace)
        if reaped:
            display.message(f"stopped {len(reaped)} leftover job process group(s) of a dead driver")
        for rel_path, reason in plan.unreadable:
            display.message(f"warning: unreadable record {rel_path}: {reason} (job runs again)")
        try:
            _write_snapshot(plan)
        except RecordWriteError as exc:
            print(f"error: {exc}; nothing was started", file=err)
            return EXIT_ERRORS
        return asyncio.run(_Execution(plan, display, redact, frozenset(secrets)).run())
    finally:
        display.close()
        lock.release()


def _write_snapshot(plan: Plan) -> None:
    """Keep the resolved sweep beside the results; a resume with a changed sweep adds a copy."""
    assert plan.batch_dir is not None
    text = sweep_snapshot(plan.sweep).encode()
    path = plan.batch_dir / batchdir.SNAPSHOT
    if path.exists():
        if path.read_bytes() == text:
            return
        path = plan.batch_dir / batchdir.LOGS / f"sweep-{utc_stamp().replace(':', '')}.yaml"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, text)
    except OSError as exc:
        raise RecordWriteError(path, exc) from exc


class _Execution:
    """One invocation's run of a plan: scheduler, runner, summary, events, signals."""

    def __init__(
        self,
        plan: Plan,
        display: Display,
        redact: Callable[[str], str],
        secrets: frozenset[str] = frozenset(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        assert plan.batch_dir is not None
        self.plan = plan
        self.sweep = plan.sweep
        self.batch_dir = plan.batch_dir
        self.display = display
        self.clock = clock
        self.started_at = utc_stamp()
        self.t0 = clock()
        self.state = "running"
        self.interrupts = 0
        self.write_failed = False
        self.executor_failed = False
        self.lost_left = False
        self.retries_used: dict[tuple[str, str], int] = {}
        self.lost_reruns: dict[tuple[str, str], int] = {}
        self.registry = ProcessRegistry(self.batch_dir, kill_grace=self.sweep.kill_grace)
        self.ctx = BatchContext(
            batch_dir=self.batch_dir,
            batch_id=self.batch_dir.name,
            registry=self.registry,
            secrets=secrets,
        )
        spec = self.sweep.executor
        self.executor: Executor = make_executor(
            spec.kind, self.sweep, self.ctx, scheduler=spec.scheduler
        )
        self.events = EventLog(self.batch_dir / batchdir.LOGS / "events.jsonl", redact)
        self.summary = ThrottledWriter(self._write_summary, self.sweep.summary_interval, clock)
        self.scheduler = Scheduler(
            max_concurrent=self.sweep.max_concurrent,
            model_limits={m.id: m.max_concurrent for m in self.sweep.models},
            stagger=self.sweep.stagger,
            clock=clock,
            start_gate=self._memory_gate(),
        )
        # A model-major queue's reset, settle and cooldown before each model (batch.queue).
        self.before_block = before_block_hook(
            QueueRuntime(
                self.sweep,
                self.batch_dir / batchdir.LOGS / LOG_NAME,
                self.registry,
                stopping=lambda: self.scheduler.stopping,
                on_wait=display.waiting,
            ),
            message=display.message,
            emit=self.events.emit,
        )

    def _memory_gate(self) -> MemoryGate | None:
        """``memfree``: no job starts while less memory is available (batch.memgate)."""
        if self.sweep.memfree is None:
            return None
        return MemoryGate(
            self.sweep.memfree,
            on_wait=self.display.waiting,
            stopping=lambda: self.scheduler.stopping,
        )

    def _write_summary(self) -> None:
        finished = None if self.state == "running" else utc_stamp()
        summary = build_summary(
            self.plan.jobs,
            batch_id=self.batch_dir.name,
            state=self.state,
            started_at=self.started_at,
            finished_at=finished,
            elapsed_seconds=self.clock() - self.t0,
            max_concurrent=self.sweep.max_concurrent,
            non_model_categories=self.sweep.non_model_categories,
        )
        try:
            write_summary(self.batch_dir, summary)
        except OSError as exc:
            self._write_failure(self.batch_dir / "batch-summary.json", exc)

    def _write_failure(self, path: Path, exc: OSError) -> None:
        if not self.write_failed:
            self.display.message(
                f"error: cannot write {path}: {exc.strerror or exc}; "
                "starting no more jobs (recorded results are intact)"
            )
        self.write_failed = True
        self.scheduler.stop()

    def _executor_failure(self, exc: ExecutorError) -> None:
        if not self.executor_failed:
            self.display.message(
                f"error: {exc}; starting no more jobs (recorded results are intact; "
                "--resume runs the rest)"
            )
        self.executor_failed = True
        self.scheduler.stop()

    def _on_signal(self) -> None:
        self.interrupts += 1
        if self.interrupts == 1:
            self.scheduler.stop()
            self.events.emit("interrupt", running=len(self.scheduler.running))
            self.display.message(
                f"interrupted: starting no new jobs; {len(self.scheduler.running)} running "
                "job(s) will finish. Interrupt again to kill them."
            )
        elif self.interrupts == 2:
            self.events.emit("kill", running=len(self.scheduler.running))
            self.display.message("killing running jobs (no record is written for them)")
            asyncio.get_running_loop().create_task(self.executor.kill_all(self.sweep.kill_grace))

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._on_signal)
        to_run = [job for job in self.plan.jobs if job.needs_run]
        self.events.emit(
            "batch_start",
            pid=os.getpid(),
            jobs=len(self.plan.jobs),
            carried=self.plan.carried,
            to_run=len(to_run),
        )
        self.display.begin(
            self.plan.jobs,
            batch_dir=self.batch_dir,
            carried=self.plan.carried,
            to_run=len(to_run),
        )
        self.summary.flush()
        flusher = asyncio.create_task(self._flush_periodically())
        crashed = True
        try:
            try:
                await self.executor.start()
            except ExecutorError as exc:
                self._executor_failure(exc)
            else:
                with pidfd_child_watcher():
                    await self.scheduler.run(
                        blocks(to_run, self.sweep.order), self._run_job, self.before_block
                    )
            crashed = False
        finally:
            flusher.cancel()
            await self.executor.close()
            self.registry.close()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            if crashed:
                self._record_crash()
        interrupted = self.interrupts > 0 or self.write_failed or self.executor_failed
        for job in self.plan.jobs:
            if job.status in ("pending", "running"):
                job.status = "skipped"
        self.state = "interrupted" if interrupted else "complete"
        self.summary.flush()
        self.events.emit("batch_end", state=self.state)
        self.events.close()
        elapsed = self.clock() - self.t0
        self.display.end(
            self.plan.jobs,
            state=self.state,
            elapsed=elapsed,
            summary_path=self.batch_dir / "batch-summary.json",
        )
        if self.write_failed or self.executor_failed or (self.lost_left and not interrupted):
            return EXIT_ERRORS
        return exit_status(self.plan.jobs, interrupted=interrupted)

    def _record_crash(self) -> None:
        """A bug in the driver itself: leave a summary that says so, then let it surface."""
        for job in self.plan.jobs:
            if job.status in ("pending", "running"):
                job.status = "skipped"
        self.state = "interrupted"
        with contextlib.suppress(Exception):
            self.summary.flush()
            self.events.emit("batch_end", state=self.state, crashed=True)

    def _rerun_lost(self, job: Job) -> bool:
        """An attempt without a record that the user did not kill: rerun it, a bounded
        number of times, so a job that takes its worker down cannot loop forever."""
        used = self.lost_reruns.get(job.key, 0)
        if self.interrupts >= 2 or self.scheduler.stopping or used >= LOST_RERUNS:
            return False
        self.lost_reruns[job.key] = used + 1
        return True

    async def _flush_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.sweep.summary_interval)
            if self.summary.dirty:
                self.summary.flush()

    async def _run_job(self, job: Job) -> float | None:
        attempt = job.attempts + 1
        job.status, job.attempts = "running", attempt
        self.display.job_started(job, attempt)
        self.events.emit("start", case=job.case, model=job.model, attempt=attempt)
        self.summary.changed()
        try:
            result = await self.executor.run(job, attempt)
        except RecordWriteError as exc:
            job.status = "pending"
            self._write_failure(exc.path, exc.error)
            return None
        except ExecutorError as exc:
            job.status = "pending"
            self._executor_failure(exc)
            return None
        if result.run_dir:  # empty when a worker was lost before it said where it ran
            job.run_dir = result.run_dir
        if result.meta is None and self._rerun_lost(job):
            # Not aborted, so the executor lost the attempt with its worker: no record, the
            # outcome is unknown; run it again now, as resume would.
            job.status = "pending"
            self.display.job_retrying(job, 0.0, result.reason or "lost with its worker")
            self.events.emit("lost", case=job.case, model=job.model, reason=result.reason)
            self.summary.changed()
            return 0.0
        if result.meta is None:
            # The outcome is unknown, and resume runs it again.
            job.status, job.duration_seconds = "skipped", None
            if self.interrupts >= 2:  # killed on the user's order
                self.events.emit("killed", case=job.case, model=job.model, run_dir=result.run_dir)
            else:  # lost once too often, or while the sweep stops: the exit status says so
                self.lost_left = True
                reason = result.reason or "lost with its worker"
                self.display.message(f"{job_label(job)}: {reason}; left for --resume")
                self.events.emit("lost", case=job.case, model=job.model, reason=reason, rerun=False)
            self.summary.changed()
            return None
        meta = result.meta
        job.status = job_status(meta, self.sweep.non_model_categories)
        job.duration_seconds = meta.duration_seconds
        job.failure_category = meta.failure_category if job.status != "passed" else None
        job.resumed = False
        job.steps = meta.steps
        assert job.status in FINAL_STATUSES
        self.events.emit(
            "finish",
            case=job.case,
            model=job.model,
            attempt=attempt,
            status=job.status,
            failure_category=job.failure_category,
            duration_seconds=round(meta.duration_seconds, 3),
            run_dir=result.run_dir,
        )
        used = self.retries_used.get(job.key, 0)
        if job.status == "error" and used < self.sweep.retries and not self.scheduler.stopping:
            self.retries_used[job.key] = used + 1
            # A multi-step job retries from the step that failed (docs/resume.md).
            job.resume_from_step, job.reuse_run_dir = step_retry_point(meta, self.sweep.steps, job)
            delay = retry_delay(self.sweep.retry_backoff, used + 1)
            self.display.job_retrying(job, delay, job.failure_category or "error")
            self.events.emit("retry", case=job.case, model=job.model, delay_seconds=delay)
            self.summary.changed()
            return delay
        self.display.job_finished(job)
        self.summary.changed()
        return None
