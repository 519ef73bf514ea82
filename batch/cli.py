"""The ``batch`` command line: parse options, call the plain function behind each command.

Only this module imports click. Each command returns an exit status (DESIGN §8): 0 all
jobs have a result and none is ``error``; 1 some job ended in ``error``; 2 usage or sweep
file error; 3 batch dir locked by another driver; 130 interrupted.
"""

from __future__ import annotations

import sys

import click

EXIT_OK, EXIT_ERRORS, EXIT_USAGE, EXIT_LOCKED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class DefaultGroup(click.Group):
    """A group whose first argument, when it is not a command name, goes to ``run``.

    So ``batch sweep.yaml`` is ``batch run sweep.yaml``.
    """

    default_command = "run"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)


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
    """


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
