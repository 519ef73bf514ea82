"""Executing a decided plan: scheduler, executor, summary, events, signals and display.

Every outcome lands in the job list, and the summary is a throttled view of it that is
rewritten on every state change that matters (start, finish, interrupt), so it is valid at
every moment. How the sweep stops (interrupts, halts, the driver's own failures) is
:mod:`batch.execution.stopping`; the policies (halt, breaker, deadline:
:mod:`batch.execution.policy_runtime`) gate each start and may halt the sweep.

Why one module of ~750 lines: :class:`Execution` is the one place where every part of a run
meets (scheduler, executor, policies, budgets, stop_when, pools, notifications, summary,
events, display), and the order of what happens on a finish or a signal is the thing to
read in one place: the record is written, then the policies see it, then the display and
the summary. Each part
it wires is its own module beside it (``scheduler``, ``stopping``, ``policy_runtime``,
``budgets``, ``stop_when_runtime``, ``pools``, ``driver_limits``, ``model_switch``,
``memgate``, ``events``, ``batch.notify.runtime``); what stays here is the sequence, not the
rules.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from batch.attempt.runner import AttemptResult, BatchContext
from batch.display.next_steps import TypedCommand, closing_lines
from batch.display.plain import Display
from batch.display.text import job_label
from batch.errors import ExecutorLost, ExitStatus, RecordWriteError
from batch.execution.budgets import BudgetRuntime
from batch.execution.concurrency import AdaptiveLimits
from batch.execution.driver_limits import RefusedStarts, cap_lines, read_limits
from batch.execution.events import EventLog
from batch.execution.gate import GateDecision, combine
from batch.execution.memgate import MemoryGate
from batch.execution.model_switch import QueueRuntime, before_block_hook
from batch.execution.policy_runtime import DeadlineAt, PolicyRuntime, stops_starting
from batch.execution.pools import PoolRuntime
from batch.execution.scheduler import Scheduler
from batch.execution.steering import SKIPPED_BY_HAND, ControlRuntime
from batch.execution.stop_when_runtime import StopRuntime
from batch.execution.stopping import Stopping
from batch.executors.base import Executor
from batch.executors.select import make_executor
from batch.layout import BETWEEN_MODELS_LOG, EVENTS, LOGS_DIR, SUMMARY_NAME
from batch.notify.runtime import NotifyRuntime
from batch.plan.jobs import FINAL_STATUSES, Job
from batch.plan.matrix import blocks
from batch.plan.planner import Plan
from batch.plan.resume import keep_recorded, step_retry_point
from batch.policies.deadline import Deadline
from batch.policies.halt import Halt, HaltConfig
from batch.pools.store import PoolStore
from batch.processes.registry import ProcessRegistry
from batch.processes.spawn import DriverLimit, pidfd_child_watcher
from batch.summary.write import SummaryLines, ThrottledWriter, build_summary, write_summary
from batch.sweep.secrets import Redactor
from run_support.results import record_outcome, utc_stamp
from run_support.usage import usage_of

MAX_BACKOFF = 3600.0
#: Reruns, in one invocation, of a job whose attempt was lost with its (Dask) worker.
LOST_RERUNS = 1


def retry_delay(backoff: float, retry_number: int) -> float:
    """Seconds before automatic retry ``retry_number`` (1-based): doubling, capped at 1 h."""
    return min(backoff * 2 ** (retry_number - 1), MAX_BACKOFF)


def _containers_fields(result: AttemptResult) -> dict[str, object]:
    """An attempt's event fields about its containers: none when the sweep sets no engine."""
    fields: dict[str, object] = {}
    if result.containers_removed is not None:
        fields["containers_removed"] = result.containers_removed
    if result.container_warning is not None:
        fields["container_warning"] = result.container_warning
    return fields


def exit_status(jobs: Sequence[Job], *, interrupted: bool) -> ExitStatus:
    if interrupted:
        return ExitStatus.INTERRUPTED
    return ExitStatus.ERRORS if any(job.status == "error" for job in jobs) else ExitStatus.OK


