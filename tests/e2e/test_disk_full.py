"""A full or unwritable disk: nothing recorded is lost, the failure is one line, nothing
more starts, and a later --resume picks up exactly where the records stop.

Failures are injected where every record and the summary are written
(``run_support.atomic``'s ``os.open``/``os.write``/``os.replace``), so the write fails
inside ``atomic_write_bytes`` as it would on a real full disk.
"""

from __future__ import annotations

import errno
import io
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from helpers.failing_os import FailingOS
from helpers.fake_jobs import fake_agent_command

from batch.cli import handle
from batch.commands.run import run_main
from batch.errors import ExitStatus
from batch.plan.planner import RunOptions
from run_support import atomic

CASES = ["c1", "c2", "c3", "c4", "c5"]


def nth_write_of(name: str, first_failing: int) -> Callable[[str], bool]:
    """True for the ``first_failing``-th write of a file called ``name`` and every later one."""
    seen = 0

    def fails(path: str) -> bool:
        nonlocal seen
        if f".{name}." not in os.path.basename(path):  # the temp file beside it
            return False
        seen += 1
        return seen >= first_failing

    return fails


def write_sweep(tmp_path: Path) -> Path:
    sweep = tmp_path / "sweep.yaml"
    command = ", ".join(json.dumps(arg) for arg in fake_agent_command("exit=0"))
    sweep.write_text(
        f"cases: [{', '.join(CASES)}]\nmodels: [m/one]\ncommand: [{command}]\n"
        "max_concurrent: 1\nsummary_interval: 0s\n"
    )
    return sweep


def run(sweep: Path, **options: Any) -> tuple[int, str]:
    out = io.StringIO()
    status = handle(
        lambda: run_main(sweep, RunOptions(progress=False, **options), out=out, err=out), out
    )
    return status, out.getvalue()


def batch_dir(tmp_path: Path) -> Path:
    (found,) = (tmp_path / "runs").iterdir()
    return found


def summary(tmp_path: Path) -> dict[str, Any]:
    return json.loads((batch_dir(tmp_path) / "batch-summary.json").read_bytes())


def records(tmp_path: Path) -> list[str]:
    """The cases with a run-meta.json, each of which must parse."""
    return sorted(
        json.loads(path.read_bytes())["test_case"]
        for path in batch_dir(tmp_path).glob("*/*/run-meta.json")
    )


def leftovers(tmp_path: Path) -> list[Path]:
    return list(tmp_path.rglob(".*.tmp"))


@pytest.mark.parametrize(
    ("call", "code"),
    [("write", errno.ENOSPC), ("open", errno.EACCES), ("replace", errno.EROFS)],
)
def test_a_record_that_cannot_be_written_stops_the_batch_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str, code: int
) -> None:
    sweep = write_sweep(tmp_path)
    failing = FailingOS(call, code, nth_write_of("run-meta.json", 3))
    monkeypatch.setattr(atomic, "os", failing)

    status, output = run(sweep)

    assert status == ExitStatus.ERRORS
    (line,) = [line for line in output.splitlines() if os.strerror(code) in line]
    assert "error: cannot write" in line and "run-meta.json" in line
    assert "starting no more jobs" in line
    assert failing.failures == 1  # the third job's record; nothing started after it
    assert records(tmp_path) == ["c1", "c2"]
    assert len(list(batch_dir(tmp_path).glob("*/*/output.log"))) == 3
    assert leftovers(tmp_path) == []
    after = summary(tmp_path)
    assert after["state"] == "interrupted"
    assert [row["status"] for row in after["jobs"]] == ["passed", "passed"] + ["skipped"] * 3

    monkeypatch.setattr(atomic, "os", os)
    status, output = run(sweep, resume="")
    assert status == ExitStatus.OK
    assert "2 carried over, 3 to run" in output
    assert records(tmp_path) == CASES
    assert summary(tmp_path)["state"] == "complete"


def test_a_summary_that_cannot_be_rewritten_stays_as_it_was_and_nothing_more_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep = write_sweep(tmp_path)
    writes: list[bytes] = []
    real_write = atomic.atomic_write_bytes

    def spy(path: Path, data: bytes | Iterable[bytes], **kwargs: Any) -> None:
        data = data if isinstance(data, bytes) else b"".join(data)  # the summary's pieces
        real_write(path, data, **kwargs)
        if path.name == "batch-summary.json":
            writes.append(data)

    monkeypatch.setattr("batch.summary.write.atomic_write_bytes", spy)
    # Written at the start, when c1 starts and when it ends: that third write fails.
    monkeypatch.setattr(atomic, "os", FailingOS("write", errno.ENOSPC, nth_write_of(
        "batch-summary.json", 3)))  # fmt: skip

    status, output = run(sweep)

    assert status == ExitStatus.ERRORS
    (line,) = [line for line in output.splitlines() if "No space left on device" in line]
    assert "batch-summary.json" in line and "starting no more jobs" in line
    assert records(tmp_path) == ["c1"]  # it was running; it finished; nothing else began
    assert leftovers(tmp_path) == []
    on_disk = (batch_dir(tmp_path) / "batch-summary.json").read_bytes()
    assert on_disk == writes[-1] and len(writes) == 2
    assert json.loads(on_disk)["jobs"][0]["status"] == "running"

    monkeypatch.setattr(atomic, "os", os)
    status, _ = run(sweep, resume="")
    assert status == ExitStatus.OK
    assert [row["status"] for row in summary(tmp_path)["jobs"]] == ["passed"] * 5
    assert [row["resumed"] for row in summary(tmp_path)["jobs"]] == [True] + [False] * 4


def test_a_full_disk_at_the_start_is_one_line_and_starts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep = write_sweep(tmp_path)
    monkeypatch.setattr(atomic, "os", FailingOS("write", errno.ENOSPC, lambda path: True))

    status, output = run(sweep)

    assert status == ExitStatus.ERRORS
    assert len(output.strip().splitlines()) == 1
    assert output.startswith("error: cannot write") and "No space left on device" in output
    assert list(batch_dir(tmp_path).glob("*/*")) == []


@pytest.mark.parametrize("where", ["-o", "output:"])
def test_an_output_root_that_is_a_file_is_a_usage_error(tmp_path: Path, where: str) -> None:
    # Given on the command line or in the sweep file, it is the same mistake: exit 2, one line.
    sweep = write_sweep(tmp_path)
    (tmp_path / "not-a-dir").write_text("a file where the output root should be\n")
    if where == "output:":
        sweep.write_text(sweep.read_text() + "output: not-a-dir\n")

    status, output = run(sweep, output=tmp_path / "not-a-dir" if where == "-o" else None)

    assert status == ExitStatus.USAGE
    (line,) = output.strip().splitlines()
    assert line == f"error: output root {tmp_path / 'not-a-dir'}: not a directory"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-a-dir", "sweep.yaml"]


def test_an_output_root_under_a_file_names_the_file(tmp_path: Path) -> None:
    sweep = write_sweep(tmp_path)
    (tmp_path / "not-a-dir").write_text("")

    status, output = run(sweep, output=tmp_path / "not-a-dir" / "runs")

    assert status == ExitStatus.USAGE
    assert output == (
        f"error: output root {tmp_path / 'not-a-dir' / 'runs'}: "
        f"{tmp_path / 'not-a-dir'} is not a directory\n"
    )
