"""One attempt of one job: make its run dir, run it, classify it, write its record last.

The driver calls :func:`run_attempt` for every attempt. The run dir holds ``output.log``
(the job's stdout and stderr, streamed by the OS), whatever the job writes (``result.json``)
and, once the outcome is known, ``run-meta.json`` — written atomically and last, so a run
dir without one is a run whose outcome is unknown. Making the run dir, and telling what a job
did to it, is :mod:`batch.attempt.run_dir`. A run the user's abort killed gets no
record at all: resume runs it again.

A write that fails because the job damaged its own run dir (removed it, replaced it by a
file, made it read-only, put a directory where its record goes) is that job's ``error``,
recorded in a fresh run dir beside it; only when the batch dir refuses that write too (full,
read-only, gone) is it a :class:`RecordWriteError` that stops the sweep.

The hot path is one mkdir and the creation of ``output.log``, one open of that log, one
spawn, one failed open of ``result.json`` and one atomic write (in a file thread:
:mod:`batch.attempt.file_worker`); the log is read only when a failure's category depends
on it.

One idea, past ~450 lines: an attempt from its run dir to its record, every way it can
end (abort, damage to its run dir, a refused write); split, the record's rules would be
read in two places.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from batch.attempt.classify import Classification, ResultFile, finish_reason
from batch.attempt.container_removal import remove_attempt_containers
from batch.attempt.file_worker import FILES
from batch.attempt.run_command import AttemptContext, NotStarted, run_command
from batch.attempt.run_dir import make_run_dir, prepare_run_dir, remove_unstarted, run_dir_damage
from batch.attempt.step_files import read_result
from batch.attempt.steps import run_steps
from batch.attempt.worker_pool import WorkerPool
from batch.errors import RecordWriteError
from batch.layout import container_label, model_dir_name, run_dir_name, run_stamp, safe_name
from batch.plan.jobs import Job
from batch.printable import one_line
from batch.processes.registry import ProcessRegistry
from batch.processes.spawn import DriverLimit, limit_error
from batch.sweep.load import Sweep
from batch.sweep.placeholders import expand_command
from batch.sweep.secrets import redact_text, redact_value
from run_support.results import INFRA_FAILURE, RUN_META, RunMeta, utc_stamp, write_run_meta
from run_support.safe_files import append_text
from run_support.usage import NOTHING_REPORTED, ParsedUsage, usage_in_result, usage_of


@attrs.frozen
class BatchContext:
    batch_dir: Path
    batch_id: str
    registry: ProcessRegistry
    #: Secret values (``batch.sweep.secrets.secret_values``) to keep out of records: a job may
    #: echo a key into ``result.json``, but its ``run-meta.json`` is the driver's to write.
    secrets: frozenset[str] = frozenset()
    #: Told when a multi-step job starts a step (the live display shows it). Not sent to
    #: Dask or Slurm workers, which run without it: those executors report no steps.
    on_step: Callable[[Job, str], None] | None = attrs.field(default=None, eq=False, repr=False)
    #: Told the run dir (relative to the batch dir) of each attempt once it is made, before
    #: the job starts: the driver's ``start`` event and summary row carry it (the view shows
    #: a running job's log). Not sent to Dask or Slurm workers either.
    on_run_dir: Callable[[Job, str], None] | None = attrs.field(default=None, eq=False, repr=False)
    #: Per model: the driver's environment with the sweep's and the model's env on top,
    #: built once, not copied from ``os.environ`` for every job (bench/overhead.py).
    env_cache: dict[str, dict[str, str]] = attrs.field(factory=dict, eq=False, repr=False)
    #: The warm workers (docs/worker.md) of the local executor, which starts and stops them;
    #: None: no model of the sweep has a ``worker``, or the executor is not local.
    workers: WorkerPool | None = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen
class AttemptResult:
    #: None: killed by the driver on a user abort, so no record was written.
    meta: RunMeta | None
    #: The run dir, relative to the batch dir.
    run_dir: str
    #: Why the outcome is what it is, for humans ("exit code 1; output.log matches '429'").
    reason: str = ""
    #: Containers labelled as this attempt's that were removed when it ended; None: the
    #: sweep sets no ``containers`` engine (batch.processes.containers).
    containers_removed: int | None = None
    #: Why not every one was (the engine's message), for a warning line.
    container_warning: str | None = None


async def run_attempt(
    job: Job,
    sweep: Sweep,
    ctx: BatchContext,
    attempt: int,
    *,
    clock: Callable[[], float] = time.time,
) -> AttemptResult:
    """Run attempt ``attempt`` of ``job`` and record its outcome (see the module docstring).

    Raises :class:`RecordWriteError` when the run dir or its record cannot be written and
    the job is not to blame (see the module docstring). Cancelling the task stops the job's
    process group and writes no record.
    """
    started = clock()
    model_dir = model_dir_name(job.model)
    try:
        # On the event loop, not in a file thread: a mkdir and a create cost less than
        # handing them to a thread and back (bench/overhead.py; bench/README.md).
        run_dir = prepare_run_dir(
            ctx.batch_dir / model_dir,
            run_dir_name(job.case, job.model, run_stamp(started), attempt, job.repeat),
            job.case_row,
        )
    except OSError as exc:
        limit = limit_error(exc)
        if limit is not None:  # the driver's open files, not the batch dir
            raise limit from exc
        raise RecordWriteError(ctx.batch_dir / model_dir, exc) from exc
    if ctx.on_run_dir is not None:
        ctx.on_run_dir(job, f"{model_dir}/{run_dir.name}")
    context = AttemptContext(
        job=job,
        sweep=sweep,
        number=attempt,
        batch_dir=ctx.batch_dir,
        batch_id=ctx.batch_id,
        registry=ctx.registry,
        secrets=ctx.secrets,
        run_dir=run_dir,
        values=command_values(job, ctx.batch_dir, run_dir, attempt, ctx.batch_id),
        env=job_env(job, sweep, ctx, run_dir, attempt),
        started=started,
        clock=clock,
        on_step=ctx.on_step,
        workers=ctx.workers,
    )
    ended = _Ended()
    try:
        return await _run_and_record(context, ended)
    except DriverLimit:
        if not sweep.steps:  # nothing ran in it: no trace of an attempt that never was
            remove_unstarted(run_dir)
        raise
    except RecordWriteError as exc:
        damage = run_dir_damage(run_dir)
        if damage is None:
            raise  # the run dir is as the driver left it: the batch dir itself failed
        return await asyncio.to_thread(_record_damage, context, clock(), damage, exc, ended)


@attrs.define
class _Ended:
    """How the attempt's command ended, once it has: kept for a record written elsewhere."""

    verdict: Classification | None = None
    returncode: int | None = None
    spent: ParsedUsage = NOTHING_REPORTED
    containers_removed: int | None = None
    container_warning: str | None = None


