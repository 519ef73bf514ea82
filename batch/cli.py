"""The ``batch`` command line: parse options, call the plain function behind each command.

Only this module imports click. Each command returns an :class:`~batch.errors.ExitStatus`
or raises a :class:`~batch.errors.BatchError`; :func:`handle` turns either into the exit
status, and the error into one line on stderr.

Why one module of ~510 lines: it is one idea, the declaration of the command line, and two
thirds of it is click decorators and help texts (options and their help are the interface
users read in ``--help`` and ``docs/cli.md``). Each command's body is a one-call hand-off to
``batch.commands``; the logic that was not declaration (a typo's suggestion) lives in
``batch.suggest``. Split it when a part stops being declaration.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypedDict, Unpack

import click

if TYPE_CHECKING:  # imported when a command runs, so that --help stays fast
    from batch.errors import ExitStatus
    from batch.plan.planner import RunOptions


def handle(command: Callable[[], ExitStatus], err: TextIO) -> ExitStatus:
    """Call ``command``: its exit status, or a :class:`BatchError`'s status with its message
    as one line on ``err``; Ctrl-C before a sweep's own handling starts (loading, locking,
    stopping a dead driver's jobs) or in a read-only command: "interrupted" and 130."""
    # Imported here, not at the top (as unprotected from Ctrl-C there as here): --help
    # needs neither.
    from batch.errors import BatchError, ExitStatus
    from batch.printable import one_line

    try:
        return command()
    except BatchError as exc:
        # A message may quote a path or a lock file, which anyone could have written.
        for line in exc.lines():
            print(one_line(line), file=err)
        return exc.status
    except KeyboardInterrupt:
        print("interrupted", file=err)
        return ExitStatus.INTERRUPTED


class DefaultGroup(click.Group):
    """A group whose first argument, when it is not a command name, goes to ``run``.

    So ``batch sweep.yaml`` is ``batch run sweep.yaml``.
    """

    default_command = "run"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
            if _looks_like_a_command(args[0]):
                ctx.fail(_no_such_command(args[0], sorted(self.commands)))
            args = [self.default_command, *args]
        return super().parse_args(ctx, _resume_spares_the_sweep(args))

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_epilog(ctx, formatter)
        url = _docs_url()
        if url:
            formatter.write_paragraph()
            formatter.write_text(f"Documentation: {url}")

    def invoke(self, ctx: click.Context) -> object:
        # Each command's callback returns its status (Group.invoke passes it through).
        status = handle(lambda: super(DefaultGroup, self).invoke(ctx), sys.stderr)
        # A Dask cluster's own exit handlers are left to run.
        if ctx.invoked_subcommand in _ENDS_AT_ONCE and "distributed" not in sys.modules:
            _exit_at_once(status)
        ctx.exit(status)


def _docs_url() -> str | None:
    """The installed package's ``Documentation`` URL (``[project.urls]``), read only when
    help is printed so that starting a command costs nothing more."""
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        entries = metadata("batch-ledger").get_all("Project-URL") or []
    except PackageNotFoundError:
        return None
    for entry in entries:
        label, _, url = entry.partition(",")
        if label.strip() == "Documentation":
            return url.strip()
    return None


def _looks_like_a_command(word: str) -> bool:
    """A first word that is a bare name (no dot, no slash) and no file or dir here: a
    mistyped command, not a sweep file (``batch stauts``, ``batch frobnicate s.yaml``)."""
    return (
        word[:1].isalpha()
        and all(c.isalnum() or c in "-_" for c in word)
        and not os.path.lexists(word)
    )


def _no_such_command(word: str, commands: list[str]) -> str:
    from batch.suggest import closest

    close = closest(word, commands)
    guess = f" (did you mean {close!r}?)" if close else ""
    return (
        f"no such command {word!r}{guess}, and no sweep file of that name; "
        f"the commands are {', '.join(commands)} (batch SWEEP runs a sweep file)"
    )


def _resume_spares_the_sweep(args: list[str]) -> list[str]:
    """``--resume sweep.yaml`` means "resume the newest", not "resume batch dir sweep.yaml".

    ``--resume``'s value is optional, so click would take the next word as the batch dir.
    A batch dir is a directory: when that word names a file, the option gets no value.
    """
    args = list(args)
    for i, arg in enumerate(args[:-1]):
        if arg == "--":
            break
        if arg == "--resume" and Path(args[i + 1]).is_file():
            args[i] = "--resume="
    return args


