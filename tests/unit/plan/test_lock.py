"""One live driver per batch dir."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from batch.errors import LockedError
from batch.plan.lock import BatchLock


def hold_lock_in_subprocess(batch_dir: Path) -> subprocess.Popen[str]:
    code = textwrap.dedent(
        f"""
        import sys, time
        from batch.plan.lock import BatchLock
        BatchLock({str(batch_dir)!r}).acquire()
        print("locked", flush=True)
        time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def test_second_driver_is_refused_with_the_holders_pid_and_host(tmp_path: Path) -> None:
    holder = hold_lock_in_subprocess(tmp_path)
    try:
        with pytest.raises(LockedError) as refused:
            BatchLock(tmp_path).acquire()
        assert f"pid {holder.pid}" in str(refused.value)
        assert socket.gethostname() in str(refused.value)
    finally:
        holder.kill()
        holder.wait()


def test_lock_of_a_killed_driver_is_taken_over_with_a_note(tmp_path: Path) -> None:
    holder = hold_lock_in_subprocess(tmp_path)
    holder.kill()
    holder.wait()
    lock = BatchLock(tmp_path)
    lock.acquire()
    try:
        assert lock.took_over == (holder.pid, socket.gethostname())
        assert json.loads(lock.path.read_text())["pid"] == os.getpid()
    finally:
        lock.release()


def test_clean_release_leaves_no_lock_behind(tmp_path: Path) -> None:
    with BatchLock(tmp_path) as lock:
        assert lock.path.exists()
    assert not lock.path.exists()
    again = BatchLock(tmp_path)
    again.acquire()
    assert again.took_over is None
    again.release()


def test_a_lock_file_from_another_host_is_refused_not_guessed(tmp_path: Path) -> None:
    path = tmp_path / "batch-logs" / "driver.lock"
    path.parent.mkdir()
    path.write_text(json.dumps({"pid": 4242, "host": "other-node-17"}))
    with pytest.raises(LockedError, match="pid 4242 on host other-node-17"):
        BatchLock(tmp_path).acquire()
    assert path.exists()


def test_a_refused_driver_reads_and_writes_nothing_in_the_live_batch_dir(
    tmp_path: Path,
) -> None:
    # The ledger (and its index) used to be read before the lock was taken, so a driver
    # that was then refused had already written .ledger-index into another driver's batch.
    from helpers.builders import write_record

    sweep = tmp_path / "sweep.yaml"
    sweep.write_text('cases: [c1]\nmodels: [m]\ncommand: ["true"]\noutput: runs\n')
    batch_dir = tmp_path / "runs" / "batch-20261130T000000Z"
    write_record(batch_dir, "c1", "m", "passed")
    time.sleep(2.1)  # past the ledger index's racy window, so a read would cache it
    holder = hold_lock_in_subprocess(batch_dir)
    try:
        refused = subprocess.run(
            [sys.executable, "-m", "batch.cli", str(sweep), "--resume", str(batch_dir)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        holder.kill()
        holder.wait()
    assert refused.returncode == 3, refused.stderr
    assert not (batch_dir / ".ledger-index").exists()
