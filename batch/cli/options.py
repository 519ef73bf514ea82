"""The options several commands share, declared once: the sweep argument, the output
root, and the selection ``run`` and ``plan`` both take (:func:`selection_options`), read
into :class:`~batch.plan.planner.RunOptions` by :func:`run_options`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import click

if TYPE_CHECKING:  # imported when a command runs, so that --help stays fast
    from batch.errors import ExitStatus
    from batch.plan.planner import RunOptions


SWEEP = click.argument("sweep", type=click.Path(path_type=Path, dir_okay=False))
RESUME = click.option(
    "--resume",
    "resume",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[BATCH_DIR]",
    help="Reuse a batch dir and rerun only jobs with no recorded outcome. "
    "Without a value: the newest batch dir of this sweep under the output root.",
)
RETRY_FAILED = click.option(
    "--retry-failed",
    is_flag=True,
    help="Also rerun jobs whose recorded failure is not the model's (the sweep's "
    "non_model_categories; by default infra_failure, api_or_credit, task_data, "
    "build_instruction). Implies --resume.",
)
RETRY_CATEGORY = click.option(
    "--retry-category",
    "retry_categories",
    multiple=True,
    metavar="CAT",
    help="Rerun recorded failures of exactly these categories (repeatable; replaces the "
    "default set, may name model_failure). Implies --resume.",
)
CASES = click.option(
    "--cases",
    "case_globs",
    multiple=True,
    metavar="GLOB",
    help="Only cases matching this fnmatch glob (repeatable). A job left out keeps its "
    "recorded result, or is skipped.",
)
MODELS = click.option(
    "--models",
    "model_globs",
    multiple=True,
    metavar="GLOB",
    help="Only models matching this fnmatch glob (repeatable).",
)
OUTPUT = click.option(
    "-o",
    "--output",
    # Not file_okay=False: the command checks the output root, so that -o and the sweep's
    # output: give the same one-line error (docs/cli.md).
    type=click.Path(path_type=Path),
    default=None,
    help="Output root for batch dirs (default: the sweep's 'output', relative to the file).",
)

MAX_ATTEMPTS = click.option(
    "--max-attempts",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Attempts each job may spend in its batch dir, for this invocation only (replaces "
    "the sweep's and its models' max_attempts, default 3): a job that has spent them is "
    "not retried again.",
)


REPEATS = click.option(
    "--repeats",
    type=click.IntRange(min=1, max=10_000),
    default=None,
    metavar="N",
    help="Samples of every case x model, for this invocation (replaces the sweep's and its "
    "models' repeats, default 1). On --resume, raising it runs only the new repeats; "
    "lowering it keeps the extra records out of the summary and the stats.",
)


def selection_options(command: Callable[..., ExitStatus]) -> Callable[..., ExitStatus]:
    """The options ``run`` and ``plan`` share, as one decorator (see :class:`Selection`)."""
    shared = (
        OUTPUT,
        RESUME,
        RETRY_FAILED,
        RETRY_CATEGORY,
        MAX_ATTEMPTS,
        REPEATS,
        CASES,
        MODELS,
    )
    for option in reversed(shared):
        command = option(command)
    return command


class Selection(TypedDict):
    """The options ``run`` and ``plan`` share (``OUTPUT`` ... ``MODELS``), named as
    :class:`~batch.plan.planner.RunOptions` fields."""

    output: Path | None
    resume: str | None
    retry_failed: bool
    retry_categories: tuple[str, ...]
    max_attempts: int | None
    repeats: int | None
    case_globs: tuple[str, ...]
    model_globs: tuple[str, ...]


def run_options(selection: Selection, **run_only: Any) -> RunOptions:
    """The ``RunOptions`` of a ``run`` or ``plan`` command: the shared options and
    ``run``'s own (``max_concurrent``, ``progress``, ...)."""
    from batch.plan.planner import RunOptions

    return RunOptions(**selection, **run_only)