class Execution:
    """One invocation's run of a plan: scheduler, runner, summary, events, signals."""

    def __init__(
        self,
        plan: Plan,
        display: Display,
        redact: Redactor,
        secrets: frozenset[str] = frozenset(),
        clock: Callable[[], float] = time.monotonic,
        *,
        halt: HaltConfig | None = None,
        deadline: Deadline | None = None,
        command: TypedCommand | None = None,
        pools_store: PoolStore | None = None,
    ) -> None:
        """``halt`` replaces the sweep's ``halt`` for this invocation (``--halt``);
        ``pools_store`` holds the pools the sweep's models name (opened by the command)."""
        assert plan.batch_dir is not None
        self.plan = plan
        #: The user's command, for the closing lines' next step (batch.display.next_steps).
        self.command = command or TypedCommand(("batch", str(plan.sweep.path)))
        self.sweep = plan.sweep
        self.batch_dir = plan.batch_dir
        self.display = display
        self.clock = clock
        self.started_at = utc_stamp()
        self.t0 = clock()
        self.state = "running"
        self.lost_left = False
        self.retries_used: dict[tuple[str, str, int], int] = {}
        #: Attempts started whose ``start`` event waits for their run dir (``_on_run_dir``).
        self._unstarted: dict[tuple[str, str, int], int] = {}
        #: The newest record of each job this invocation means to run again, from an earlier
        #: invocation (``--retry-failed``) or from this one (an in-run retry), until it has
        #: a newer one: what the job keeps if the invocation does not get to it.
        self.newest_records = plan.retried_records
        self.records_of_this_run: set[tuple[str, str, int]] = set()
        self.lost_reruns: dict[tuple[str, str, int], int] = {}
        #: Starts the driver's own limits refused (batch.execution.driver_limits).
        self.refused_starts = RefusedStarts()
        self.registry = ProcessRegistry(
            self.batch_dir,
            kill_grace=self.sweep.kill_grace,
            containers=self.sweep.containers,
            containers_env=self.sweep.env,
        )
        self.ctx = BatchContext(
            batch_dir=self.batch_dir,
            batch_id=self.batch_dir.name,
            registry=self.registry,
            secrets=secrets,
            on_step=self._on_step,
            on_run_dir=self._on_run_dir,
        )
        spec = self.sweep.executor
        self.executor: Executor = make_executor(
            spec.kind, self.sweep, self.ctx, scheduler=spec.scheduler
        )
        self.events = EventLog(self.batch_dir / LOGS_DIR / EVENTS, redact)
        for note in self.events.unusable:
            display.message(f"warning: events: {note}")
        self.policies = PolicyRuntime(
            self.sweep,
            plan.jobs,
            halt=self.sweep.halt if halt is None else halt,
            deadline=None
            if deadline is None
            else DeadlineAt(deadline, self.t0 + deadline.seconds_from(datetime.now().astimezone())),
            clock=clock,
            emit=self.events.emit,
            message=display.message,
            # The user's own command (batch.display.next_steps), as the closing lines say it.
            resume_command=self.command.with_option("--resume"),
            on_halt=lambda halt: self.notify_event(
                "halt", reason=halt.message, rule=halt.rule, mode=halt.mode
            ),
        )
        self.budgets = BudgetRuntime(
            self.sweep,
            plan.jobs,
            decide=self.policies.decide,
            emit=self.events.emit,
            message=display.message,
            resume_command=self.command.with_option("--resume"),
        )
        # stop_when (batch.execution.stop_when_runtime): fed the ledger's outcomes now.
        self.stops = StopRuntime(
            self.sweep,
            plan.jobs,
            plan.retried_records,
            emit=self.events.emit,
            message=display.message,
        )
        self.summary = ThrottledWriter(self._write_summary, self.sweep.summary_interval, clock)
        #: The summary's rows as text, each encoded again only once its job is marked changed.
        self.summary_rows = SummaryLines(plan.jobs)
        self.scheduler = Scheduler(
            max_concurrent=self._max_concurrent(),
            model_limits={m.id: m.max_concurrent for m in self.sweep.models},
            stagger=self.sweep.stagger,
            clock=clock,
            start_gate=self._memory_gate(),
            # The controls first: a model skipped by hand is skipped whatever else holds.
            # The pool last: a start it grants takes one of the pool's slots and tokens.
            gate=combine(
                lambda job: self.controls.gate(job),
                self.stops.gate,
                self.budgets.gate,
                self.policies.gate,
                self._pool_gate,
            ),
            on_skip=self._on_skip,
        )
        self.stopping = Stopping(
            self.scheduler,
            display,
            emit=self.events.emit,
            notify=self.notify_event,
            kill_all=lambda: self.executor.kill_all(self.sweep.kill_grace),
            halt=lambda: self.policies.halt,
        )
        self.adaptive = AdaptiveLimits(
            self.sweep, self.scheduler.model_limits, display, self.events.emit
        )
        # Limits shared with other sweeps (batch.execution.pools); None: no model names one.
        self.pools = (
            None
            if pools_store is None
            else PoolRuntime(
                self.sweep,
                pools_store,
                sweep_name=self.batch_dir.name,
                cap=self.scheduler.max_concurrent,
                display=display,
                emit=self.events.emit,
                on_failure=lambda message: self.stopping.on_failure("pools", message),
            )
        )
        # batch steer / batch view (batch.execution.steering).
        self.controls = ControlRuntime(
            self.batch_dir,
            self.scheduler,
            models=frozenset(model.id for model in self.sweep.models),
            adaptive=frozenset(self.adaptive.adaptive.configs),
            stop=self.stopping.by_hand,
            emit=self.events.emit,
            message=display.message,
            clock=clock,
        )
        # A model-major queue's reset, settle and cooldown before each model
        # (batch.execution.model_switch).
        self.before_block = before_block_hook(
            QueueRuntime(
                self.sweep,
                self.batch_dir / LOGS_DIR / BETWEEN_MODELS_LOG,
                self.registry,
                stopping=lambda: self.scheduler.stopping,
                on_wait=display.waiting,
            ),
            message=display.message,
            emit=self.events.emit,
        )
        self.notifications = NotifyRuntime(
            self.sweep,
            batch_dir=self.batch_dir,
            registry=self.registry,
            redact=redact,
            standing=lambda: (self.state, [job.status for job in self.plan.jobs]),
            emit=self.events.emit,
            message=display.message,
            clock=clock,
        )

    def _pool_gate(self, job: Job) -> GateDecision:
        if self.pools is None:
            return GateDecision.start()
        return self.pools.gate(job, self.clock())

    def _on_run_dir(self, job: Job, run_dir: str) -> None:
        """The attempt running ``job`` made its run dir: the ``start`` event says it, and the
        summary row shows it, while the job runs (the view's page follows its log)."""
        job.run_dir = run_dir
        attempt = self._unstarted.pop(job.key, None)
        if attempt is not None:
            self._say_started(job, attempt, run_dir)
        self._job_changed(job)

    def _say_started(self, job: Job, attempt: int, run_dir: str | None = None) -> None:
        where = {} if run_dir is None else {"run_dir": run_dir}
        self.events.emit("start", **job.event_fields(), attempt=attempt, **where)

    def _on_step(self, job: Job, step: str) -> None:
        """A multi-step job starts ``step``: the live view and ``events.jsonl`` (batch view)."""
        self.display.job_step(job, step)
        self.events.emit("step", **job.event_fields(), step=step)

    def _max_concurrent(self) -> int:
        """The sweep's ``max_concurrent``, within what the driver's own open-file and
        process limits leave room for when jobs are its children (said once each)."""
        if self.sweep.executor.kind != "local":
            return self.sweep.max_concurrent
        cap, warnings = cap_lines(self.sweep.max_concurrent, read_limits())
        for line in warnings:
            self.display.message(line)
        return cap

    def _start_refused(self, job: Job, attempt: int, exc: DriverLimit) -> float | None:
        """``job`` could not start for want of the driver's own resources: no record, no
        attempt spent; it waits its turn again with fewer jobs at once (said once). When
        not even one job can start, the sweep stops as for a batch dir it cannot write."""
        job.status, job.attempts = "pending", attempt - 1
        self.display.job_unstarted(job)
        others = len(self.scheduler.running) - 1  # this job's task is still counted
        self.events.emit("start_refused", **job.event_fields(), reason=str(exc))
        self._job_changed(job)
        refusal = self.refused_starts.refused(others, self.scheduler.max_concurrent)
        if refusal.stop:
            self.stopping.on_failure(
                "limits",
                f"cannot start a job even alone ({exc}); starting no more jobs (recorded "
                "results are intact; --resume runs the rest)",
            )
            return None
        if refusal.cap is not None:
            self.scheduler.max_concurrent = refusal.cap
        if refusal.say:
            self.display.message(
                f"warning: the driver cannot start more jobs at once ({exc}); running at "
                f"most {refusal.cap} at once from now on (no job is charged for it)"
            )
        return refusal.delay

    def notify_event(self, event: str, **fields: Any) -> None:
        """Tell the ``notify`` commands about ``event`` (``end``, ``halt``, ``interrupt``,
        ``stall``, ``recovered``) with the counts as they are now; returns at once.

        Every halt the policies keep calls ``notify_event("halt", reason=message, rule=...,
        mode=...)``, a deadline's or a budget's soft one too."""
        self.notifications.notify(event, **fields)

    def _memory_gate(self) -> MemoryGate | None:
        """``memfree``: no job starts while less memory is available (batch.execution.memgate)."""
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
            halt=self.policies.summary_halt(),
            stop_when=self.stops.summary(),
            with_rows=False,
        )
        try:
            # Once the state is no longer running, this is the invocation's last summary.
            write_summary(self.batch_dir, summary, self.summary_rows, last=finished is not None)
        except OSError as exc:
            self._write_failure(self.batch_dir / SUMMARY_NAME, exc)

    def _write_failure(self, path: Path, exc: OSError) -> None:
        self.stopping.on_failure(
            "write",
            f"cannot write {path}: {exc.strerror or exc}; "
            "starting no more jobs (recorded results are intact)",
        )

    def _executor_failure(self, exc: ExecutorLost) -> None:
        self.stopping.on_failure(
            "executor",
            f"{exc}; starting no more jobs (recorded results are intact; --resume runs the rest)",
        )

    def _act_on(self, halt: Halt | None) -> None:
        """A policy's halt stops the sweep (batch.execution.stopping); the summary says so."""
        if self.stopping.on_halt(halt):
            self.summary.changed()

    def _on_skip(self, job: Job, reason: str) -> None:
        """A policy did not start ``job``. One that already ran in this invocation (an
        in-run retry not started) keeps its recorded status; any other is ``skipped``, with
        no record, so ``--resume`` runs it."""
        self.events.emit("skip", **job.event_fields(), reason=reason)
        if job.status not in FINAL_STATUSES:
            job.skip_reason = reason
            self._left_unrun(job)
        self.display.job_skipped(job, reason)
        self._job_changed(job)

    async def _deadline_timer(self, deadline: DeadlineAt) -> None:
        await asyncio.sleep(max(0.0, deadline.at - self.clock()))
        self.scheduler.stop()
        self._act_on(self.policies.deadline_reached(len(self.scheduler.running)))

    async def run(self) -> ExitStatus:
        # Around the whole run, notifiers at the end included: a process started under one
        # child watcher must be reaped by it.
        with pidfd_child_watcher():
            return await self._run()

    async def _run(self) -> ExitStatus:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.stopping.on_signal)
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
        self.adaptive.begin()
        if self.pools is not None:
            self.pools.begin()
        if (
            self.plan.resuming
            and not self.plan.retried
            and self.sweep.summary_interval > 0
            and (self.batch_dir / SUMMARY_NAME).is_file()
        ):
            # A resume's first summary holds every job (24 MB for 100,000) and would delay
            # the first start by seconds: it is written one summary_interval after the start,
            # the first jobs started. Until then the batch dir keeps the summary the last
            # driver left, which stays true: a job that runs has no record, so its row there
            # is not final (a retry's would be: a retry writes the summary first, as does a
            # resume that finds none). The periodic flush or a finish writes it when due.
            self.summary.hold()
        else:
            self.summary.flush()
        flusher = asyncio.create_task(self._flush_periodically())
        controls = asyncio.create_task(self.controls.follow())
        pools = None if self.pools is None else asyncio.create_task(self.pools.follow())
        deadline = self.policies.deadline
        timer = None if deadline is None else asyncio.create_task(self._deadline_timer(deadline))
        stall = self.notifications.start_timer()
        crashed = True
        try:
            try:
                await self.executor.start()
            except ExecutorLost as exc:
                self._executor_failure(exc)
            else:
                await self.scheduler.run(
                    blocks(to_run, self.sweep.order), self._run_job, self.before_block
                )
            crashed = False
        finally:
            flusher.cancel()
            controls.cancel()
            if pools is not None:
                pools.cancel()
            if self.pools is not None:
                self.pools.close()
            if timer is not None:
                timer.cancel()
            if stall is not None:
                stall.cancel()
            await self.executor.close()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            if crashed:
                self.registry.close()
                self._record_crash()
        interrupted = self.stopping.interrupted
        halt = self.policies.halt
        for job in self.plan.jobs:
            if job.status == "pending" and job.model in self.controls.skipped:
                # A job of a model skipped by hand whose turn never came (a stop came
                # first) is skipped by hand all the same: the summary says why.
                self._on_skip(job, SKIPPED_BY_HAND)
            if job.status in ("pending", "running"):
                if halt is not None and job.skip_reason is None and not interrupted:
                    # As every job a policy keeps from starting: a SKIP line, a skip event,
                    # and the progress bar's count (docs/policies.md).
                    self._on_skip(job, f"halted: {halt.message}")
                self._left_unrun(job)
        if interrupted:
            self.state = "interrupted"
        else:
            self.state = "complete" if halt is None else "halted"
        self.summary_rows.changed()  # the last summary is made from every job afresh
        self.summary.flush()
        if self.stopping.failures or (self.lost_left and not interrupted):
            status = ExitStatus.ERRORS
        elif self.state == "halted":
            status = ExitStatus.HALTED
        else:
            status = exit_status(self.plan.jobs, interrupted=interrupted)
        self.notify_event("end", exit_status=int(status))
        try:
            await self.notifications.drain()
        finally:
            # After the drain: a notifier still running is tracked (and swept) to the end.
            self.registry.close()
        self.events.emit("batch_end", state=self.state)
        self.events.close()
        elapsed = self.clock() - self.t0
        self.display.end(
            self.plan.jobs,
            state=self.state,
            elapsed=elapsed,
            summary_path=self.batch_dir / SUMMARY_NAME,
            next_steps=closing_lines(
                self.state,
                self.plan.jobs,
                self.command,
                batch_dir=self.batch_dir,
                halt=self.policies.summary_halt() if self.state == "halted" else None,
                attempt_limit=self.plan.attempt_budget.limit,
                stop_lines=self.stops.closing_lines(),
            ),
        )
        return status

    def _record_crash(self) -> None:
        """A bug in the driver itself: leave a summary that says so, then let it surface."""
        for job in self.plan.jobs:
            if job.status in ("pending", "running"):
                self._left_unrun(job)
        self.state = "interrupted"
        self.summary_rows.changed()
        with contextlib.suppress(Exception):
            self.summary.flush()
            self.events.emit("batch_end", state=self.state, crashed=True)

    def _left_unrun(self, job: Job) -> None:
        """``job`` ends this invocation without an outcome of its own from it: it keeps its
        newest record's status, duration, category and run dir (a job ``--retry-failed``
        or an in-run retry did not get to), or is ``skipped`` when it has none."""
        if job.status in FINAL_STATUSES:
            return
        record = self.newest_records.get(job.key)
        if record is None:
            job.status = "skipped"
            return
        resumed = job.key not in self.records_of_this_run
        keep_recorded(job, record, self.sweep.non_model_categories, resumed=resumed)

    def _rerun_lost(self, job: Job) -> bool:
        """An attempt without a record that the user did not kill: rerun it, a bounded
        number of times, so a job that takes its worker down cannot loop forever."""
        used = self.lost_reruns.get(job.key, 0)
        if self.stopping.killing or self.scheduler.stopping or used >= LOST_RERUNS:
            return False
        self.lost_reruns[job.key] = used + 1
        return True

    def _attempts_left(self, job: Job, attempt: int) -> bool:
        """Whether the attempt budget allows another attempt after ``attempt``; an event
        says so when it does not."""
        limit = self.plan.attempt_budget.limit(job.model)
        if attempt < limit:
            return True
        self.events.emit("budget_spent", **job.event_fields(), attempts=attempt, max_attempts=limit)
        return False

    async def _flush_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.sweep.summary_interval)
            if self.summary.dirty and self.summary.due():
                self.summary.flush()

    async def _run_job(self, job: Job) -> float | None:
        """One attempt of ``job``; returns its retry delay or None (the scheduler's run_job)."""
        self.notifications.job_started()
        recorded = False
        try:
            delay = await self._attempt(job)
            # Only a record is progress (the stall timer): a lost or killed attempt is none.
            recorded = job.status in FINAL_STATUSES
            return delay
        finally:
            self.notifications.job_ended(finished=recorded)
            if self.pools is not None:
                self.pools.ended(job)  # an attempt with no record: its pool slot back

    def _job_changed(self, job: Job) -> None:
        """``job`` changed: its summary row is made again, and the summary is due a rewrite."""
        self.summary_rows.changed(job)
        self.summary.changed()

    async def _attempt(self, job: Job) -> float | None:
        try:
            return await self._run_attempt(job)
        finally:
            # Whichever way the attempt ended, its job's row is read again on the next write.
            self.summary_rows.changed(job)

    async def _run_attempt(self, job: Job) -> float | None:
        started = self.clock()
        attempt = job.attempts + 1
        # The reason and the run dir were the previous attempt's: this one gets its own (its
        # run dir as soon as it is made, from an executor that tells it: _on_run_dir).
        job.status, job.attempts, job.reason, job.run_dir = "running", attempt, None, None
        self.display.job_started(job, attempt)
        if getattr(self.executor, "tells_run_dir", False):
            self._unstarted[job.key] = attempt
        else:
            self._say_started(job, attempt)
        self._job_changed(job)
        try:
            try:
                result = await self.executor.run(job, attempt)
            finally:
                if self._unstarted.pop(job.key, None) is not None:  # it made no run dir
                    self._say_started(job, attempt)
        except DriverLimit as exc:
            return self._start_refused(job, attempt, exc)
        except RecordWriteError as exc:
            job.status = "pending"
            self._write_failure(exc.path, exc.error)
            self.display.job_stopped(job, "its record could not be written")
            return None
        except ExecutorLost as exc:
            job.status = "pending"
            self._executor_failure(exc)
            self.display.job_stopped(job, "its executor was lost")
            return None
        if result.run_dir:  # empty when a worker was lost before it said where it ran
            job.run_dir = result.run_dir
        containers = _containers_fields(result)
        if result.container_warning is not None:
            self.display.message(f"warning: {job_label(job)}: {result.container_warning}")
        if result.meta is None and self._rerun_lost(job):
            # Not aborted, so the executor lost the attempt with its worker: no record, the
            # outcome is unknown; run it again now, as resume would.
            job.status = "pending"
            self.display.job_retrying(job, 0.0, result.reason or "lost with its worker")
            self.events.emit("lost", **job.event_fields(), reason=result.reason, **containers)
            self._job_changed(job)
            return 0.0
        if result.meta is None:
            # The outcome is unknown, and resume runs it again.
            job.status, job.duration_seconds = "skipped", None
            self._left_unrun(job)
            if self.stopping.killing:  # killed on the user's order, or by halt now
                self.display.job_stopped(job, self.stopping.kill_reason(result.reason))
                if self.stopping.interrupts < 2 and self.policies.halt is not None:
                    job.skip_reason = f"halted: {self.policies.halt.message}"
                self.events.emit(
                    "killed", **job.event_fields(), run_dir=result.run_dir, **containers
                )
            else:  # lost once too often, or while the sweep stops: the exit status says so
                self.lost_left = True
                reason = result.reason or "lost with its worker"
                self.display.job_stopped(job, reason)
                self.events.emit(
                    "lost", **job.event_fields(), reason=reason, rerun=False, **containers
                )
            self._job_changed(job)
            return None
        meta = result.meta
        # This record is the job's newest now; kept only while a retry of it is to come.
        self.newest_records.pop(job.key, None)
        self.records_of_this_run.discard(job.key)
        # The job's total so far: its next attempt, if any, adds to it (docs/usage.md).
        outcome = record_outcome(meta, self.sweep.non_model_categories, usage="total")
        job.take_outcome(outcome, resumed=False, place=False)
        # Now, not only below: a rewrite the policies cause next shows this finish.
        self.summary_rows.changed(job)
        assert job.status in FINAL_STATUSES
        extra: dict[str, object] = {}
        if job.reason is not None:
            extra["reason"] = job.reason
        attempt_usage = usage_of(meta.usage)
        spent = attempt_usage.to_json()
        if spent:  # this attempt's, and the job's total with it
            extra["usage"], extra["usage_total"] = spent, job.usage
        self.events.emit(
            "finish",
            **job.event_fields(),
            attempt=attempt,
            status=job.status,
            failure_category=job.failure_category,
            duration_seconds=round(meta.duration_seconds, 3),
            run_dir=result.run_dir,
            **extra,
            **containers,
        )
        self.adaptive.record(
            job.model, job.status, job.failure_category, started=started, now=self.clock()
        )
        if self.pools is not None:
            self.pools.finished(job, job.status, job.failure_category)
        self.budgets.add(job.model, attempt_usage)
        used = self.retries_used.get(job.key, 0)
        retry = (
            job.status == "error"
            and used < self.sweep.retries
            and not self.scheduler.stopping
            and self._attempts_left(job, attempt)
        )
        held_back = self.budgets.retry_refusal(job) if retry else None
        retry = retry and held_back is None
        # What the policies say of this finish (a breaker opened, a halt) is said after the
        # job's own line: the line of the failure that opened a breaker comes first.
        with self.policies.messages_held():
            halt = self.policies.finished(
                job,
                status=job.status,
                category=job.failure_category,
                reason=result.reason,
                final=not retry,
            )
            if retry:  # the breaker this finish opened would refuse the retry: none is said
                held_back = self.policies.retry_refusal(job)
                retry = held_back is None
            if retry and not self.scheduler.stopping and not stops_starting(halt):
                self.retries_used[job.key] = used + 1
                self.newest_records[job.key] = meta
                self.records_of_this_run.add(job.key)
                # A multi-step job retries from the step that failed (docs/resume.md).
                job.resume_from_step, job.reuse_run_dir = step_retry_point(
                    meta, self.sweep.steps, job
                )
                delay: float | None = retry_delay(self.sweep.retry_backoff, used + 1)
                why = "; ".join(part for part in (job.failure_category, job.reason) if part)
                self.display.job_retrying(job, delay or 0.0, why or "error")
                self.events.emit("retry", **job.event_fields(), delay_seconds=delay)
            elif held_back is not None:
                delay = None
                self._on_skip(job, held_back)  # as the retry's gate would have: it says why
            else:
                delay = None
                self.display.job_finished(job)
        if delay is None:  # final: no in-run retry to come
            self.stops.finished(job)
        self._act_on(halt)
        self._job_changed(job)
        return delay
