"""Removing an attempt's containers: which are a dead driver's, what the watchdog is told,
and a removal that runs to its end when its attempt is cancelled. The engine here is a
script that logs its arguments (real podman: ``tests/e2e/test_containers.py``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from helpers.fake_jobs import wait_until

from batch.attempt.container_removal import despite_cancel
from batch.processes.containers import orphan_ids
from batch.processes.watchdog import start_watchdog
from batch.sweep.features.containers import ContainerSpec


def test_the_orphans_are_the_batchs_containers_without_a_live_attempt() -> None:
    labels = {
        "a": "b1/m/r1",  # the batch's, its attempt dead: an orphan
        "b": "b1/m/r2",  # the batch's, its attempt alive (a live process carries it)
        "c": "b10/m/r1",  # another batch whose id starts with this one's
        "d": "b2/m/r1",
        "e": "",  # a label without a value
    }
    alive = {"batch-ledger.run=b1/m/r2"}

    assert orphan_ids(labels, "b1", alive) == ["a"]


def fake_engine(directory: Path) -> Path:
    """An engine that logs each call and lists two containers, one per attempt label."""
    inspected = [
        {"Id": cid, "Config": {"Labels": {"batch-ledger.run": value}}}
        for cid, value in (("c1", "b/m/r1"), ("c2", "b/m/r2"))
    ]
    (directory / "inspect.json").write_text(json.dumps(inspected))
    path = directory / "engine"
    path.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> "{directory}/calls"\n'
        'case "$1" in\n'
        "  ps) printf 'c1\\nc2\\n' ;;\n"
        f"  inspect) cat '{directory}/inspect.json' ;;\n"
        "esac\n"
    )
    path.chmod(0o755)
    return path


def test_a_dead_drivers_watchdog_removes_only_the_attempts_not_yet_cleaned(
    tmp_path: Path,
) -> None:
    watchdog = start_watchdog(0.2, "0123456789abcdef", ContainerSpec(str(fake_engine(tmp_path)), 5))
    assert watchdog.stdin is not None
    # Two attempts' groups (gone already), the first attempt's containers removed by the
    # driver; then the driver dies (the pipe closes).
    watchdog.stdin.write(
        b"+999999 0123456789abcdef.1 batch-ledger.run=b/m/r1\n"
        b"+999998 0123456789abcdef.2 batch-ledger.run=b/m/r2\n"
        b"-999999\n=batch-ledger.run=b/m/r1\n"
    )
    watchdog.stdin.close()
    assert watchdog.wait(30) == 0

    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0] == "ps --all --quiet --no-trunc --filter label=batch-ledger.run"
    assert "stop -t 0 c2" in calls
    assert not any("c1" in call for call in calls if not call.startswith("inspect"))


def test_a_removal_runs_to_its_end_through_cancels_and_the_cancel_is_raised_after() -> None:
    finished: list[str] = []

    async def removal() -> int:
        await asyncio.sleep(0.2)
        finished.append("removed")
        return 2

    async def scenario() -> None:
        async def attempt() -> int:
            return await despite_cancel(asyncio.ensure_future(removal()))

        task = asyncio.ensure_future(attempt())
        for _ in range(3):  # as a Dask worker does while the attempt has not ended
            await asyncio.sleep(0.02)
            task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert wait_until(lambda: finished == ["removed"], 1)
