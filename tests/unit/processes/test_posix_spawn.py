"""A job started on the posix_spawn path sees exactly what Popen would have given it.

``batch.processes.posix_spawn`` is taken when the job's cwd is the driver's; each test here
runs the same job through it (``monkeypatch.chdir``) and, where the difference could show,
through Popen as well (another cwd), and compares what the job saw.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
from pathlib import Path

import pytest

from batch.processes import posix_spawn
from batch.processes.control import SpawnError, spawn

SHELL = shutil.which("sh") or "/bin/sh"


def run_job(argv: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None) -> int:
    async def scenario() -> int:
        process = await spawn(argv, cwd=cwd, env=env or dict(os.environ), log_path=log)
        return await process.wait()

    return asyncio.run(scenario())


def seen_by_job(script: str, where: Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    """What ``sh -c script`` printed, started with ``cwd`` (the driver's or another)."""
    log = where / "output.log"
    log.unlink(missing_ok=True)
    assert run_job([SHELL, "-c", script], cwd, log, env) == 0
    return log.read_text()


@pytest.fixture
def driver_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The driver's cwd, so that a job started there takes the posix_spawn path."""
    here = tmp_path / "driver"
    here.mkdir()
    monkeypatch.chdir(here)
    return here


def test_the_fast_path_is_taken_where_the_job_runs_in_the_drivers_cwd(driver_dir: Path) -> None:
    fd = os.open(driver_dir / "log", os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC)
    try:
        child = posix_spawn.spawn_exact(["true"], cwd=driver_dir, env=dict(os.environ), fd=fd)
        assert child is not None
        assert child.wait() == 0
        elsewhere = driver_dir.parent
        assert posix_spawn.spawn_exact(["true"], cwd=elsewhere, env={}, fd=fd) is None
    finally:
        os.close(fd)


def test_a_job_gets_the_same_session_stdin_cwd_and_signals_on_both_paths(
    driver_dir: Path, tmp_path: Path
) -> None:
    # Session and group leader, stdin /dev/null, cwd, and no signal ignored (Python ignores
    # SIGPIPE and SIGXFSZ; Popen's restore_signals gives the job their defaults).
    script = (
        "echo sid=$(ps -o sid= -p $$ | tr -d ' ') pid=$$; readlink /proc/self/fd/0; pwd; "
        "grep SigIgn /proc/self/status"
    )
    other = tmp_path / "other"
    other.mkdir()
    fast = seen_by_job(script, driver_dir, driver_dir)
    slow = seen_by_job(script, driver_dir, other)
    for text, cwd in ((fast, driver_dir), (slow, other)):
        session, stdin, pwd, ignored = text.splitlines()
        sid, pid = (part.split("=")[1] for part in session.split())
        assert sid == pid
        assert stdin == os.devnull
        assert Path(pwd).resolve() == cwd.resolve()
        mask = int(ignored.split()[1], 16)
        assert not mask & (1 << (signal.SIGPIPE - 1))
        assert not mask & (1 << (signal.SIGXFSZ - 1))


def test_an_fd_the_driver_inherited_does_not_reach_the_job(driver_dir: Path) -> None:
    # Popen closes every fd but 0-2 in the child; an inheritable one (as a driver's parent
    # may leave it) would otherwise stay open in the job and everything it starts.
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)
    try:
        listing = seen_by_job("ls /proc/self/fd", driver_dir, driver_dir)
    finally:
        os.close(read_end)
        os.close(write_end)
    open_fds = {int(name) for name in listing.split()}
    assert write_end not in open_fds
    assert open_fds <= {0, 1, 2, 3}  # 3: ls's own listing of the directory


def test_the_command_is_looked_up_in_the_jobs_path_not_the_drivers(
    driver_dir: Path, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "only-here"
    tool.write_text("#!/bin/sh\necho found in the PATH of the job\n")
    tool.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path / 'nothing'}:{bin_dir}"}
    log = driver_dir / "output.log"
    assert run_job(["only-here"], driver_dir, log, env) == 0
    assert log.read_text() == "found in the PATH of the job\n"


@pytest.mark.parametrize("kind", ["missing", "not executable", "no interpreter line"])
def test_a_command_that_cannot_start_says_the_same_on_both_paths(
    driver_dir: Path, tmp_path: Path, kind: str
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if kind != "missing":
        (bin_dir / "agent").write_bytes(b"\x00\x01not a program\n")
        (bin_dir / "agent").chmod(0o644 if kind == "not executable" else 0o755)
    env = {**os.environ, "PATH": str(bin_dir)}
    other = tmp_path / "other"
    other.mkdir()
    said = []
    for cwd in (driver_dir, other):
        log = cwd / "output.log"
        with pytest.raises(SpawnError) as raised:
            run_job(["agent"], cwd, log, env)
        said.append((str(raised.value), log.read_text()))
    assert said[0] == said[1]
    assert "cannot start 'agent'" in said[0][0]