@click.group(cls=DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="batch-ledger")
def main() -> None:
    """Run every case of a sweep against every model, record each outcome, resume exactly.

    \b
      batch SWEEP                   run a sweep (same as: batch run SWEEP)
      batch SWEEP --resume          rerun only jobs with no recorded outcome
      batch SWEEP --retry-failed    ... and jobs that failed for a non-model reason
      batch plan SWEEP --resume     show what a resume would do, change nothing
      batch status BATCH_DIR        counts, incomplete runs, unreadable records
      batch stats BATCH_DIR         pass rates per model, with intervals
      batch report BATCH_DIR [B]    one self-contained HTML report (two: side by side)
      batch check SWEEP             preflight: reset, settle and probe each model
      batch view BATCH_DIR          a live page of the batch in the browser, with controls
      batch control BATCH_DIR pause pause | continue | stop | skip MODEL | concurrency N

    Every command and option, and the exit statuses: docs/cli.md.
    """


_SWEEP = click.argument("sweep", type=click.Path(path_type=Path, dir_okay=False))
_RESUME = click.option(
    "--resume",
    "resume",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[BATCH_DIR]",
    help="Reuse a batch dir and rerun only jobs with no recorded outcome. "
    "Without a value: the newest batch dir of this sweep under the output root.",
)
_RETRY_FAILED = click.option(
    "--retry-failed",
    is_flag=True,
    help="Also rerun jobs whose recorded failure is not the model's (the sweep's "
    "non_model_categories; by default infra_failure, api_or_credit, task_data, "
    "build_instruction). Implies --resume.",
)
_RETRY_CATEGORY = click.option(
    "--retry-category",
    "retry_categories",
    multiple=True,
    metavar="CAT",
    help="Rerun recorded failures of exactly these categories (repeatable; replaces the "
    "default set, may name model_failure). Implies --resume.",
)
_CASES = click.option(
    "--cases",
    "case_globs",
    multiple=True,
    metavar="GLOB",
    help="Only cases matching this fnmatch glob (repeatable). A job left out keeps its "
    "recorded result, or is skipped.",
)
_MODELS = click.option(
    "--models",
    "model_globs",
    multiple=True,
    metavar="GLOB",
    help="Only models matching this fnmatch glob (repeatable).",
)
_OUTPUT = click.option(
    "-o",
    "--output",
    # Not file_okay=False: the command checks the output root, so that -o and the sweep's
    # output: give the same one-line error (docs/cli.md).
    type=click.Path(path_type=Path),
    default=None,
    help="Output root for batch dirs (default: the sweep's 'output', relative to the file).",
)