async def _run_and_record(attempt: AttemptContext, ended: _Ended) -> AttemptResult:
    try:
        outcome, steps = await _run_job(attempt)
    except BaseException:
        # However the job ended (cancelled, a write refused), its containers go with it.
        await _remove_containers(attempt, ended)
        raise
    # After the job's processes, before its record: the record says what was removed.
    await _remove_containers(attempt, ended)
    if outcome is None:
        return AttemptResult(
            None,
            attempt.rel_run_dir,
            "killed by the user's abort",
            containers_removed=ended.containers_removed,
            container_warning=ended.container_warning,
        )
    verdict, returncode, spent = outcome
    ended.verdict, ended.returncode, ended.spent = verdict, returncode, spent
    finished = attempt.clock()
    result, category, reason = verdict.result, verdict.failure_category, verdict.reason
    result = {**result, **_usage_notes(attempt, spent)}
    if attempt.secrets:
        result = redact_value(result, attempt.secrets)
        steps = redact_value(steps, attempt.secrets)
        category = None if category is None else redact_text(category, attempt.secrets)
        reason = redact_text(reason, attempt.secrets)
    usage, usage_total = _usage_record(attempt.job, spent)
    meta = RunMeta(
        test_case=attempt.job.case,
        model=attempt.job.model,
        outcome=verdict.outcome,
        timestamp=_iso(attempt.started),
        finished_at=_iso(finished),
        duration_seconds=round(max(0.0, finished - attempt.started), 6),
        failure_category=category,
        stop_reason=verdict.stop_reason,
        # Python's convention: -N when signal N ended it, so the record keeps which signal.
        exit_code=returncode,
        attempt=attempt.number,
        batch_id=attempt.batch_id,
        run_dir=attempt.rel_run_dir,
        result=result,
        steps=steps,
        reason=None if verdict.outcome == "passed" else one_line(reason),
        usage=usage,
        usage_total=usage_total,
        containers_removed=ended.containers_removed,
        repeat=attempt.job.repeat,
    )
    await _write_record(attempt, meta)
    return AttemptResult(
        meta,
        attempt.rel_run_dir,
        reason,
        containers_removed=ended.containers_removed,
        container_warning=ended.container_warning,
    )


