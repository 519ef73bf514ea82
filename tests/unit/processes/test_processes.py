"""Job processes start in their own group, stream to disk, and stop when told.

That they never outlive their driver (the watchdog, leftover reaping) is
``tests/unit/processes/test_watchdog.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest
from helpers.fake_jobs import fake_agent_command, is_gone, read_pid, stubborn, wait_until

from batch.processes.registry import ProcessRegistry
from batch.processes.spawn import (
    SpawnError,
    pidfd_child_watcher,
    spawn,
    supervise,
    terminate_group,
)


def start(tmp_path: Path, *actions: str) -> asyncio.subprocess.Process:
    """Spawn the fake agent (inside a running loop), logging to tmp_path/output.log."""
    return spawn(  # type: ignore[return-value]
        fake_agent_command(*actions), cwd=tmp_path, env=dict(os.environ),
        log_path=tmp_path / "output.log",
    )  # fmt: skip


def test_a_job_runs_in_its_own_process_group_with_output_in_the_log(tmp_path: Path) -> None:
    async def scenario() -> int:
        process = await start(tmp_path, "print=hello", "exit=3")
        assert os.getpgid(process.pid) == process.pid != os.getpgid(0)
        return await process.wait()

    assert asyncio.run(scenario()) == 3
    assert (tmp_path / "output.log").read_text() == "hello\n"


def test_output_reaches_the_log_while_the_job_still_runs(tmp_path: Path) -> None:
    async def scenario() -> str:
        process = await start(tmp_path, "print=first line", "sleep=30")
        try:
            for _ in range(500):
                text = (tmp_path / "output.log").read_text()
                if text.endswith("\n"):  # the whole line: the child may write it in parts
                    return text
                await asyncio.sleep(0.01)
            return ""
        finally:
            process.kill()
            await process.wait()

    assert asyncio.run(scenario()) == "first line\n"


@pytest.mark.parametrize("kind", ["missing", "not executable"])
def test_a_job_that_cannot_start_raises_spawn_error_and_says_why_in_the_log(
    tmp_path: Path, kind: str
) -> None:
    program = tmp_path / "agent.sh"
    if kind == "not executable":
        program.write_text("echo hi\n")

    async def scenario() -> None:
        await spawn([str(program)], cwd=tmp_path, env={}, log_path=tmp_path / "output.log")

    with pytest.raises(SpawnError):
        asyncio.run(scenario())
    log = (tmp_path / "output.log").read_text()
    assert "agent.sh" in log
    assert ("No such file" if kind == "missing" else "Permission denied") in log


def test_pidfd_child_watcher_reaps_jobs_and_leaves_later_loops_alone(tmp_path: Path) -> None:
    async def inside() -> int:
        with pidfd_child_watcher():
            if sys.version_info < (3, 12):
                assert isinstance(asyncio.get_child_watcher(), asyncio.PidfdChildWatcher)
            process = await start(tmp_path, "exit=3")
            return await process.wait()

    async def after() -> int:
        process = await start(tmp_path, "exit=4")
        return await process.wait()

    assert asyncio.run(inside()) == 3
    assert asyncio.run(after()) == 4


def test_terminate_group_escalates_to_kill_for_the_job_and_its_grandchild(tmp_path: Path) -> None:
    async def scenario() -> float:
        process = await start(tmp_path, *stubborn(f"grandchild={tmp_path}/gc"))
        await asyncio.to_thread(read_pid, tmp_path / "gc")
        began = time.monotonic()
        await terminate_group(process.pid, 0.3, leader=process)
        assert await process.wait() == -signal.SIGKILL
        return time.monotonic() - began

    elapsed = asyncio.run(scenario())
    assert 0.3 <= elapsed < 2
    assert wait_until(lambda: is_gone(read_pid(tmp_path / "gc")), 2)


def test_terminate_group_without_leader_stops_what_a_finished_job_left(tmp_path: Path) -> None:
    async def scenario() -> None:
        process = await start(tmp_path, f"grandchild={tmp_path}/gc")
        await process.wait()
        grandchild = read_pid(tmp_path / "gc")
        assert not is_gone(grandchild)
        await terminate_group(process.pid, 0.2)

    asyncio.run(scenario())
    assert wait_until(lambda: is_gone(read_pid(tmp_path / "gc")), 2)


def supervised(tmp_path: Path, *actions: str, timeout: float | None = None) -> tuple[object, int]:
    """Run the fake agent under :func:`supervise`: (what it returned, the exit status)."""

    async def scenario() -> tuple[object, int]:
        registry = ProcessRegistry(None, watchdog=False)
        process = await start(tmp_path, *actions)
        ended = await supervise(process, registry, case="c", model="m", timeout=timeout, grace=0.2)
        assert len(registry) == 0  # forgotten once over
        return ended, await process.wait()

    return asyncio.run(scenario())


def test_supervise_reports_an_exit_and_stops_what_the_job_left_running(tmp_path: Path) -> None:
    assert supervised(tmp_path, f"grandchild={tmp_path}/gc", "exit=3") == (False, 3)
    assert wait_until(lambda: is_gone(read_pid(tmp_path / "gc")), 2)


def test_supervise_stops_a_job_whose_timeout_runs_out(tmp_path: Path) -> None:
    began = time.monotonic()
    ended, status = supervised(tmp_path, *stubborn(f"pidfile={tmp_path}/pid"), timeout=0.5)
    assert (ended, status) == (True, -signal.SIGKILL)
    assert time.monotonic() - began < 5


def test_supervise_returns_none_for_a_job_the_users_abort_killed(tmp_path: Path) -> None:
    async def scenario() -> object:
        registry = ProcessRegistry(None, watchdog=False)
        process = await start(tmp_path, f"pidfile={tmp_path}/pid", "sleep=30")
        waiting = asyncio.create_task(
            supervise(process, registry, case="c", model="m", timeout=None, grace=0.2)
        )
        await asyncio.to_thread(read_pid, tmp_path / "pid")
        await registry.kill_all(0.2)
        return await waiting

    assert asyncio.run(scenario()) is None


def test_kill_all_stops_every_group_and_remembers_them(tmp_path: Path) -> None:
    async def scenario() -> None:
        registry = ProcessRegistry(None, watchdog=False)
        polite = await start(tmp_path, "sleep=30")
        stubborn_job = await start(tmp_path, *stubborn(f"pidfile={tmp_path}/pid"))
        pgids = [registry.add(p, case="c", model="m") for p in (polite, stubborn_job)]
        await asyncio.to_thread(read_pid, tmp_path / "pid")
        assert sorted(await registry.kill_all(0.3)) == sorted(pgids)
        assert await polite.wait() == -signal.SIGTERM
        assert await stubborn_job.wait() == -signal.SIGKILL
        assert registry.aborting and all(registry.was_killed(pgid) for pgid in pgids)

        late = await start(tmp_path, "sleep=30")
        assert registry.was_killed(registry.add(late, case="c", model="m"))
        assert await late.wait() == -signal.SIGKILL

    asyncio.run(scenario())


def test_pgids_file_lists_live_groups_and_forgets_ended_ones(tmp_path: Path) -> None:
    state = tmp_path / "batch-logs" / "pgids.json"

    async def scenario() -> None:
        registry = ProcessRegistry(tmp_path, watchdog=False, flush_delay=0.01)
        process = await spawn(
            fake_agent_command("sleep=30"),
            cwd=tmp_path,
            env=dict(os.environ),
            log_path=tmp_path / "output.log",
            registry=registry,
            case="c01",
            model="openai/gpt-4o",
        )
        pgid = process.pid
        await asyncio.sleep(0.1)
        recorded = json.loads(state.read_text())
        assert recorded == {
            "token": registry.token,
            "groups": [
                {
                    "pgid": pgid,
                    "pid": process.pid,
                    "start_time": psutil.Process(process.pid).create_time(),
                    "case": "c01",
                    "model": "openai/gpt-4o",
                    "token": f"{registry.token}.1",
                }
            ],
        }
        process.kill()
        await process.wait()
        registry.discard(pgid)
        await asyncio.sleep(0.1)
        assert json.loads(state.read_text()) == {"token": registry.token, "groups": []}

    asyncio.run(scenario())


# Starts a daemon (fork, setsid, fork) that writes its pid to argv[1] and sleeps, then exits.
DAEMONIZE = (
    "import os, sys, time\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    "        open(sys.argv[1], 'w').write(str(os.getpid()))\n"
    "        time.sleep(30)\n"
    "    os._exit(0)\n"
    "while not os.path.exists(sys.argv[1]):\n"
    "    time.sleep(0.01)\n"
)


@pytest.mark.parametrize("helper", [False, True])
def test_a_jobs_daemon_is_stopped_at_the_end_a_helpers_server_is_not(
    tmp_path: Path, helper: bool
) -> None:
    # A between-models reset may start a model server on purpose; a job may not.
    pidfile = tmp_path / "daemon"

    async def scenario() -> None:
        registry = ProcessRegistry(tmp_path, kill_grace=0.2, watchdog=False)
        process = await spawn(
            [sys.executable, "-c", DAEMONIZE, str(pidfile)],
            cwd=tmp_path,
            env=dict(os.environ),
            log_path=tmp_path / "output.log",
            registry=registry,
            helper=helper,
        )
        await process.wait()
        registry.discard(process.pid)
        registry.close()

    asyncio.run(scenario())
    daemon = read_pid(pidfile)
    try:
        assert is_gone(daemon) is not helper
    finally:
        if not is_gone(daemon):
            os.kill(daemon, signal.SIGKILL)
