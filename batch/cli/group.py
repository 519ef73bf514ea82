"""The ``batch`` group: the one error handler, the default command, and the group's help.

``batch SWEEP`` is ``batch run SWEEP`` (:class:`DefaultGroup`); a first word that is
neither a command nor a file is a mistyped command, said with its closest match. Every
command's status, or its error as one line on stderr, goes through :func:`handle`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import click

from batch.cli.program import ENDS_AT_ONCE, exit_at_once

if TYPE_CHECKING:  # imported when a command runs, so that --help stays fast
    from batch.errors import ExitStatus


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
                shown = sorted(name for name, c in self.commands.items() if not c.hidden)
                ctx.fail(_no_such_command(args[0], shown))
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
        if ctx.invoked_subcommand in ENDS_AT_ONCE and "distributed" not in sys.modules:
            exit_at_once(status)
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
      batch steer BATCH_DIR pause   pause | continue | stop | skip MODEL | concurrency N

    Every command and option, and the exit statuses: docs/cli.md.
    """
