"""One error path: every error a command raises becomes one line on stderr and its exit
status, through the one handler the command line uses (``batch.cli.handle``)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.paths import REPO_ROOT

from batch.cli import handle, main
from batch.errors import (
    BatchDirError,
    BatchDirUnwritable,
    BatchError,
    ExecutorLost,
    ExecutorUnavailable,
    ExitStatus,
    LocatedError,
    LockedError,
    RecordWriteError,
    SweepError,
    UsageError,
)


def raising(exc: BaseException) -> ExitStatus:
    raise exc


@pytest.mark.parametrize(
    ("error", "line", "status"),
    [
        (BatchError("the executor failed"), "error: the executor failed", 1),
        (
            UsageError("no job matches --cases/--models"),
            "error: no job matches --cases/--models",
            2,
        ),
        (
            SweepError("sweep.yaml:3:5: unknown key 'modles'"),
            "sweep.yaml:3:5: unknown key 'modles'",
            2,
        ),
        (
            LocatedError("runs/b/batch-summary.json: not JSON"),
            "runs/b/batch-summary.json: not JSON",
            2,
        ),
        (BatchDirError("runs/x: no such batch dir"), "error: runs/x: no such batch dir", 2),
        (ExecutorUnavailable("--executor dask needs Dask"), "error: --executor dask needs Dask", 2),
        (ExecutorLost("lost the Dask scheduler"), "error: lost the Dask scheduler", 1),
        (LockedError("locked by pid 7 on h"), "error: locked by pid 7 on h", 3),
        (
            RecordWriteError(Path("runs/b/m"), OSError(28, "No space left on device")),
            "error: cannot write runs/b/m: No space left on device",
            1,
        ),
        (
            BatchDirUnwritable("runs", "Permission denied"),
            "error: cannot write runs: Permission denied; nothing was started",
            1,
        ),
        (KeyboardInterrupt(), "interrupted", 130),
    ],
)
def test_each_error_is_one_line_on_stderr_and_its_status(
    error: BaseException, line: str, status: int
) -> None:
    err = io.StringIO()
    assert handle(lambda: raising(error), err) == status
    assert err.getvalue() == line + "\n"


def test_a_command_status_passes_through_and_prints_nothing() -> None:
    err = io.StringIO()
    assert handle(lambda: ExitStatus.ERRORS, err) is ExitStatus.ERRORS
    assert err.getvalue() == ""


def test_an_error_line_that_quotes_outside_text_stays_one_line() -> None:
    # A lock file or a path is anyone's text: a newline or ESC in it cannot start a line.
    err = io.StringIO()
    assert handle(lambda: raising(LockedError("pid 1 on h\nDONE\x1b[2J")), err) == 3
    assert err.getvalue() == "error: pid 1 on h\\nDONE\\x1b[2J\n"


def test_any_other_exception_is_not_the_handler_s(tmp_path: Path) -> None:
    # A bug surfaces with its traceback; it is not turned into a one-line usage error.
    with pytest.raises(ZeroDivisionError):
        handle(lambda: raising(ZeroDivisionError()), io.StringIO())


@pytest.mark.parametrize(
    ("args", "line", "status"),
    [
        (["status", "{tmp}/nope"], "error: {tmp}/nope: no such batch dir", 2),
        (["stats", "{tmp}/nope"], "{tmp}/nope/batch-summary.json: No such file or directory", 2),
        (["report", "{tmp}/nope"], "{tmp}/nope/batch-summary.json: No such file or directory", 2),
        (["{tmp}/sweep.yaml"], "{tmp}/sweep.yaml:1:1: missing required key 'models'", 2),
        (["plan", "{tmp}/sweep.yaml"], "{tmp}/sweep.yaml:1:1: missing required key 'models'", 2),
        (["check", "{tmp}/sweep.yaml"], "{tmp}/sweep.yaml:1:1: missing required key 'models'", 2),
        (
            ["{tmp}/good.yaml", "--resume", "{tmp}/nope"],
            "error: {tmp}/nope: no such batch dir",
            2,
        ),
    ],
)
def test_every_command_reports_through_the_same_handler(
    tmp_path: Path, args: list[str], line: str, status: int
) -> None:
    (tmp_path / "sweep.yaml").write_text("cases: [a]\ncommand: [sh, -c, 'exit 0']\n")
    (tmp_path / "good.yaml").write_text("cases: [a]\nmodels: [m]\ncommand: [sh, -c, 'exit 0']\n")
    argv = [arg.format(tmp=tmp_path) for arg in args]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == status, result.output
    assert result.stderr == line.format(tmp=tmp_path) + "\n"
    assert result.stdout == ""


def test_the_exit_statuses_are_the_documented_ones() -> None:
    text = (REPO_ROOT / "docs" / "cli.md").read_text()
    section = text.split("## Exit status", 1)[1]
    documented = {int(n) for n in re.findall(r"^\| (\d+) \|", section, re.MULTILINE)}
    assert documented == {status.value for status in ExitStatus}
    assert dict(ExitStatus.__members__) == {
        "OK": 0,
        "ERRORS": 1,
        "USAGE": 2,
        "LOCKED": 3,
        "HALTED": 4,
        "INTERRUPTED": 130,
    }
