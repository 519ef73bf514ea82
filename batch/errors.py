"""Exit statuses and the errors a user must act on: one line on stderr, one exit status.

A command returns an :class:`ExitStatus`, or raises a :class:`BatchError`; the command line
(:mod:`batch.cli`) turns the error into :meth:`BatchError.message` and its ``status``.
Errors that never reach the user as such stay outside this hierarchy: a job's ``SpawnError``
(its record says ``error``) and the ledger's ``InvalidRecord`` (the job runs again).
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import ClassVar


class ExitStatus(enum.IntEnum):
    """What ``batch`` exits with (docs/cli.md)."""

    #: Every job has a result and none is ``error``; a read-only command succeeded.
    OK = 0
    #: Some job ended in ``error``, the batch dir could not be written, a Dask scheduler
    #: was lost, or ``batch check``'s reset or probe failed.
    ERRORS = 1
    #: A bad option, a broken sweep file, nothing to resume, an unreadable input file.
    USAGE = 2
    #: Another live driver holds the batch dir.
    LOCKED = 3
    #: A policy stopped the sweep early (``halt``, ``--deadline``; docs/policies.md).
    HALTED = 4
    #: Ctrl-C or SIGTERM.
    INTERRUPTED = 130


class BatchError(Exception):
    """An error the user caused or must act on: one line, one exit status."""

    status: ClassVar[ExitStatus] = ExitStatus.ERRORS

    def message(self) -> str:
        """The line printed on stderr."""
        return f"error: {self}"

    def lines(self) -> tuple[str, ...]:
        """Every line printed on stderr: the message, and any independent problems found
        beside it (a sweep file's other mistakes)."""
        return (self.message(),)


class UsageError(BatchError):
    """A problem with the command line or the files it names."""

    status = ExitStatus.USAGE


class LocatedError(UsageError):
    """A usage error whose text already says where: ``PATH: message``, or the command
    (``batch stats: message``); printed as it is, without ``error:``."""

    def message(self) -> str:
        return str(self)


class SweepError(LocatedError):
    """A sweep file problem, already formatted as ``FILE:LINE:COL: message``; ``more``: the
    file's other, independent problems, each such a line, so one run names them all."""

    def __init__(self, message: str, *more: str) -> None:
        super().__init__(message)
        self.more = more

    def lines(self) -> tuple[str, ...]:
        return (self.message(), *self.more)


class BatchDirError(UsageError):
    """No batch dir to resume, or the one named is not a batch dir."""


class ExecutorUnavailable(UsageError):
    """The sweep's executor cannot be used here (Dask not installed): found before anything
    starts."""


class ExecutorLost(BatchError):
    """The executor cannot go on: no cluster, the scheduler connection lost, a worker that
    cannot see the batch dir. The sweep stops; what ran is recorded and ``--resume`` goes on.
    """


class LockedError(BatchError):
    """Another live driver holds the batch dir."""

    status = ExitStatus.LOCKED


class RecordWriteError(BatchError):
    """The batch dir refused a write (disk full, permissions): no more jobs should start.

    Records already written are intact, each having been replaced atomically.
    """

    def __init__(self, path: Path | str, error: OSError) -> None:
        super().__init__(f"cannot write {path}: {error.strerror or error}")
        self.path = Path(path)
        self.error = error


class BatchDirUnwritable(BatchError):
    """The batch dir, its lock, its events log or its sweep snapshot could not be written
    before the first job: the sweep did not start."""

    def __init__(self, where: object, why: object) -> None:
        super().__init__(f"cannot write {where}: {why}; nothing was started")
