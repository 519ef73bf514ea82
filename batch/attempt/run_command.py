"""One command of one attempt: spawn it with its log, supervise it, classify how it ended.

A single-command job (``batch.attempt.runner``) and each step of a multi-step job
(``batch.attempt.steps``) run through :func:`run_command`: the process starts in its own
session with its output appended to the run dir's ``output.log`` and a job token in its
environment (``batch.processes.spawn.spawn``), is tracked in the invocation's registry,
is stopped when its timeout runs out (SIGTERM, the sweep's ``kill_grace``, SIGKILL to its
group), and its end is classified by :func:`batch.attempt.classify.classify`. A command
the user's abort killed has no outcome (None).

:class:`AttemptContext` is what every part of an attempt needs: the job, the sweep, the
batch dir and its registry, the run dir, the placeholder values and the environment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import attrs

from batch.attempt.classify import (
    Classification,
    ResultFile,
    classify,
    finish_reason,
    last_line,
)
from batch.attempt.step_files import read_log_end, read_log_from
from batch.layout import OUTPUT_LOG
from batch.processes.spawn import SpawnError, spawn, supervise
from batch.sweep.secrets import Redactor, redactor
from run_support.safe_files import UnsafeFileError
from run_support.usage import ParsedUsage

if TYPE_CHECKING:
    from batch.plan.jobs import Job
    from batch.processes.registry import ProcessRegistry
    from batch.sweep.features.worker import WorkerSpec
    from batch.sweep.load import Sweep


#: What serving an attempt gives: (verdict, return code, usage), or None when the user's
#: abort killed it.
Served = tuple[Classification, int | None, ParsedUsage] | None


class AttemptServer(Protocol):
    """Serves an attempt of a model that has a warm ``worker``
    (``batch.attempt.worker_pool.WorkerPool``, which imports this module, not the reverse)."""

    async def serve(self, attempt: AttemptContext, spec: WorkerSpec) -> Served: ...


@attrs.frozen
class AttemptContext:
    """One attempt of one job, in the run dir made for it."""

    job: Job
    sweep: Sweep
    #: The attempt's number (1 for the first).
    number: int
    batch_dir: Path
    batch_id: str
    registry: ProcessRegistry
    #: Values the record must not hold (``BatchContext.secrets``).
    secrets: frozenset[str]
    run_dir: Path
    #: The value of each placeholder but ``{params.NAME}`` (``runner.command_values``).
    values: Mapping[str, object]
    #: The job's environment (``runner.job_env``).
    env: Mapping[str, str]
    #: When the attempt started, by ``clock``; ``clock`` times the record.
    started: float
    clock: Callable[[], float]
    #: Told the name of each step as it starts (``BatchContext.on_step``).
    on_step: Callable[[Job, str], None] | None = None
    #: The warm workers that serve a model with a ``worker`` (``BatchContext.workers``).
    workers: AttemptServer | None = None

    @property
    def redact(self) -> Redactor:
        return redactor(self.secrets)

    @property
    def log_path(self) -> Path:
        return self.run_dir / OUTPUT_LOG

    @property
    def container_label(self) -> str:
        """``batch-ledger.run=<batch id>/<run dir>``: what the attempt's containers carry."""
        return str(self.values["container_label"])

    @property
    def rel_run_dir(self) -> str:
        """The run dir relative to the batch dir, as records and events name it."""
        return f"{self.run_dir.parent.name}/{self.run_dir.name}"


@attrs.frozen
class NotStarted:
    """Why a command could not even be written out (already said in its log)."""

    reason: str


@attrs.frozen
class Ran:
    verdict: Classification
    #: Python's convention: -N when signal N ended it (a timeout's SIGTERM included).
    returncode: int | None
    #: It started, exited by itself within its time, with status 0.
    exited_zero: bool


async def run_command(
    attempt: AttemptContext,
    argv: Sequence[str] | NotStarted,
    *,
    timeout: float | None,
    read_result: Callable[[int], ResultFile],
    log_from: int = 0,
    timeout_shown: float | None = None,
) -> Ran | None:
    """Run ``argv`` for ``attempt`` and classify its end; None when the user's abort killed it.

    ``timeout`` at or below zero: the attempt's time ran out before it could start.
    ``read_result(returncode)`` is asked for ``result.json`` only when the command exited by
    itself; ``log_from`` is where this command's output begins in ``output.log`` (its log
    patterns are looked for from there, and a failure's reason quotes its last line when
    the job gave none). ``timeout_shown`` is the limit a timeout's reason names (default
    ``timeout``). An ``OSError`` opening the log propagates: the caller knows whose write
    failed. A log the job made a FIFO or a symlink is its error.
    """
    timed_out, returncode, start_error = False, None, None
    log_path = attempt.log_path
    if isinstance(argv, NotStarted):
        start_error = argv.reason
    elif timeout is not None and timeout <= 0:
        timed_out = True  # the attempt's time ran out before this command's turn
    else:
        job, sweep, registry = attempt.job, attempt.sweep, attempt.registry
        try:
            process = await spawn(
                argv,
                cwd=sweep.path.parent,
                env=attempt.env,
                log_path=log_path,
                registry=registry,
                case=job.case,
                model=job.model,
                # Told to the watchdog only with an engine: it removes the attempt's
                # containers should the driver die (batch.processes.containers).
                label=attempt.container_label if sweep.containers is not None else None,
            )
        except SpawnError as exc:
            start_error = str(exc)
        except UnsafeFileError as exc:
            start_error = f"cannot write {OUTPUT_LOG}: {exc.strerror}"
        else:
            ended = await supervise(
                process,
                registry,
                case=job.case,
                model=job.model,
                timeout=timeout,
                grace=sweep.kill_grace,
            )
            if ended is None:
                return None
            timed_out, returncode = ended, process.returncode
    exited = not timed_out and start_error is None
    signal_number = -returncode if returncode is not None and returncode < 0 else None
    verdict = classify(
        timed_out=timed_out,
        exit_code=None if signal_number is not None else returncode,
        signal=signal_number,
        result_json=read_result(returncode) if exited and returncode is not None else None,
        log_text_tail=lambda: read_log_from(log_path, log_from),
        log_patterns=attempt.sweep.log_patterns,
        non_model_categories=attempt.sweep.non_model_categories,
        start_error=start_error,
        timeout=timeout if timeout_shown is None else timeout_shown,
        exit_codes=attempt.sweep.exit_codes,
        redact=attempt.redact,
    )
    if verdict.outcome != "passed" and start_error is None:
        verdict = with_said(verdict, log_path, log_from, attempt.redact)
    return Ran(verdict, returncode, exited and returncode == 0)


def with_said(
    verdict: Classification, log_path: Path, log_from: int, redact: Redactor
) -> Classification:
    """``verdict`` with its reason completed by what the job said: its ``result.json``
    ``reason``, or else the last line of its output from ``log_from`` on (docs/ledger.md),
    secrets hidden before anything is cut."""
    said = verdict.said
    if said is None:
        # A last line longer than what is read starts at the cut: a key there is hidden
        # whole, read with what comes before the cut.
        said = last_line(read_log_end(log_path, redact, log_from))
    return attrs.evolve(verdict, reason=finish_reason(verdict.reason, said, redact))
