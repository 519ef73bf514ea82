"""The commands that leave every batch dir as it is: ``plan`` (what a run would do),
``status``, ``stats`` and ``report`` (what a batch holds), and ``check`` (the model switch
tried without a sweep; it writes only its own report under OUTPUT/checks/)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

import click

from batch.cli.options import MODELS, OUTPUT, SWEEP, Selection, run_options, selection_options
from batch.cli.program import KEPT

if TYPE_CHECKING:  # imported when a command runs, so that --help stays fast
    from batch.errors import ExitStatus


@click.command()
@SWEEP
@selection_options
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def plan(sweep: Path, fmt: str, **selection: Unpack[Selection]) -> ExitStatus:
    """Print every job's decision (run | carry | retry) and why; change nothing on disk.

    \b
    --format json prints {"batch_dir", "counts": {"run", "carry", "retry"},
    "jobs": [{"case", "model", "decision", "reason"}, ...], "unreadable": [...]}.
    """
    from batch.commands.plan import plan_main

    return plan_main(
        sweep, run_options(selection), fmt=fmt, out=sys.stdout, err=sys.stderr, keep=KEPT
    )


@click.command()
@click.argument("batch_dir", metavar="BATCH_DIR|SWEEP", type=click.Path(path_type=Path))
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def status(batch_dir: Path, fmt: str) -> ExitStatus:
    """Show a batch dir: job counts, incomplete run dirs, unreadable records. Given a
    sweep file instead: its newest batch dir under the output root."""
    from batch.commands.status import status_main

    return status_main(batch_dir, fmt=fmt, out=sys.stdout, err=sys.stderr)


@click.command()
# Any path: stats_main says in one line why one is unusable (a file, no summary).
@click.argument("batch_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "csv", "markdown"]),
    default="table",
    show_default=True,
)
@click.option("--by", type=click.Choice(["model", "case"]), default="model", show_default=True)
@click.option(
    "--source",
    type=click.Choice(["summary", "records"]),
    default="summary",
    show_default=True,
    help="Read batch-summary.json, or the run-meta.json records themselves (newest per job).",
)
@click.option(
    "--wide",
    is_flag=True,
    help="Show every table column, however wide (default: fit the terminal or $COLUMNS).",
)
@click.option(
    "--compare",
    nargs=2,
    metavar="A B",
    default=None,
    help="Two models of one batch, B - A over the cases both have, paired (with repeats "
    "every pair is shown without it).",
)
def stats(
    batch_dirs: tuple[Path, ...],
    fmt: str,
    by: str,
    source: str,
    wide: bool,
    compare: tuple[str, str] | None,
) -> ExitStatus:
    """Pass rates per model (or case) with Wilson 95% intervals; two dirs compare A with B.

    \b
    pass_rate          = passed / (passed + failed + error)
    adjusted_pass_rate = passed / (passed + failed)   (non-model failures left out)
    Pending, running and skipped jobs count as jobs but are in no rate. See docs/stats.md.
    """
    if len(batch_dirs) > 2:
        raise click.UsageError("give one BATCH_DIR, or two to compare")
    from batch.commands.stats import stats_main

    return stats_main(
        batch_dirs,
        fmt=fmt,
        by=by,
        source=source,
        wide=wide,
        out=sys.stdout,
        err=sys.stderr,
        compare=compare or None,
        keep=KEPT,
    )


@click.command()
@click.argument("batch_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Where to write the report  [default: BATCH_DIR/report.html; for A B: B/report-vs-A.html]",
)
def report(batch_dirs: tuple[Path, ...], output: Path | None) -> ExitStatus:
    """Write a self-contained HTML report: pass rates, failure categories, spend, case x model
    grid; two dirs put A and B side by side."""
    if len(batch_dirs) > 2:
        raise click.UsageError("give one BATCH_DIR, or two to compare")
    from batch.commands.report import report_main

    return report_main(batch_dirs, output=output, out=sys.stdout, err=sys.stderr)


@click.command()
@SWEEP
@OUTPUT
@MODELS
def check(sweep: Path, output: Path | None, model_globs: tuple[str, ...]) -> ExitStatus:
    """Preflight the model switch without running the sweep: per model, the between_models
    reset, the RAM settle, then the probe command.

    \b
    Prints one row per model (loaded, status, RAM before/after the probe and the
    difference), with the sweep's containers key a line on the engine and a test
    container, and writes check.json and check.md under OUTPUT/checks/. Exit status:
    0 every model loaded, 1 a reset, probe or engine check failed, 2 usage or sweep file
    error, 130 interrupted. See docs/queue.md.
    """
    from batch.commands.check import check_main

    return check_main(sweep, output=output, model_globs=model_globs, out=sys.stdout, err=sys.stderr)
