"""Multi-step jobs: ``steps:`` (eval → judge) run in order in one run dir, as one job.

A sweep with ``steps`` instead of ``command`` runs each job as an ordered list of
``{name, command, timeout, expect}``. The steps share the run dir and its ``output.log``
(each preceded by a ``--- batch: step NAME`` line). A step whose exit is non-zero, or that
leaves one of its ``expect`` files missing, ends the job; later steps are ``skipped``. Each
step's entry goes into ``run-meta.json`` as ``steps: [...]`` (docs/sweep-file.md):
``name``, ``status`` (passed | failed | error | skipped | reused), ``duration_seconds``,
``exit_code``, ``failure_category``, ``reason``, ``command`` (the template with the
job's values filled in but ``{run_dir}``/``{batch_dir}``/``{attempt}`` left as written, so
two attempts compare equal), ``files`` (what the step created or changed; null when too
many) and ``log_end`` (where its output ends in ``output.log``).

Step-level resume (docs/resume.md): :func:`resume_point` finds how many leading steps of a
record can be reused; :func:`run_steps` then links their files into the new run dir (hard
links where possible, copies otherwise), copies their part of ``output.log`` and records
them as ``reused``. The runner (``batch.attempt.runner``) makes the run dir and writes the record;
this module runs the steps and classifies the job. It imports neither the runner nor the
sweep at run time: ``batch.sweep`` reads the ``steps`` key with :func:`steps_key`. What a
step changed in the run dir, linking reused files and the log helpers are in
``batch.attempt.step_files`` (``changed_paths``, ``link_files``, ``read_result`` are re-exported).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from batch.attempt.classify import Classification, classify
from batch.attempt.step_files import (
    LOG_TAIL_BYTES,  # noqa: F401  (re-exported: callers imported it from here)
    MAX_FILES,  # noqa: F401
    OUTPUT_LOG,
    TreeState,  # noqa: F401
    append_log,
    changed_paths,
    copy_log_prefix,
    file_size,
    link_files,
    read_log_from,
    read_result,
    stat_key,
    tree_state,
)
from batch.plan.resume import command_text, resume_point
from batch.processes.control import SpawnError, spawn, supervise
from batch.sweep.placeholders import expand_command
from batch.sweep.step_specs import Step
from run_support import jsonio
from run_support.results import INFRA_FAILURE, RESULT_JSON, RUN_META
from run_support.safe_files import UnsafeFileError, read_bytes

if TYPE_CHECKING:
    from batch.plan.jobs import Job
    from batch.processes.control import ProcessRegistry
    from batch.sweep.load import Sweep

# --- running the steps -----------------------------------------------------------------------


@attrs.frozen
class StepsRun:
    verdict: Classification
    #: The last step's exit code (the failing step's when one failed).
    exit_code: int | None
    entries: list[dict[str, Any]]


async def run_steps(
    job: Job,
    sweep: Sweep,
    registry: ProcessRegistry,
    batch_dir: Path,
    run_dir: Path,
    *,
    values: Mapping[str, object],
    env: Mapping[str, str],
    clock: Callable[[], float] = time.monotonic,
) -> StepsRun | None:
    """Run the sweep's steps for one attempt in ``run_dir``; None when the user's abort
    killed a step (no record is written then). Reuses earlier steps when the job says so.
    """
    log_path = run_dir / OUTPUT_LOG
    entries = _reuse(job, sweep.steps, batch_dir, run_dir, log_path, values)
    deadline = None if job.timeout is None else clock() + job.timeout
    before = tree_state(run_dir)
    exit_code: int | None = None
    for index in range(len(entries), len(sweep.steps)):
        step = sweep.steps[index]
        limit = step.timeout
        if deadline is not None:
            limit = deadline - clock() if limit is None else min(limit, deadline - clock())
        ran = await _run_step(step, job, sweep, registry, run_dir, values, env, limit, clock)
        if ran is None:
            return None
        verdict, entry, ends_job = ran
        exit_code = entry["exit_code"]
        after = tree_state(run_dir)
        entry["files"] = changed_paths(before, after)
        entry["log_end"] = file_size(log_path)
        entries.append(entry)
        before = after
        if ends_job:
            for later in sweep.steps[index + 1 :]:
                entries.append(_skipped(later, job))
            return StepsRun(verdict, exit_code, entries)
    final = classify(
        timed_out=False,
        exit_code=0,
        signal=None,
        result_json=read_result(run_dir),
        log_text_tail="",
        log_patterns={},
    )
    return StepsRun(final, exit_code, entries)


async def _run_step(
    step: Step,
    job: Job,
    sweep: Sweep,
    registry: ProcessRegistry,
    run_dir: Path,
    values: Mapping[str, object],
    env: Mapping[str, str],
    limit: float | None,
    clock: Callable[[], float],
) -> tuple[Classification, dict[str, Any], bool] | None:
    """One step: its verdict, its record entry, and whether it ends the job. None when the
    user's abort killed it."""
    log_path = run_dir / OUTPUT_LOG
    append_log(log_path, f"--- batch: step {step.name}\n")
    offset = file_size(log_path)
    result_before = stat_key(run_dir / RESULT_JSON)
    started = clock()
    timed_out, returncode, start_error = False, None, None
    try:
        argv = expand_command(step.command, values, job.params)
    except (KeyError, ValueError) as exc:
        start_error = append_log(log_path, f"batch: step {step.name}: command: {exc}\n")
    if start_error is None and limit is not None and limit <= 0:
        timed_out = True  # the job's time ran out in an earlier step
    elif start_error is None:
        try:
            process = await spawn(
                argv,
                cwd=sweep.path.parent,
                env=env,
                log_path=log_path,
                registry=registry,
                case=job.case,
                model=job.model,
            )
        except SpawnError as exc:
            start_error = str(exc)
        except UnsafeFileError as exc:  # a step made output.log a FIFO or symlink: its error
            start_error = f"cannot write {OUTPUT_LOG}: {exc.strerror}"
        else:
            ended = await supervise(
                process,
                registry,
                case=job.case,
                model=job.model,
                timeout=limit,
                grace=sweep.kill_grace,
            )
            if ended is None:
                return None
            timed_out, returncode = ended, process.returncode
    signal_number = -returncode if returncode is not None and returncode < 0 else None
    missing = [] if timed_out or start_error or returncode else _missing(step, job, run_dir, values)
    if timed_out or start_error is not None or returncode != 0:
        changed = stat_key(run_dir / RESULT_JSON) != result_before
        verdict = classify(
            timed_out=timed_out,
            exit_code=None if signal_number is not None else returncode,
            signal=signal_number,
            result_json=read_result(run_dir) if changed and not timed_out else None,
            log_text_tail=lambda: read_log_from(log_path, offset),
            log_patterns=sweep.log_patterns,
            non_model_categories=sweep.non_model_categories,
            start_error=start_error,
        )
    elif missing:
        why = "expected file(s) missing: " + ", ".join(missing)
        verdict = Classification("error", INFRA_FAILURE, "exit", {"missing": missing}, why)
    else:
        verdict = Classification("passed", None, "exit", {}, "exit code 0")
    entry = {
        "name": step.name,
        "status": verdict.outcome,
        "duration_seconds": round(max(0.0, clock() - started), 6),
        "exit_code": returncode,
        "failure_category": verdict.failure_category,
        "reason": verdict.reason,
        "command": command_text(step, job),
    }
    ends_job = bool(timed_out or start_error is not None or returncode or missing)
    if ends_job:
        verdict = attrs.evolve(verdict, reason=f"step {step.name}: {verdict.reason}")
    return verdict, entry, ends_job


