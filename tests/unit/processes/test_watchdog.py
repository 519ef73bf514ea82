"""Job groups never outlive their driver: the watchdog stops them when the driver ends (even
by SIGKILL), and ``reap_leftovers`` stops what a dead driver recorded in ``pgids.json``."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
from helpers.fake_jobs import (
    fake_agent_command,
    is_gone,
    read_pid,
    stubborn,
    wait_until,
    write_job_script,
)

from batch.processes.registry import ProcessRegistry
from batch.processes.spawn import spawn
from batch.processes.watchdog import TOKEN_VAR, Reaped, reap_leftovers


def test_closing_the_registry_stops_jobs_still_running(tmp_path: Path) -> None:
    async def scenario() -> int:
        registry = ProcessRegistry(tmp_path, kill_grace=0.3)
        process = await spawn(
            fake_agent_command("sleep=30"),
            cwd=tmp_path,
            env=dict(os.environ),
            log_path=tmp_path / "output.log",
            registry=registry,
        )
        registry.close()  # as when the driver exits: the watchdog sees its input end
        return await process.wait()

    assert asyncio.run(scenario()) == -signal.SIGTERM


#: Of this test process alone: a reap by a test of another process of ``pytest -n`` (the
#: suite runs in parallel) must not find this one's jobs, as it would with a fixed token.
INVOCATION = os.urandom(8).hex()
JOB_TOKEN = f"{INVOCATION}.1"


def leftover(
    tmp_path: Path, *actions: str, token: str | None = JOB_TOKEN
) -> subprocess.Popen[bytes]:
    """A job group as a dead driver would have left it (``token``: its job token)."""
    env = {k: v for k, v in os.environ.items() if k != TOKEN_VAR}
    if token is not None:
        env[TOKEN_VAR] = token
    return subprocess.Popen(fake_agent_command(*actions), start_new_session=True, env=env)


def record_pgids(tmp_path: Path, entries: list[dict[str, object]]) -> None:
    """``pgids.json`` as a driver of invocation INVOCATION wrote it."""
    (tmp_path / "batch-logs").mkdir(exist_ok=True)
    state = {"token": INVOCATION, "groups": [{"token": JOB_TOKEN, **e} for e in entries]}
    (tmp_path / "batch-logs" / "pgids.json").write_text(json.dumps(state))


def test_reap_leftovers_stops_a_recorded_live_group(tmp_path: Path) -> None:
    job = leftover(tmp_path, *stubborn(f"grandchild={tmp_path}/gc"))
    grandchild = read_pid(tmp_path / "gc")
    start_time = psutil.Process(job.pid).create_time()
    record_pgids(tmp_path, [{"pgid": job.pid, "pid": job.pid, "start_time": start_time}])

    assert reap_leftovers(tmp_path, grace=0.2).groups == [job.pid]
    assert job.wait(timeout=2) == -signal.SIGKILL
    assert wait_until(lambda: is_gone(grandchild), 2)


def test_reap_leftovers_stops_members_whose_leader_is_gone(tmp_path: Path) -> None:
    job = leftover(tmp_path, f"grandchild={tmp_path}/gc")
    job.wait(timeout=5)
    grandchild = read_pid(tmp_path / "gc")
    record_pgids(tmp_path, [{"pgid": job.pid, "pid": job.pid, "start_time": 1.0}])

    assert reap_leftovers(tmp_path, grace=0.2).groups == [job.pid]
    assert wait_until(lambda: is_gone(grandchild), 2)


def test_reap_leftovers_leaves_a_reused_pid_alone(tmp_path: Path) -> None:
    other = leftover(tmp_path, "sleep=30", token=None)
    try:
        real_start = psutil.Process(other.pid).create_time()
        record_pgids(
            tmp_path, [{"pgid": other.pid, "pid": other.pid, "start_time": real_start - 60}]
        )
        reaped = reap_leftovers(tmp_path, grace=0.2)
        assert reaped.groups == []
        assert reaped.left_alone == {other.pid: f"pid {other.pid} started at another time"}
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_reap_leftovers_leaves_a_group_without_the_job_token_alone(tmp_path: Path) -> None:
    # The pid, its start time and its group all match the record: only the token is missing
    # (the pgid now belongs to some other program of the same user).
    other = leftover(tmp_path, "sleep=30", token=None)
    try:
        real_start = psutil.Process(other.pid).create_time()
        record_pgids(tmp_path, [{"pgid": other.pid, "pid": other.pid, "start_time": real_start}])
        reaped = reap_leftovers(tmp_path, grace=0.2)
        assert reaped.groups == []
        assert reaped.left_alone == {other.pid: f"pid {other.pid} does not carry the job's token"}
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_reap_leftovers_leaves_a_group_whose_members_lack_the_token_alone(
    tmp_path: Path,
) -> None:
    job = leftover(tmp_path, f"grandchild={tmp_path}/gc", token=None)
    job.wait(timeout=5)
    grandchild = read_pid(tmp_path / "gc")
    try:
        record_pgids(tmp_path, [{"pgid": job.pid, "pid": job.pid, "start_time": 1.0}])
        reaped = reap_leftovers(tmp_path, grace=0.2)
        assert reaped.left_alone == {job.pid: "no member carries the job's token"}
        assert not is_gone(grandchild)
    finally:
        os.kill(grandchild, signal.SIGKILL)


def test_reap_leftovers_ignores_a_record_without_tokens(tmp_path: Path) -> None:
    # The format before tokens (a bare list), or an entry a job forged: nothing proves it.
    other = leftover(tmp_path, "sleep=30", token=None)
    try:
        real_start = psutil.Process(other.pid).create_time()
        (tmp_path / "batch-logs").mkdir()
        (tmp_path / "batch-logs" / "pgids.json").write_text(
            json.dumps([{"pgid": other.pid, "pid": other.pid, "start_time": real_start}])
        )
        assert reap_leftovers(tmp_path, grace=0.2).left_alone == {
            other.pid: "no job token recorded"
        }
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_reap_leftovers_without_a_record_does_nothing(tmp_path: Path) -> None:
    assert reap_leftovers(tmp_path) == Reaped()
    record_pgids(tmp_path, [])
    assert reap_leftovers(tmp_path) == Reaped()
    (tmp_path / "batch-logs" / "pgids.json").write_text("{truncated")
    assert reap_leftovers(tmp_path) == Reaped()


DRIVER = """
    import asyncio, os, sys
    from pathlib import Path
    from batch.processes.spawn import spawn
    from batch.processes.registry import ProcessRegistry

    async def main(tmp):
        registry = ProcessRegistry(tmp, kill_grace=0.3)
        argv = sys.argv[2:]
        await spawn(
            argv, cwd=tmp, env=dict(os.environ), log_path=tmp / "job.log", registry=registry
        )
        print("started", flush=True)
        await asyncio.sleep(60)

    asyncio.run(main(Path(sys.argv[1])))
