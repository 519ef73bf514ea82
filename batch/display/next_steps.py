"""The run's closing lines: what happened, and the command that continues, as the user typed it.

``batch sweep.yaml`` that ends with errors says ``12 jobs ended in error (api_or_credit 12):
batch sweep.yaml --retry-failed``; an interrupted one ``... --resume``; a halted one why, and
how to continue. The command is the one the user typed (:class:`TypedCommand`: the sweep
path as given, ``-o``, ``--cases``/``--models``, ``-j``, the executor, and the batch dir a
``--resume DIR`` named), less what chose which jobs run again. Pure: jobs, state and words
in, lines out (docs/cli.md, "What it prints").
"""

from __future__ import annotations

import os
import shlex
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from batch.plan.jobs import Job
from batch.policies.shared_reason import shared_reasons, warning_line
from batch.stop_when.rules import STOPPED

if TYPE_CHECKING:
    from batch.plan.planner import RunOptions

__all__ = ["TypedCommand", "closing_lines", "typed_command"]


@attrs.frozen
class TypedCommand:
    """The command the user typed, without the options that pick which jobs run again."""

    words: tuple[str, ...] = ("batch", "SWEEP")
    #: The batch dir ``--resume DIR`` named, as typed; None: a new one or the newest.
    batch_dir: str | None = None
    #: How the program was run (``words`` begins with it): ``../../.venv/bin/batch``,
    #: ``python3 -m batch`` (:func:`invoked_program`).
    program: tuple[str, ...] = ("batch",)
    #: ``words`` without ``--cases``/``--models``; None: the same as ``words``.
    unselected: tuple[str, ...] | None = None

    def without_selection(self) -> TypedCommand:
        """The same command for every job of the batch, not only those ``--cases`` and
        ``--models`` picked: what retries a job outside them."""
        return attrs.evolve(self, words=self.words if self.unselected is None else self.unselected)

    def other(self, *args: str) -> str:
        """Another command of the same program: ``other("stats", DIR)``, shell-quoted."""
        return shlex.join([*self.program, *args])

    def with_option(self, option: str) -> str:
        """The command line that continues with ``option`` (``--resume``, ``--retry-failed``)."""
        words = list(self.words)
        if self.batch_dir:
            words += ["--resume", self.batch_dir]
            if option == "--resume":
                return shlex.join(words)
        return shlex.join([*words, option])


def invoked_program(
    argv: Sequence[str], orig_argv: Sequence[str], found_by_name: Callable[[str], bool]
) -> tuple[str, ...]:
    """The program as the user ran it, to repeat in a hint they can paste.

    ``argv`` and ``orig_argv`` are ``sys.argv`` and ``sys.orig_argv``;
    ``found_by_name(path)`` says whether the file's name alone, looked up on ``PATH``,
    finds that very file. ``python3 -m batch`` stays that (the interpreter's words before
    the arguments); a script run by its path stays that path (``../../.venv/bin/batch``: a
    bare ``batch`` may be ``command not found``, or Debian's ``at``); a script found on
    ``PATH`` is its name.
    """
    if not argv:
        return ("batch",)
    before = len(orig_argv) - len(argv) + 1  # the interpreter's words, and the program's
    if before > 1 and "-m" in orig_argv[:before]:
        return tuple(orig_argv[:before])
    program = argv[0]
    name = os.path.basename(program)
    if os.path.isabs(program) and name and found_by_name(program):
        return (name,)
    return (program,)


def typed_command(
    sweep_path: Path | str, options: RunOptions, program: tuple[str, ...] = ("batch",)
) -> TypedCommand:
    """The user's ``batch SWEEP ...`` from the path and options as they gave them."""
    words = [*program, str(sweep_path)]
    if options.output is not None:
        words += ["-o", str(options.output)]
    selection: list[str] = []
    for glob in options.case_globs:
        selection += ["--cases", glob]
    for glob in options.model_globs:
        selection += ["--models", glob]
    rest = []
    if options.max_concurrent is not None:
        rest += ["-j", str(options.max_concurrent)]
    if options.scheduler is not None:
        rest += ["--scheduler", options.scheduler]
    elif options.executor is not None:
        rest += ["--executor", options.executor]
    return TypedCommand(
        (*words, *selection, *rest),
        options.resume or None,
        program,
        unselected=(*words, *rest) if selection else None,
    )


