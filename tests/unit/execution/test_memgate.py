"""memfree: no job starts while less memory is available; the display says why."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest
from conftest import BatchCli
from helpers.fake_jobs import fake_agent_command, wait_until

from batch.errors import SweepError
from batch.execution.memgate import MemoryGate, waiting_reason
from batch.execution.scheduler import Scheduler
from batch.plan.jobs import Job
from batch.sweep.load import load_sweep
from batch.sweep.sizes import parse_size

GiB = 2**30


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4GiB", 4 * GiB),
        ("512MB", 512_000_000),
        ("512MiB", 512 * 2**20),
        ("2G", 2 * GiB),
        ("1.5 gib", int(1.5 * GiB)),
        ("8gb", 8_000_000_000),
        (1048576, 1048576),
        ("4096", 4096),
    ],
)
def test_sizes_are_read_as_people_write_them(text: object, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("4 gigs", "unknown unit 'gigs'"),
        ("-1GiB", "cannot read '-1GiB' as a size"),
        ("", "cannot read '' as a size"),
        (True, "expected a size"),
    ],
)
def test_unreadable_sizes_say_what_to_write(text: object, fragment: str) -> None:
    with pytest.raises(ValueError, match="4GiB") as info:
        parse_size(text)
    assert fragment in str(info.value)


def write_sweep(directory: Path, memfree: object) -> Path:
    path = directory / "sweep.yaml"
    sweep = {"cases": ["c"], "models": ["m"], "command": ["true"], "memfree": memfree}
    path.write_text(json.dumps(sweep), encoding="utf-8")
    return path


def test_memfree_in_a_sweep_is_bytes_and_a_bad_one_is_located(tmp_path: Path) -> None:
    assert load_sweep(write_sweep(tmp_path, "4GiB")).memfree == 4 * GiB
    with pytest.raises(SweepError, match=r"sweep\.yaml:1:\d+: memfree: unknown unit 'lots'"):
        load_sweep(write_sweep(tmp_path, "3 lots"))


def test_the_waiting_reason_names_both_figures_and_a_machine_too_small() -> None:
    assert waiting_reason(5 * GiB, 4 * GiB) is None
    assert waiting_reason(GiB, 4 * GiB) == "memory: 1.0 GiB available, memfree needs 4.0 GiB"
    assert waiting_reason(GiB, 64 * GiB, total=16 * GiB) == (
        "memory: 1.0 GiB available, memfree needs 64.0 GiB (more than this machine's 16.0 GiB)"
    )


class Memory:
    """Available memory that grows by ``step`` bytes every time the gate sleeps."""

    def __init__(self, start: int, step: int) -> None:
        self.available = start
        self.step = step
        self.sleeps = 0

    def __call__(self) -> int:
        return self.available

    async def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.available += self.step


def test_jobs_start_only_once_enough_memory_is_available_and_the_wait_is_shown() -> None:
    memory = Memory(start=1 * GiB, step=1 * GiB)
    shown: list[str | None] = []
    starts: list[tuple[str, int]] = []
    gate = MemoryGate(
        4 * GiB, on_wait=shown.append, available=memory, total=None, sleep=memory.sleep
    )

    async def run_job(job: Job) -> None:
        starts.append((job.case, memory.available))
        memory.available -= 2 * GiB  # the job takes its share
        await asyncio.sleep(0)

    scheduler = Scheduler(max_concurrent=1, clock=lambda: 0.0, start_gate=gate)
    asyncio.run(scheduler.run([[Job("c1", "m"), Job("c2", "m")]], run_job))
    assert starts == [("c1", 4 * GiB), ("c2", 4 * GiB)]
    assert memory.sleeps == 5  # 3 to reach 4 GiB, then 2 more after c1 took 2 GiB
    assert shown[0] == "memory: 1.0 GiB available, memfree needs 4.0 GiB"
    assert shown[-1] is None


def test_the_gate_lets_go_when_the_sweep_is_stopping() -> None:
    stopping = False
    shown: list[str | None] = []

    async def sleep(seconds: float) -> None:
        nonlocal stopping
        stopping = True

    gate = MemoryGate(
        GiB,
        on_wait=shown.append,
        stopping=lambda: stopping,
        available=lambda: 0,
        total=None,
        sleep=sleep,
    )
    asyncio.run(gate())
    assert shown == ["memory: 0 B available, memfree needs 1.0 GiB", None]


def test_a_sweep_waiting_for_memory_says_so_and_ctrl_c_is_not_held_up(
    batch_cli: BatchCli,
) -> None:
    sweep = batch_cli.dir / "sweep.yaml"
    # More than any machine has: the gate stays closed until the user gives up.
    content = {
        "output": "runs",
        "cases": ["c1"],
        "models": ["m"],
        "memfree": "1000TiB",
        "command": fake_agent_command(f"count={batch_cli.count_file}"),
    }
    sweep.write_text(json.dumps(content), encoding="utf-8")
    driver = batch_cli.start(sweep, "--no-progress")
    assert wait_until(lambda: "WAIT memory:" in driver.stdout, timeout=20)
    driver.signal(signal.SIGINT)
    assert driver.wait() == 130
    assert "memfree needs 1000 TiB (more than this machine's" in driver.stdout
    assert batch_cli.runs_counted() == []
    assert batch_cli.statuses() == {"c1": "skipped"}