_MAX_ATTEMPTS = click.option(
    "--max-attempts",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Attempts each job may spend in its batch dir, for this invocation only (replaces "
    "the sweep's and its models' max_attempts, default 3): a job that has spent them is "
    "not retried again.",
)


_REPEATS = click.option(
    "--repeats",
    type=click.IntRange(min=1, max=10_000),
    default=None,
    metavar="N",
    help="Samples of every case x model, for this invocation (replaces the sweep's and its "
    "models' repeats, default 1). On --resume, raising it runs only the new repeats; "
    "lowering it keeps the extra records out of the summary and the stats.",
)


def _selection_options(command: Callable[..., ExitStatus]) -> Callable[..., ExitStatus]:
    """The options ``run`` and ``plan`` share, as one decorator (see :class:`_Selection`)."""
    shared = (
        _OUTPUT,
        _RESUME,
        _RETRY_FAILED,
        _RETRY_CATEGORY,
        _MAX_ATTEMPTS,
        _REPEATS,
        _CASES,
        _MODELS,
    )
    for option in reversed(shared):
        command = option(command)
    return command


class _Selection(TypedDict):
    """The options ``run`` and ``plan`` share (``_OUTPUT`` ... ``_MODELS``), named as
    :class:`~batch.plan.planner.RunOptions` fields."""

    output: Path | None
    resume: str | None
    retry_failed: bool
    retry_categories: tuple[str, ...]
    max_attempts: int | None
    repeats: int | None
    case_globs: tuple[str, ...]
    model_globs: tuple[str, ...]


def _run_options(selection: _Selection, **run_only: Any) -> RunOptions:
    """The ``RunOptions`` of a ``run`` or ``plan`` command: the shared options and
    ``run``'s own (``max_concurrent``, ``progress``, ...)."""
    from batch.plan.planner import RunOptions

    return RunOptions(**selection, **run_only)


@main.command()
@_SWEEP
@_selection_options
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
    **selection: Unpack[_Selection],
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

    options = _run_options(
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
    return run_main(sweep, options, out=sys.stdout, err=sys.stderr, program=_invoked())


def _invoked() -> tuple[str, ...]:
    """How the user ran the program, repeated in the hints they paste; ``batch`` inside
    another program (a test's click runner)."""
    if not _PROGRAM:
        return ("batch",)
    import shutil

    from batch.display.next_steps import invoked_program

    def found_by_name(path: str) -> bool:
        found = shutil.which(os.path.basename(path))
        try:
            return found is not None and os.path.samefile(found, path)
        except OSError:
            return False

    return invoked_program(sys.argv, sys.orig_argv, found_by_name)


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


@main.command()
@_SWEEP
@_selection_options
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def plan(sweep: Path, fmt: str, **selection: Unpack[_Selection]) -> ExitStatus:
    """Print every job's decision (run | carry | retry) and why; change nothing on disk.

    \b
    --format json prints {"batch_dir", "counts": {"run", "carry", "retry"},
    "jobs": [{"case", "model", "decision", "reason"}, ...], "unreadable": [...]}.
    """
    from batch.commands.plan import plan_main

    return plan_main(
        sweep, _run_options(selection), fmt=fmt, out=sys.stdout, err=sys.stderr, keep=_KEPT
    )


@main.command()
@click.argument("batch_dir", metavar="BATCH_DIR|SWEEP", type=click.Path(path_type=Path))
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def status(batch_dir: Path, fmt: str) -> ExitStatus:
    """Show a batch dir: job counts, incomplete run dirs, unreadable records. Given a
    sweep file instead: its newest batch dir under the output root."""
    from batch.commands.status import status_main

    return status_main(batch_dir, fmt=fmt, out=sys.stdout, err=sys.stderr)


@main.command()
@click.argument(
    "batch_dirs",
    nargs=-1,
    required=True,
    metavar="BATCH_DIR|SWEEP...",
    type=click.Path(path_type=Path),
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port to listen on (0: a free one).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind; anything but loopback lets other machines in, with the token.",
)
@click.option("--read-only", is_flag=True, help="Serve no controls: the page only watches.")
# batch SWEEP --view: the view ends when its driver does, however that ends.
@click.option("--beside", type=int, default=None, hidden=True)
@click.option("--secrets-stdin", is_flag=True, hidden=True)
def view(
    batch_dirs: tuple[Path, ...],
    port: int,
    host: str,
    read_only: bool,
    beside: int | None,
    secrets_stdin: bool,
) -> ExitStatus:
    """Serve a live page of BATCH_DIR (several: side by side) with its controls. A sweep
    file instead: its newest batch dir, and the sweep's secrets are redacted from what the
    page shows. The first line printed is the URL, with the token only its holder gets in
    with (docs/view.md)."""
    from batch.commands.view import view_main

    return view_main(
        batch_dirs,
        host=host,
        port=port,
        read_only=read_only,
        out=sys.stdout,
        beside=beside,
        secrets_stdin=secrets_stdin,
    )


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("batch_dir", type=click.Path(path_type=Path))
@click.argument("words", nargs=-1, required=True, metavar="ACTION [ARGS]")
def control(batch_dir: Path, words: tuple[str, ...]) -> ExitStatus:
    """Steer the driver running BATCH_DIR: pause | continue | stop | skip MODEL |
    unskip MODEL | concurrency [MODEL] N. Waits until the driver has taken it (within a
    second) and prints what it said (docs/view.md)."""
    from batch.commands.control import control_main

    return control_main(batch_dir, words, out=sys.stdout)


@main.command()
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
        keep=_KEPT,
    )


@main.command()
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


@main.command()
@_SWEEP
@_OUTPUT
@_MODELS
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


#: True when this module runs as the program (:func:`entry`), not inside another (a test's
#: click runner): then the commands of ``_ENDS_AT_ONCE`` end the process themselves once
#: their status is known (:func:`_exit_at_once`).
_PROGRAM = False
#: The read-only commands, and ``run``, whose records, summary, events and lock are all
#: written and closed when it returns. (``check`` exits as usual.)
_ENDS_AT_ONCE = frozenset({"run", "plan", "status", "stats", "report"})
#: What a command keeps alive until its process ends at once (a plan's jobs): freeing it
#: as the command returns would cost what ending at once saves.
_KEPT: list[object] = []


def _exit_at_once(status: int) -> None:
    """End the process with ``status`` now, if it is the program's and its output is out.

    What a normal exit would do next is free every object one by one (a plan of 100,000
    jobs, kept for this: ≈ 0.1 s of a 2 s plan; 31-70 ms after ``status`` of 20,000
    records; 65 ms after a run of 800 jobs) and run atexit handlers, of which the read-only
    commands and a local run register only ``logging``'s, with no handler to flush. When
    flushing fails (a closed pipe), it returns, and the normal exit reports it as before.
    """
    if not _PROGRAM:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(status)


def entry(prog_name: str | None = None) -> None:
    """The ``batch`` program (the ``batch`` script, ``python -m batch``, ``python -m
    batch.cli``); ``prog_name`` is the name its help shows (by default, how it was run)."""
    global _PROGRAM
    _PROGRAM = True
    main(prog_name=prog_name)


if __name__ == "__main__":  # pragma: no cover
    entry()