def closing_lines(
    state: str,
    jobs: Sequence[Job],
    command: TypedCommand,
    *,
    batch_dir: Path,
    halt: Mapping[str, Any] | None = None,
    attempt_limit: Callable[[str], int] | None = None,
    stop_lines: Sequence[str] = (),
) -> list[str]:
    """What happened and what to do next, one line per point; each hint a command that
    does something (docs/cli.md, "What it prints").

    ``state`` is the summary's (``complete``, ``interrupted``, ``halted``); ``halt`` its
    ``halt`` object (``rule``, ``mode``, ``message``) when the batch halted;
    ``attempt_limit(model)`` the attempts a job of ``model`` may spend (None: no limit), so
    that an error whose budget is spent is told to ``--max-attempts``, not to a
    ``--retry-failed`` that would carry it again. ``stop_lines``: what ``stop_when``
    made of each model (``batch.execution.stop_when_runtime``); the jobs a stop left are not
    "left without a result" — their model has its answer.
    """
    every_error = [job for job in jobs if job.status == "error"]
    failed = [job for job in jobs if job.status == "failed"]
    # Left out by --cases/--models is said by the line before (batch.display.text.end_lines).
    unrun = [job for job in jobs if job.status not in ("passed", "failed", "error")]
    unrun = [job for job in unrun if not job.not_selected and not _stopped(job)]
    lines = list(stop_lines)
    if state == "halted":
        halt = halt or {}
        why = str(halt.get("message") or "a halt rule stopped the sweep")
        lines.append(f"Halted: {why}")
        fix = "raise the budget in the sweep file" if _is_budget(halt) else "fix the cause"
        # None unrun: every job it did not get to was a retry and keeps its recorded error,
        # which the error line below offers to retry (``--resume`` would run nothing).
        if unrun:
            resume = command.with_option("--resume")
            lines.append(f"{_jobs(len(unrun))} not run; {fix}, then: {resume}")
    elif state == "interrupted":
        lines.append(
            f"Interrupted: {len(unrun)} of {_jobs(len(jobs))} not run: "
            f"{command.with_option('--resume')}"
            if unrun
            else "Interrupted: every job keeps a recorded outcome"
        )
    elif unrun:
        resume = command.with_option("--resume")
        lines.append(f"{_jobs(len(unrun))} left without a result: {resume}")
    lines += _error_lines(every_error, command, attempt_limit)
    if failed:
        lines.append(
            f"{_jobs(len(failed))} failed ({_categories(failed)}): the models' own results, "
            f"kept; compare them: {command.other('stats', str(batch_dir))}"
        )
    lines += [
        warning_line(shared)
        for shared in shared_reasons((job.model, job.status, job.reason) for job in jobs)
    ]
    if state == "complete" and not (every_error or failed or unrun or stop_lines):
        selected = sum(not job.not_selected for job in jobs)
        which = "" if selected == len(jobs) else " selected"
        every = "All " if selected > 1 else ""
        lines.append(f"{every}{selected}{which} {'job' if selected == 1 else 'jobs'} passed.")
    return lines


def _error_lines(
    errors: Sequence[Job], command: TypedCommand, attempt_limit: Callable[[str], int] | None
) -> list[str]:
    """The jobs in error and the command that retries them: ``--retry-failed`` with the
    user's selection, without it for errors outside the selection (a job ``--cases``
    left out keeps its error, and the selection would retry nothing), and with a larger
    ``--max-attempts`` for jobs whose attempt budget is spent."""

    def spent(job: Job) -> bool:
        return attempt_limit is not None and job.attempts >= attempt_limit(job.model)

    inside = [job for job in errors if job.selected]
    outside = [job for job in errors if not job.selected]
    lines = []
    for group, typed, where in (
        (inside, command, ""),
        (outside, command.without_selection(), " outside the selection"),
    ):
        retryable = [job for job in group if not spent(job)]
        if retryable:
            lines.append(
                f"{_jobs(len(retryable))}{where} ended in error ({_categories(retryable)}): "
                f"{typed.with_option('--retry-failed')}"
            )
        used_up = [job for job in group if spent(job)]
        if used_up:
            more = max(job.attempts for job in used_up) + 1
            retry = typed.with_option("--retry-failed")
            lines.append(
                f"{_jobs(len(used_up))}{where} ended in error ({_categories(used_up)}) and "
                f"spent the attempt budget: {retry} --max-attempts {more}"
            )
    return lines


def _stopped(job: Job) -> bool:
    return job.status == "skipped" and (job.skip_reason or "").startswith(STOPPED)


def _jobs(count: int) -> str:
    return f"{count} job" if count == 1 else f"{count} jobs"


def _categories(jobs: Iterable[Job]) -> str:
    """``api_or_credit 12, infra_failure 1``: the most frequent first."""
    counts = Counter(job.failure_category or "uncategorized" for job in jobs)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{category} {count}" for category, count in ranked)


def _is_budget(halt: Mapping[str, Any]) -> bool:
    return "budget" in str(halt.get("rule") or "")
