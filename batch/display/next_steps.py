"""The run's closing lines: what happened, and the command that continues, as the user typed it.

``batch sweep.yaml`` that ends with errors says ``12 jobs ended in error (api_or_credit 12):
batch sweep.yaml --retry-failed``; an interrupted one ``... --resume``; a halted one why, and
how to continue. The command is the one the user typed (:class:`TypedCommand`: the sweep
path as given, ``-o``, ``--cases``/``--models``, ``-j``, the executor, and the batch dir a
``--resume DIR`` named), less what chose which jobs run again. Pure: jobs, state and words
in, lines out (docs/cli.md, "What it prints").
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from batch.plan.jobs import Job

if TYPE_CHECKING:
    from batch.plan.planner import RunOptions

__all__ = ["TypedCommand", "closing_lines", "typed_command"]


@attrs.frozen
class TypedCommand:
    """The command the user typed, without the options that pick which jobs run again."""

    words: tuple[str, ...] = ("batch", "SWEEP")
    #: The batch dir ``--resume DIR`` named, as typed; None: a new one or the newest.
    batch_dir: str | None = None

    def with_option(self, option: str) -> str:
        """The command line that continues with ``option`` (``--resume``, ``--retry-failed``)."""
        words = list(self.words)
        if self.batch_dir:
            words += ["--resume", self.batch_dir]
            if option == "--resume":
                return shlex.join(words)
        return shlex.join([*words, option])


def typed_command(sweep_path: Path | str, options: RunOptions) -> TypedCommand:
    """The user's ``batch SWEEP ...`` from the path and options as they gave them."""
    words = ["batch", str(sweep_path)]
    if options.output is not None:
        words += ["-o", str(options.output)]
    for glob in options.case_globs:
        words += ["--cases", glob]
    for glob in options.model_globs:
        words += ["--models", glob]
    if options.max_concurrent is not None:
        words += ["-j", str(options.max_concurrent)]
    if options.scheduler is not None:
        words += ["--scheduler", options.scheduler]
    elif options.executor is not None:
        words += ["--executor", options.executor]
    return TypedCommand(tuple(words), options.resume or None)


def closing_lines(
    state: str,
    jobs: Sequence[Job],
    command: TypedCommand,
    *,
    batch_dir: Path,
    halt: Mapping[str, Any] | None = None,
) -> list[str]:
    """What happened and what to do next, one line per point.

    ``state`` is the summary's (``complete``, ``interrupted``, ``halted``); ``halt`` its
    ``halt`` object (``rule``, ``mode``, ``message``) when the batch halted.
    """
    errors = [job for job in jobs if job.status == "error"]
    failed = [job for job in jobs if job.status == "failed"]
    # Left out by --cases/--models is said by the line before (batch.display.text.end_lines).
    unrun = [job for job in jobs if job.status not in ("passed", "failed", "error")]
    unrun = [job for job in unrun if not job.not_selected]
    lines = []
    if state == "halted":
        halt = halt or {}
        why = str(halt.get("message") or "a halt rule stopped the sweep")
        lines.append(f"Halted: {why}")
        fix = "raise the budget in the sweep file" if _is_budget(halt) else "fix the cause"
        lines.append(f"{_jobs(len(unrun))} not run; {fix}, then: {command.with_option('--resume')}")
    elif state == "interrupted":
        lines.append(
            f"Interrupted: {len(unrun)} of {_jobs(len(jobs))} not run: "
            f"{command.with_option('--resume')}"
        )
    elif unrun:
        resume = command.with_option("--resume")
        lines.append(f"{_jobs(len(unrun))} left without a result: {resume}")
    if errors:
        lines.append(
            f"{_jobs(len(errors))} ended in error ({_categories(errors)}): "
            f"{command.with_option('--retry-failed')}"
        )
    if failed:
        lines.append(
            f"{_jobs(len(failed))} failed ({_categories(failed)}): the models' own results, "
            f"kept; compare them: batch stats {shlex.quote(str(batch_dir))}"
        )
    if state == "complete" and not (errors or failed or unrun):
        selected = sum(not job.not_selected for job in jobs)
        which = "" if selected == len(jobs) else " selected"
        every = "All " if selected > 1 else ""
        lines.append(f"{every}{selected}{which} {'job' if selected == 1 else 'jobs'} passed.")
    return lines


def _jobs(count: int) -> str:
    return f"{count} job" if count == 1 else f"{count} jobs"


def _categories(jobs: Iterable[Job]) -> str:
    """``api_or_credit 12, infra_failure 1``: the most frequent first."""
    counts = Counter(job.failure_category or "uncategorized" for job in jobs)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{category} {count}" for category, count in ranked)


def _is_budget(halt: Mapping[str, Any]) -> bool:
    return "budget" in str(halt.get("rule") or "")
