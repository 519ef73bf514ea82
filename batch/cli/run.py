"""``batch run`` (and ``batch SWEEP``): the options of a run, read into one
:class:`~batch.plan.planner.RunOptions` and handed to :func:`batch.commands.run.run_main`
(``--dry-run``: :func:`batch.commands.plan.plan_main`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

import click

from batch.cli.options import SWEEP, Selection, run_options, selection_options
from batch.cli.program import invoked

if TYPE_CHECKING:  # imported when a command runs, so that --help stays fast
    from batch.errors import ExitStatus


@click.command()
@SWEEP
@selection_options
@click.option(
    "-j",
    "--max-concurrent",
    type=click.IntRange(min=1),
    default=None,
    help="Jobs at once, over the sweep's max_concurrent (per-model limits still apply).",
)
@click.option("--dry-run", is_flag=True, help="Print what would run and why; change nothing.")
@click.option("--no-progress", is_flag=True, help="Plain lines instead of the live display.")
@click.option(
    "--view",
    "view",
    is_flag=True,
    help="Also serve the live page of this batch (batch view) while it runs; its URL, with "
    "the token, is printed first.",
)
@click.option(
    "--executor",
    type=click.Choice(["local", "dask", "slurm"]),
    default=None,
    help="Where jobs run: local subprocesses, tasks on a Dask cluster, or tasks on Dask "
    "workers submitted as Slurm jobs (batch dir on a shared filesystem). Default: the "
    "sweep's 'executor', else local.",
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    default=None,
    help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 (implies --executor dask). "
    "Without it, --executor dask starts a local cluster: one worker process, -j slots.",
)
@click.option(
    "--halt",
    metavar="SPEC",
    default=None,
    help="Stop early, replacing the sweep's 'halt' for this run: soon|now,fail|error=N[%] "
    "(e.g. soon,fail=3, now,error=10%) or off (not even the broken-setup rule). "
    "See docs/policies.md.",
)
@click.option(
    "--deadline",
    metavar="WHEN",
    default=None,
    help="Start no job that would end after WHEN (07:30, 2026-12-01T07:30 or a duration "
    "such as 2h), by its model's recorded durations; stop the running ones at WHEN.",
)
def run(
    sweep: Path,
    max_concurrent: int | None,
    dry_run: bool,
    no_progress: bool,
    executor: str | None,
    scheduler: str | None,
    halt: str | None,
    deadline: str | None,
    view: bool,
    **selection: Unpack[Selection],
) -> ExitStatus:
    """Run every case of SWEEP against every model (the default command).

    Each run records its outcome in its run dir's run-meta.json; batch-summary.json in the
    batch dir holds every job's status at every moment. Ctrl-C once: start nothing new and
    let running jobs finish; twice: kill them (they get no record and rerun on --resume).

    Exit status: 0 all jobs have a result and none is error, 1 some job is error or the
    batch dir could not be written (or a Dask scheduler was lost), 2 usage or sweep file
    error, 3 batch dir locked by another driver, 4 halted by a policy (halt, --deadline),
    130 interrupted.
    """
    from batch.commands.plan import plan_main
    from batch.commands.run import run_main

    options = run_options(
        selection,
        max_concurrent=max_concurrent,
        progress=not no_progress,
        executor=executor,
        scheduler=scheduler,
        view=view,
        **_policy_options(halt, deadline),
    )
    if dry_run:
        return plan_main(sweep, options, fmt="table", out=sys.stdout, err=sys.stderr)
    return run_main(sweep, options, out=sys.stdout, err=sys.stderr, program=invoked())


def _policy_options(halt: str | None, deadline: str | None) -> dict[str, Any]:
    """``--halt`` and ``--deadline`` read, or a usage error naming the option."""
    from datetime import datetime

    from batch.errors import UsageError
    from batch.policies.deadline import parse_deadline
    from batch.policies.halt import parse_halt

    now = datetime.now().astimezone()
    options: dict[str, Any] = {}
    for option, key, value, parse in (
        ("--halt", "halt", halt, parse_halt),
        ("--deadline", "deadline", deadline, lambda text: parse_deadline(text, now)),
    ):
        try:
            options[key] = None if value is None else parse(value)
        except ValueError as exc:
            raise UsageError(f"{option}: {exc}") from None
    return options