async def _run_job(
    attempt: AttemptContext,
) -> tuple[tuple[Classification, int | None, ParsedUsage] | None, list[Any] | None]:
    """Run the command or the steps: (verdict, return code, usage) or None when the user's
    abort killed it, and the steps' entries."""
    if not attempt.sweep.steps:
        worker = attempt.sweep.worker_for(attempt.job.model)
        if worker is not None and attempt.workers is not None:
            try:
                return await attempt.workers.serve(attempt, worker), None
            except OSError as exc:  # its output.log cannot be opened: the batch dir refused it
                raise RecordWriteError(attempt.log_path, exc) from exc
        return await _run_command(attempt), None
    # eval → judge: the steps share this run dir and its output.log (batch.attempt.steps).
    try:
        stepped = await run_steps(attempt)
    except OSError as exc:  # the run dir refused a write (a step's log, a reused file)
        raise RecordWriteError(attempt.run_dir, exc) from exc
    if stepped is None:
        return None, None
    return (stepped.verdict, stepped.exit_code, stepped.usage), stepped.entries


async def _remove_containers(attempt: AttemptContext, ended: _Ended) -> None:
    """The attempt's containers removed (:mod:`batch.attempt.container_removal`), once,
    into ``ended``."""
    if ended.containers_removed is not None:
        return
    removal = await remove_attempt_containers(attempt)
    if removal is not None:
        ended.containers_removed, ended.container_warning = removal.removed, removal.warning


#: Seconds between tries of a record write that met the driver's own limits (open files,
#: memory): the job ran, and its outcome is not lost for a moment's want of a descriptor.
_LIMIT_WAITS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)


async def _write_record(attempt: AttemptContext, meta: RunMeta) -> None:
    for wait in (*_LIMIT_WAITS, None):
        try:
            # Off the event loop: the fsyncs would otherwise hold up every other start and
            # finish.
            await FILES.call(write_run_meta, attempt.run_dir, meta)
            return
        except OSError as exc:
            if wait is None or limit_error(exc) is None:
                raise RecordWriteError(attempt.run_dir / RUN_META, exc) from exc
        await asyncio.sleep(wait)


# --- a job that damaged its own run dir ---------------------------------------------------


def _record_damage(
    attempt: AttemptContext, finished: float, damage: str, failure: RecordWriteError, ended: _Ended
) -> AttemptResult:
    """Record the attempt as an ``error`` in a fresh run dir beside the damaged one.

    Raises :class:`RecordWriteError` when the batch dir refuses that as well: then it is
    not the job's doing, and the sweep stops as for any other write failure.
    """
    job, run_dir, started = attempt.job, attempt.run_dir, attempt.started
    model_dir = run_dir.parent
    detail = f"{damage} ({failure})"
    if ended.verdict is not None:
        detail += f"; the job itself ended with: {ended.verdict.reason}"
    if attempt.secrets:
        detail = redact_text(detail, attempt.secrets)
    usage, usage_total = _usage_record(job, ended.spent)
    fresh: Path | None = None
    try:
        with contextlib.suppress(FileExistsError):
            # Not makedirs: a batch dir that is gone is the batch's failure, not recreated.
            os.mkdir(model_dir)
        fresh = make_run_dir(model_dir, run_dir.name, make_model_dir=False)
        rel = f"{model_dir.name}/{fresh.name}"
        meta = RunMeta(
            test_case=job.case,
            model=job.model,
            outcome="error",
            timestamp=_iso(started),
            finished_at=_iso(finished),
            duration_seconds=round(max(0.0, finished - started), 6),
            failure_category=INFRA_FAILURE,
            stop_reason=None if ended.verdict is None else ended.verdict.stop_reason,
            exit_code=ended.returncode,
            attempt=attempt.number,
            batch_id=attempt.batch_id,
            run_dir=rel,
            result={"record_error": detail},
            reason=one_line(finish_reason(damage, None, attempt.redact)),
            # What the job reported spending was spent, whatever it did to its run dir.
            usage=usage,
            usage_total=usage_total,
            containers_removed=ended.containers_removed,
            repeat=job.repeat,
        )
        write_run_meta(fresh, meta)
    except OSError as exc:
        if fresh is not None:
            with contextlib.suppress(OSError):
                os.rmdir(fresh)
        # This write met the batch dir alone: its error is the one to report.
        raise RecordWriteError(model_dir if fresh is None else fresh / RUN_META, exc) from failure
    return AttemptResult(
        meta,
        rel,
        detail,
        containers_removed=ended.containers_removed,
        container_warning=ended.container_warning,
    )


