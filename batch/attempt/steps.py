"""Multi-step jobs: ``steps:`` (eval → judge) run in order in one run dir, as one job.

A sweep with ``steps`` instead of ``command`` runs each job as an ordered list of
``{name, command, timeout, expect}``. The steps share the run dir and its ``output.log``
(each preceded by a ``--- batch: step NAME`` line). A step whose exit is non-zero, or that
leaves one of its ``expect`` files missing, ends the job; later steps are ``skipped``. Each
step's entry goes into ``run-meta.json`` as ``steps: [...]`` (docs/sweep-file.md):
``name``, ``status`` (passed | failed | error | skipped | reused), ``duration_seconds``,
``exit_code``, ``failure_category``, ``reason``, ``command`` (the template with the
job's values filled in but ``{run_dir}``/``{batch_dir}``/``{attempt}``/``{container_label}``
left as written, so two attempts compare equal), ``files`` (what the step created or
changed; null when too many) and ``log_end`` (where its output ends in ``output.log``).

Step-level resume (docs/resume.md): :func:`resume_point` finds how many leading steps of a
record can be reused; :func:`run_steps` then links their files into the new run dir (hard
links where possible, copies otherwise), copies their part of ``output.log`` and records
them as ``reused``. The runner (``batch.attempt.runner``) makes the run dir and writes the
record; this module runs the steps, each through ``batch.attempt.run_command`` as a
single-command job's command is, and classifies the job. What a step changed in the run
dir, linking reused files and the log helpers are in ``batch.attempt.step_files``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from batch.attempt.classify import Classification, ResultFile, classify
from batch.attempt.run_command import AttemptContext, NotStarted, run_command, with_said
from batch.attempt.step_files import (
    append_log,
    changed_paths,
    copy_log_prefix,
    file_size,
    link_files,
    read_result,
    stat_key,
    tree_state,
)
from batch.layout import OUTPUT_LOG
from batch.plan.resume import command_text, resume_point
from batch.sweep.placeholders import expand_command
from run_support import jsonio
from run_support.results import INFRA_FAILURE, RESULT_JSON, RUN_META
from run_support.safe_files import MAX_RUN_META_BYTES, read_bytes
from run_support.usage import ParsedUsage, total, usage_in_result

if TYPE_CHECKING:
    from batch.plan.jobs import Job
    from batch.sweep.features.steps import Step

# --- running the steps -----------------------------------------------------------------------


@attrs.frozen
class StepsRun:
    verdict: Classification
    #: The last step's exit code (the failing step's when one failed).
    exit_code: int | None
    entries: list[dict[str, Any]]
    #: What the steps that ran in this attempt spent, summed (reused steps add nothing:
    #: they were counted in the attempt that ran them), and what was wrong with it.
    usage: ParsedUsage


async def run_steps(
    attempt: AttemptContext, *, clock: Callable[[], float] = time.monotonic
) -> StepsRun | None:
    """Run the sweep's steps for one attempt in its run dir; None when the user's abort
    killed a step (no record is written then). Reuses earlier steps when the job says so.
    """
    job, steps, run_dir = attempt.job, attempt.sweep.steps, attempt.run_dir
    entries = _reuse(attempt)
    deadline = None if job.timeout is None else clock() + job.timeout
    before = tree_state(run_dir)
    exit_code: int | None = None
    spent: list[ParsedUsage] = []
    log_from = 0
    for index in range(len(entries), len(steps)):
        step = steps[index]
        limit, shown = step.timeout, step.timeout
        if deadline is not None:
            left = deadline - clock()
            if limit is None or left < limit:
                limit, shown = left, job.timeout  # the job's own timeout is what runs out
        if attempt.on_step is not None:
            attempt.on_step(job, step.name)
        append_log(attempt.log_path, f"--- batch: step {step.name}\n")
        log_from = file_size(attempt.log_path)
        ran = await _run_step(attempt, step, limit, shown, log_from, clock)
        if ran is None:
            return None
        verdict, entry, ends_job, used = ran
        spent.append(used)
        exit_code = entry["exit_code"]
        after = tree_state(run_dir)
        entry["files"] = changed_paths(before, after)
        entry["log_end"] = file_size(attempt.log_path)
        entries.append(entry)
        before = after
        if ends_job:
            for later in steps[index + 1 :]:
                entries.append(_skipped(later, job))
            return StepsRun(verdict, exit_code, entries, _summed(spent))
    final = classify(
        timed_out=False,
        exit_code=0,
        signal=None,
        result_json=read_result(run_dir),
        log_text_tail="",
        log_patterns={},
        redact=attempt.redact,
    )
    if final.outcome != "passed":
        final = with_said(final, attempt.log_path, log_from, attempt.redact)
    return StepsRun(final, exit_code, entries, _summed(spent))


def _usage_keys(used: ParsedUsage) -> dict[str, Any]:
    """A step entry's usage keys: ``usage`` when it reported some, ``usage_other`` for keys
    this version does not know (kept, never summed)."""
    keys: dict[str, Any] = {}
    if used.usage.reported:
        keys["usage"] = used.usage.to_json()
    if used.other:
        keys["usage_other"] = used.other
    return keys


def _summed(spent: list[ParsedUsage]) -> ParsedUsage:
    problems = tuple(problem for used in spent for problem in used.problems)
    return ParsedUsage(total(used.usage for used in spent), problems)


async def _run_step(
    attempt: AttemptContext,
    step: Step,
    limit: float | None,
    shown: float | None,
    offset: int,
    clock: Callable[[], float],
) -> tuple[Classification, dict[str, Any], bool, ParsedUsage] | None:
    """One step: its verdict, its record entry, whether it ends the job, and what it
    reported spending. None when the user's abort killed it. ``shown``: the timeout a
    timeout's reason names; ``offset``: where its output begins in ``output.log``."""
    job, run_dir, log_path = attempt.job, attempt.run_dir, attempt.log_path
    result_before = stat_key(run_dir / RESULT_JSON)
    started = clock()
    argv: list[str] | NotStarted
    try:
        argv = expand_command(step.command, attempt.values, job.params)
    except (KeyError, ValueError) as exc:
        argv = NotStarted(append_log(log_path, f"batch: step {step.name}: command: {exc}\n"))

    read: list[ResultFile] = []

    def written() -> ResultFile:
        # What the step itself wrote: a result.json it did not touch is an earlier step's.
        if not read:
            unchanged = stat_key(run_dir / RESULT_JSON) == result_before
            read.append(None if unchanged else read_result(run_dir))
        return read[0]

    def failed_result(returncode: int) -> ResultFile:
        # A step's result.json decides the outcome only when the step failed.
        return None if returncode == 0 else written()

    ran = await run_command(
        attempt,
        argv,
        timeout=limit,
        read_result=failed_result,
        log_from=offset,
        timeout_shown=shown,
    )
    if ran is None:
        return None
    # Each step that writes (or rewrites) result.json with a usage reports its own spend,
    # passed, failed or stopped by its timeout alike (docs/usage.md).
    used = usage_in_result(written())
    used = attrs.evolve(used, problems=tuple(f"step {step.name}: {p}" for p in used.problems))
    verdict = ran.verdict
    missing = _missing(step, job, run_dir, attempt.values) if ran.exited_zero else []
    if missing:
        why = "expected file(s) missing: " + ", ".join(missing)
        verdict = Classification("error", INFRA_FAILURE, "exit", {"missing": missing}, why)
    entry = {
        "name": step.name,
        "status": verdict.outcome,
        "duration_seconds": round(max(0.0, clock() - started), 6),
        "exit_code": ran.returncode,
        "failure_category": verdict.failure_category,
        "reason": verdict.reason,
        "command": command_text(step, job),
    }
    entry.update(_usage_keys(used))
    ends_job = not ran.exited_zero or bool(missing)
    if ends_job:
        verdict = attrs.evolve(verdict, reason=f"step {step.name}: {verdict.reason}")
    return verdict, entry, ends_job, used


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


def _reuse(attempt: AttemptContext) -> list[dict[str, Any]]:
    """Bring the reused steps' files and log into the run dir; their entries, as reused.

    Nothing is reused (every step runs) when the old record no longer allows it or an
    expected file of a reused step is gone from the old run dir.
    """
    job, steps, log_path = attempt.job, attempt.sweep.steps, attempt.log_path
    count, source = job.resume_from_step, job.reuse_run_dir
    if count <= 0 or not source:
        return []
    old_dir = attempt.batch_dir / source
    try:
        entries = jsonio.loads(read_bytes(old_dir / RUN_META, MAX_RUN_META_BYTES)).get("steps")
    except (OSError, ValueError, AttributeError):
        entries = None
    old_values = {**attempt.values, "run_dir": os.path.abspath(old_dir)}
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
            link_files(old_dir, attempt.run_dir, entry.get("files"))
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
