"""The ``batch`` command line: parse options, call the plain function behind each command.

Only this package imports click. Each command returns an :class:`~batch.errors.ExitStatus`
or raises a :class:`~batch.errors.BatchError`; :func:`handle` turns either into the exit
status, and the error into one line on stderr. Each command's body is a one-call hand-off
to ``batch.commands``; the logic that is not declaration (a typo's suggestion) lives in
``batch.suggest``.

By role, one module each: the group, its default command and the one handler
(:mod:`batch.cli.group`); the options several commands share (:mod:`batch.cli.options`);
``run`` (:mod:`batch.cli.run`); the commands that leave a batch dir as it is, ``plan``,
``status``, ``stats``, ``report`` and ``check`` (:mod:`batch.cli.readonly`); the commands
on a running batch, ``view`` and ``steer`` (:mod:`batch.cli.live`); how the program ends
and how it was run (:mod:`batch.cli.program`). This module puts the commands in the group.
"""

from __future__ import annotations

from batch.cli import live, readonly, run
from batch.cli.group import handle, main
from batch.cli.program import become_the_program

__all__ = ["entry", "handle", "main"]

for _command in (
    run.run,
    readonly.plan,
    readonly.status,
    readonly.stats,
    readonly.report,
    readonly.check,
    live.view,
    live.steer,
    live.control,
):
    main.add_command(_command)


def entry(prog_name: str | None = None) -> None:
    """The ``batch`` program (the ``batch`` script, ``python -m batch``, ``python -m
    batch.cli``); ``prog_name`` is the name its help shows (by default, how it was run)."""
    become_the_program()
    main(prog_name=prog_name)