async def _run_command(
    attempt: AttemptContext,
) -> tuple[Classification, int | None, ParsedUsage] | None:
    """Run the sweep's single command: its verdict, its return code and what its
    ``result.json`` says it spent (read even when the timeout stopped it); None if the
    user's abort killed it."""
    read: list[ResultFile] = []

    def result_file(_: int | None = None) -> ResultFile:
        if not read:  # one read serves the outcome and the usage: the hot path opens it once
            read.append(read_result(attempt.run_dir))
        return read[0]

    try:
        ran = await run_command(
            attempt, _command_line(attempt), timeout=attempt.job.timeout, read_result=result_file
        )
    except OSError as exc:  # its output.log cannot be opened: the batch dir refused it
        raise RecordWriteError(attempt.log_path, exc) from exc
    if ran is None:
        return None
    return ran.verdict, ran.returncode, usage_in_result(result_file())


# --- usage ----------------------------------------------------------------------------------


def _usage_record(
    job: Job, spent: ParsedUsage
) -> tuple[dict[str, int | float] | None, dict[str, int | float] | None]:
    """The record's ``usage`` (this attempt) and ``usage_total`` (the job's, this attempt
    included: ``job.usage`` is what its earlier attempts spent); None when unreported."""
    before = usage_of(job.usage)
    return spent.usage.to_json() or None, (before + spent.usage).to_json() or None


def _usage_notes(attempt: AttemptContext, spent: ParsedUsage) -> dict[str, Any]:
    """What the record's ``result`` says about a usage the job reported: ``usage_error``
    for values left out (also a warning line in ``output.log``), ``usage_other`` for keys
    this version does not know. A bad usage never changes the outcome (docs/usage.md)."""
    notes: dict[str, Any] = {}
    if spent.problems:
        notes["usage_error"] = spent.problem
        with contextlib.suppress(OSError):
            append_text(attempt.log_path, f"batch: warning: {spent.problem}; ignored\n")
    if spent.other:
        notes["usage_other"] = spent.other
    return notes


def _command_line(attempt: AttemptContext) -> Sequence[str] | NotStarted:
    """The sweep's command with this attempt's values, or why there is none (logged)."""
    try:
        return expand_command(attempt.sweep.command, attempt.values, attempt.job.params)
    except KeyError as exc:
        # load_sweep checked the command; a case without a param it names still gets here.
        return NotStarted(
            _log_failure(attempt.log_path, f"command: no value for placeholder {exc}")
        )
    except ValueError as exc:
        return NotStarted(_log_failure(attempt.log_path, f"command: {exc}"))


# --- the command and its environment ------------------------------------------------------


def command_values(
    job: Job, batch_dir: Path, run_dir: Path, attempt: int, batch_id: str
) -> dict[str, object]:
    """The value of each placeholder but ``{params.NAME}`` for one attempt."""
    return {
        "case": job.case,
        "model": job.model,
        "model_safe": safe_name(job.model),
        "run_dir": os.path.abspath(run_dir),
        "batch_dir": os.path.abspath(batch_dir),
        "attempt": attempt,
        "container_label": _label(batch_id, run_dir),
        "repeat": job.repeat,
    }


def job_env(
    job: Job, sweep: Sweep, ctx: BatchContext, run_dir: Path, attempt: int
) -> dict[str, str]:
    """The job's environment: the driver's, then the sweep's, the model's, and ``BATCH_*``."""
    base = ctx.env_cache.get(job.model)
    if base is None:
        base = dict(os.environ)
        base.update(sweep.env)
        with contextlib.suppress(KeyError):  # a model not in the sweep has no env of its own
            base.update(sweep.model(job.model).env)
        ctx.env_cache[job.model] = base
    env = dict(base)
    env.update(
        BATCH_CASE=job.case,
        BATCH_MODEL=job.model,
        BATCH_RUN_DIR=os.path.abspath(run_dir),
        BATCH_ATTEMPT=str(attempt),
        # The same number on every rerun of a repeat: a job may seed its sampling with it.
        BATCH_REPEAT=str(job.repeat),
        BATCH_DIR=os.path.abspath(ctx.batch_dir),
        BATCH_CONTAINER_LABEL=_label(ctx.batch_id, run_dir),
    )
    return env


def _label(batch_id: str, run_dir: Path) -> str:
    return container_label(batch_id, f"{run_dir.parent.name}/{run_dir.name}")


# --- small helpers ------------------------------------------------------------------------


def _log_failure(log_path: Path, message: str) -> str:
    try:
        append_text(log_path, f"batch: {message}\n")
    except OSError as exc:
        raise RecordWriteError(log_path, exc) from exc
    return message


def _iso(moment: float) -> str:
    return utc_stamp(datetime.fromtimestamp(moment, UTC))
