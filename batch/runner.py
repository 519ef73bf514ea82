"""One attempt of one job: make its run dir, run it, classify it, write its record last.

The driver calls :func:`run_attempt` for every attempt. The run dir holds ``output.log``
(the job's stdout and stderr, streamed by the OS), whatever the job writes (``result.json``)
and, once the outcome is known, ``run-meta.json`` — written atomically and last, so a run
dir without one is a run whose outcome is unknown. A run the user's abort killed gets no
record at all: resume runs it again.

The hot path is one mkdir, one open, one spawn, one failed open of ``result.json`` and one
atomic write; the log is read only when a failure's category depends on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import attrs

from batch.classify import Classification, classify
from batch.jobs import Job
from batch.naming import model_dir_name, run_dir_name, run_stamp, safe_name
from batch.placeholders import expand_command
from batch.processes import ProcessRegistry, SpawnError, spawn, supervise
from batch.secrets import redact_text, redact_value
from batch.step_files import OUTPUT_LOG, read_log_from, read_result
from batch.steps import run_steps
from batch.sweep import Sweep
from run_support.results import RUN_META, RunMeta, utc_stamp, write_run_meta


@attrs.frozen
class BatchContext:
    batch_dir: Path
    batch_id: str
    registry: ProcessRegistry
    #: Secret values (``batch.secrets.secret_values``) to keep out of records: a job may
    #: echo a key into ``result.json``, but its ``run-meta.json`` is the driver's to write.
    secrets: frozenset[str] = frozenset()
    #: Per model: the driver's environment with the sweep's and the model's env on top,
    #: built once (copying ``os.environ`` for every job costs ~0.1 ms).
    env_cache: dict[str, dict[str, str]] = attrs.field(factory=dict, eq=False, repr=False)


@attrs.frozen
class AttemptResult:
    #: None: killed by the driver on a user abort, so no record was written.
    meta: RunMeta | None
    #: The run dir, relative to the batch dir.
    run_dir: str
    #: Why the outcome is what it is, for humans ("exit code 1; output.log matches '429'").
    reason: str = ""


class RecordWriteError(Exception):
    """The batch dir refused a write (disk full, permissions): no more jobs should start.

    Records already written are intact, each having been replaced atomically.
    """

    def __init__(self, path: Path, error: OSError) -> None:
        super().__init__(f"cannot write {path}: {error.strerror or error}")
        self.path = path
        self.error = error


async def run_attempt(
    job: Job,
    sweep: Sweep,
    ctx: BatchContext,
    attempt: int,
    *,
    clock: Callable[[], float] = time.time,
) -> AttemptResult:
    """Run attempt ``attempt`` of ``job`` and record its outcome (see the module docstring).

    Raises :class:`RecordWriteError` when the run dir or its record cannot be written.
    Cancelling the task stops the job's process group and writes no record.
    """
    started = clock()
    model_dir = model_dir_name(job.model)
    try:
        run_dir = make_run_dir(
            ctx.batch_dir / model_dir,
            run_dir_name(job.case, job.model, run_stamp(started), attempt),
        )
    except OSError as exc:
        raise RecordWriteError(ctx.batch_dir / model_dir, exc) from exc
    rel_run_dir = f"{model_dir}/{run_dir.name}"
    steps = None
    if sweep.steps:
        # eval → judge: the steps share this run dir and its output.log (batch.steps).
        try:
            ran = await run_steps(
                job,
                sweep,
                ctx.registry,
                ctx.batch_dir,
                run_dir,
                values=command_values(job, ctx.batch_dir, run_dir, attempt),
                env=job_env(job, sweep, ctx, run_dir, attempt),
            )
        except OSError as exc:  # the run dir refused a write (a step's log, a reused file)
            raise RecordWriteError(run_dir, exc) from exc
        outcome = None if ran is None else (ran.verdict, ran.exit_code)
        steps = None if ran is None else ran.entries
    else:
        outcome = await _run_command(job, sweep, ctx, run_dir, attempt)
    if outcome is None:
        return AttemptResult(None, rel_run_dir, "killed by the user's abort")
    verdict, returncode = outcome
    finished = clock()
    result, category, reason = verdict.result, verdict.failure_category, verdict.reason
    if ctx.secrets:
        result = redact_value(result, ctx.secrets)
        steps = redact_value(steps, ctx.secrets)
        category = None if category is None else redact_text(category, ctx.secrets)
        reason = redact_text(reason, ctx.secrets)
    meta = RunMeta(
        test_case=job.case,
        model=job.model,
        outcome=verdict.outcome,
        timestamp=_iso(started),
        finished_at=_iso(finished),
        duration_seconds=round(max(0.0, finished - started), 6),
        failure_category=category,
        stop_reason=verdict.stop_reason,
        # Python's convention: -N when signal N ended it, so the record keeps which signal.
        exit_code=returncode,
        attempt=attempt,
        batch_id=ctx.batch_id,
        run_dir=rel_run_dir,
        result=result,
        steps=steps,
    )
    try:
        # Off the event loop: the fsyncs would otherwise hold up every other start and finish.
        await asyncio.to_thread(write_run_meta, run_dir, meta)
    except OSError as exc:
        raise RecordWriteError(run_dir / RUN_META, exc) from exc
    return AttemptResult(meta, rel_run_dir, reason)


async def _run_command(
    job: Job, sweep: Sweep, ctx: BatchContext, run_dir: Path, attempt: int
) -> tuple[Classification, int | None] | None:
    """Run the sweep's single command; its verdict and exit code, None if the user's abort
    killed it."""
    log_path = run_dir / OUTPUT_LOG
    timed_out, returncode, start_error = False, None, None
    process = await _start(job, sweep, ctx, run_dir, attempt)
    if isinstance(process, str):
        start_error = process
    else:
        ended = await supervise(
            process,
            ctx.registry,
            case=job.case,
            model=job.model,
            timeout=job.timeout,
            grace=sweep.kill_grace,
        )
        if ended is None:
            return None
        timed_out, returncode = ended, process.returncode
    signal_number = -returncode if returncode is not None and returncode < 0 else None
    return classify(
        timed_out=timed_out,
        exit_code=None if signal_number is not None else returncode,
        signal=signal_number,
        result_json=None if timed_out or start_error else read_result(run_dir),
        log_text_tail=lambda: read_log_from(log_path),
        log_patterns=sweep.log_patterns,
        start_error=start_error,
    ), returncode


async def _start(
    job: Job, sweep: Sweep, ctx: BatchContext, run_dir: Path, attempt: int
) -> asyncio.subprocess.Process | str:
    """The started job, or why it could not start (also written into its log)."""
    log_path = run_dir / OUTPUT_LOG
    values = command_values(job, ctx.batch_dir, run_dir, attempt)
    try:
        argv = expand_command(sweep.command, values, job.params)
    except KeyError as exc:
        # load_sweep checked the command; a case without a param it names still gets here.
        return _log_failure(log_path, f"command: no value for placeholder {exc}")
    except ValueError as exc:
        return _log_failure(log_path, f"command: {exc}")
    env = job_env(job, sweep, ctx, run_dir, attempt)
    try:
        return await spawn(
            argv,
            cwd=sweep.path.parent,
            env=env,
            log_path=log_path,
            registry=ctx.registry,
            case=job.case,
            model=job.model,
        )
    except SpawnError as exc:
        return str(exc)
    except OSError as exc:
        raise RecordWriteError(log_path, exc) from exc


def make_run_dir(model_dir: Path, name: str) -> Path:
    """Create ``model_dir/name`` exclusively (``-2``, ``-3``… when it exists); one mkdir."""
    n = 1
    while True:
        path = model_dir / (name if n == 1 else f"{name}-{n}")
        try:
            os.mkdir(path)
        except FileExistsError:
            n += 1
            continue
        except FileNotFoundError:
            # The model's first run: its directory is made once, not checked for every job.
            os.makedirs(model_dir, exist_ok=True)
            continue
        return path


# --- the command and its environment ------------------------------------------------------


def command_values(job: Job, batch_dir: Path, run_dir: Path, attempt: int) -> dict[str, object]:
    """The value of each placeholder but ``{params.NAME}`` for one attempt."""
    return {
        "case": job.case,
        "model": job.model,
        "model_safe": safe_name(job.model),
        "run_dir": os.path.abspath(run_dir),
        "batch_dir": os.path.abspath(batch_dir),
        "attempt": attempt,
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
        BATCH_DIR=os.path.abspath(ctx.batch_dir),
    )
    return env


# --- small helpers ------------------------------------------------------------------------


def _log_failure(log_path: Path, message: str) -> str:
    try:
        with open(log_path, "a", encoding="utf-8", errors="replace") as handle:
            handle.write(f"batch: {message}\n")
    except OSError as exc:
        raise RecordWriteError(log_path, exc) from exc
    return message


def _iso(moment: float) -> str:
    return utc_stamp(datetime.fromtimestamp(moment, UTC))