"""


def test_jobs_die_with_a_driver_killed_by_sigkill(tmp_path: Path) -> None:
    script = write_job_script(tmp_path, textwrap.dedent(DRIVER), name="driver.py")
    actions = stubborn(f"pidfile={tmp_path}/job", f"grandchild={tmp_path}/gc")
    driver = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path), *fake_agent_command(*actions)],
        stdout=subprocess.PIPE,
    )
    assert driver.stdout is not None and driver.stdout.readline() == b"started\n"
    job, grandchild = read_pid(tmp_path / "job"), read_pid(tmp_path / "gc")
    driver.send_signal(signal.SIGKILL)
    driver.wait()

    assert wait_until(lambda: is_gone(job) and is_gone(grandchild), 5)


def test_the_job_token_is_read_wherever_it_stands_in_a_process_environment(
    tmp_path: Path,
) -> None:
    from batch.processes.watchdog import carried_token

    envs = {
        "first": {TOKEN_VAR: "abc.1", "A": "x"},
        "middle": {"A": "x", TOKEN_VAR: "abc.2", "B": "y"},
        "last": {"A": "x", TOKEN_VAR: "abc.3"},
        "lookalike": {"A": f"{TOKEN_VAR}=abc.4", f"X{TOKEN_VAR}": "abc.5"},
    }
    processes = {
        name: subprocess.Popen(["/bin/sleep", "30"], env=env) for name, env in envs.items()
    }
    try:
        tokens = {name: carried_token(p.pid) for name, p in processes.items()}
    finally:
        for process in processes.values():
            process.kill()
            process.wait()
    assert tokens == {"first": "abc.1", "middle": "abc.2", "last": "abc.3", "lookalike": None}