def _missing(step: Step, job: Job, run_dir: Path, values: Mapping[str, object]) -> list[str]:
    paths = expand_command(step.expect, values, job.params)
    return [path for path in paths if not os.path.lexists(run_dir / path)]


def _skipped(step: Step, job: Job) -> dict[str, Any]:
    return {
        "name": step.name,
        "status": "skipped",
        "duration_seconds": None,
        "exit_code": None,
        "failure_category": None,
        "reason": "an earlier step failed",
        "command": command_text(step, job),
    }


# --- step-level resume: bringing reused steps in ---------------------------------------------


def _reuse(
    job: Job,
    steps: Sequence[Step],
    batch_dir: Path,
    run_dir: Path,
    log_path: Path,
    values: Mapping[str, object],
) -> list[dict[str, Any]]:
    """Bring the reused steps' files and log into ``run_dir``; their entries, as reused.

    Nothing is reused (every step runs) when the old record no longer allows it or an
    expected file of a reused step is gone from the old run dir.
    """
    count, source = job.resume_from_step, job.reuse_run_dir
    if count <= 0 or not source:
        return []
    old_dir = batch_dir / source
    try:
        entries = jsonio.loads(read_bytes(old_dir / RUN_META, limit=None)).get("steps")
    except (OSError, ValueError, AttributeError):
        entries = None
    old_values = {**values, "run_dir": os.path.abspath(old_dir)}
    if (
        not isinstance(entries, list)
        or resume_point(entries, steps, job) < count
        or any(_missing(step, job, old_dir, old_values) for step in steps[:count])
    ):
        append_log(log_path, f"--- batch: cannot reuse steps of {source}; running every step\n")
        return []
    reused = entries[:count]
    try:
        copy_log_prefix(old_dir / OUTPUT_LOG, log_path, reused[-1].get("log_end"))
        for entry in reused:
            link_files(old_dir, run_dir, entry.get("files"))
    except OSError as exc:
        append_log(
            log_path, f"--- batch: cannot reuse steps of {source} ({exc}); running every step\n"
        )
        return []
    names = ", ".join(str(entry["name"]) for entry in reused)
    append_log(log_path, f"--- batch: steps {names} reused from {source}\n")
    return [
        {**entry, "status": "reused", "reused_from": entry.get("reused_from") or source}
        for entry in reused
    ]
