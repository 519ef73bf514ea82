"""The overnight queue: reset, RAM settle and cooldown before each model's block."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest
from helpers.builders import FakeTime
from helpers.fake_jobs import fake_agent_command, write_job_script

from batch.commands.run import run_main
from batch.errors import SweepError
from batch.execution.model_switch import (
    QueueRuntime,
    between_models_for,
    switch_model,
    wait_until_settled,
)
from batch.plan.planner import RunOptions
from batch.sweep.features.between_models import BetweenModels, Settle, SideCommand
from batch.sweep.load import load_sweep


class FakeRam:
    """Used RAM in MB: the given readings in turn, then the last one forever."""

    def __init__(self, readings: Iterable[float]) -> None:
        self.readings = list(readings)
        self.polls = 0

    def __call__(self) -> float:
        value = self.readings[min(self.polls, len(self.readings) - 1)]
        self.polls += 1
        return value


SETTLE = Settle(epsilon_mb=64, plateau_polls=3, poll_interval=2.0, timeout=60.0)


def settle(readings: Iterable[float], config: Settle = SETTLE, stopping=lambda: False):
    fake = FakeTime()
    result = asyncio.run(
        wait_until_settled(
            FakeRam(readings), fake.sleep, fake.clock, settle=config, stopping=stopping
        )
    )
    return result, fake


# --- settle ----------------------------------------------------------------------------------


def test_ram_that_stops_falling_settles_after_plateau_polls_in_a_row() -> None:
    result, fake = settle([9000, 7000, 5200, 5190, 5185, 5184, 1])
    assert result.settled
    assert result.readings_mb == (9000, 7000, 5200, 5190, 5185, 5184)
    assert result.baseline_mb == 5184
    assert fake.sleeps == [2.0] * 5
    assert result.waited == 10.0


def test_a_jump_inside_the_plateau_starts_the_count_again() -> None:
    result, _ = settle([5000, 5010, 5020, 5900, 5910, 5920, 5930])
    assert result.settled
    assert len(result.readings_mb) == 7  # three quiet polls after the jump at the 4th


def test_ram_that_never_settles_gives_up_at_the_timeout_as_a_dirty_baseline() -> None:
    falling = [10_000 - 500 * n for n in range(100)]
    result, fake = settle(
        falling, Settle(epsilon_mb=64, plateau_polls=3, poll_interval=5, timeout=30)
    )
    assert not result.settled and not result.interrupted
    assert result.waited == 30.0
    assert len(fake.sleeps) == 6
    assert result.baseline_mb == falling[6]


def test_settling_stops_at_once_when_the_sweep_is_stopping() -> None:
    result, fake = settle([1000, 2000, 3000], stopping=lambda: True)
    assert result.interrupted and not result.settled
    assert fake.sleeps == []


# --- reset, settle, cooldown -----------------------------------------------------------------


def runtime(tmp_path: Path, readings: Iterable[float] = (100.0,), **sweep_fields) -> tuple:
    fake = FakeTime()
    sweep = load_sweep(write_sweep(tmp_path, **sweep_fields))
    waits: list[str | None] = []
    rt = QueueRuntime(
        sweep,
        tmp_path / "between-models.log",
        ram_poll=FakeRam(readings),
        sleep=fake.sleep,
        clock=fake.clock,
        on_wait=waits.append,
    )
    return rt, fake, waits


def write_sweep(directory: Path, **fields) -> Path:
    sweep = {
        "cases": ["c01"],
        "models": ["m1"],
        "command": fake_agent_command("pass"),
        "order": "model-major",
        **fields,
    }
    path = directory / "sweep.yaml"
    path.write_text(json.dumps(sweep), encoding="utf-8")
    return path


def test_a_failing_reset_is_logged_and_settle_and_cooldown_still_run(tmp_path: Path) -> None:
    rt, fake, waits = runtime(tmp_path, [500, 500, 500, 500])
    config = BetweenModels(
        reset=SideCommand(tuple(fake_agent_command("print=unloading {model}", "exit=3")), 10),
        settle=Settle(epsilon_mb=10, plateau_polls=2, poll_interval=1, timeout=30),
        cooldown=7.0,
    )
    report = asyncio.run(switch_model(rt, "m1", config))
    assert report.reset is not None and not report.reset.ok
    assert report.problems() == ["reset before m1 failed (exit code 3); continuing"]
    assert report.settle is not None and report.settle.settled
    assert fake.sleeps == [1, 1] + [1.0] * 7  # settle's two polls, then the cooldown
    assert "unloading m1" in (tmp_path / "between-models.log").read_text()
    assert waits[-1] is None and "before m1: reset" in waits


def test_ctrl_c_cuts_a_long_cooldown_short(tmp_path: Path) -> None:
    rt, fake, _ = runtime(tmp_path)
    rt.stopping = lambda: fake.now >= 2  # the user interrupts two seconds in
    report = asyncio.run(switch_model(rt, "m1", BetweenModels(settle=None, cooldown=3600)))
    assert fake.sleeps == [1.0, 1.0]
    assert report.cooldown == 3600


def test_a_missing_reset_command_is_logged_and_the_queue_goes_on(tmp_path: Path) -> None:
    rt, _, _ = runtime(tmp_path)
    config = BetweenModels(reset=SideCommand(("no-such-program-xyz", "unload"), 10), settle=None)
    report = asyncio.run(switch_model(rt, "m1", config))
    assert report.reset is not None and not report.reset.ok
    assert "cannot start 'no-such-program-xyz'" in report.problems()[0]


def test_a_hanging_reset_is_stopped_after_its_timeout(tmp_path: Path) -> None:
    rt, _, _ = runtime(tmp_path, kill_grace="1s")
    config = BetweenModels(
        reset=SideCommand(tuple(fake_agent_command("sleep=30")), 0.3), settle=None
    )
    report = asyncio.run(switch_model(rt, "m1", config))
    assert report.reset is not None and report.reset.reason == "timed out after 0.3s"
    assert report.reset.duration_seconds < 5


def test_a_dirty_baseline_is_reported_but_not_fatal(tmp_path: Path) -> None:
    rt, _, _ = runtime(tmp_path, [9000 - 1000 * n for n in range(9)])
    config = BetweenModels(settle=Settle(epsilon_mb=1, plateau_polls=2, poll_interval=1, timeout=3))
    report = asyncio.run(switch_model(rt, "m1", config))
    assert report.problems() == [
        "RAM did not settle before m1 within 3.0s: dirty baseline (6000 MB used); continuing"
    ]


# --- the sweep keys --------------------------------------------------------------------------


def test_a_model_overrides_single_keys_of_the_sweeps_section(tmp_path: Path) -> None:
    sweep = load_sweep(
        write_sweep(
            tmp_path,
            models=[
                "m1",
                {"id": "m2", "between_models": {"cooldown": "1m", "settle": {"timeout": "5m"}}},
            ],
            between_models={
                "reset": "lms unload --all",
                "settle": {"epsilon_mb": 32},
                "cooldown": 5,
            },
        )
    )
    m1, m2 = between_models_for(sweep, "m1"), between_models_for(sweep, "m2")
    assert m1 == BetweenModels(
        reset=SideCommand(("lms", "unload", "--all"), 120.0),
        settle=Settle(epsilon_mb=32),
        cooldown=5,
    )
    assert m2 == BetweenModels(
        reset=m1.reset, settle=Settle(epsilon_mb=32, timeout=300.0), cooldown=60.0
    )


BROKEN_QUEUE_KEYS = [
    (
        {"order": "interleave", "between_models": {"cooldown": 5}},
        "between_models: needs order: model-major",
    ),
    (
        {"between_models": {"reset": ["lms", "unload", "{case}"]}},
        "between_models.reset[2]: unknown placeholder {case}",
    ),
    (
        {"between_models": {"settle": {"epsilon": 5}}},
        "unknown key 'epsilon' in between_models.settle",
    ),
    ({"between_models": {"settle": {"plateau_polls": 0}}}, "plateau_polls: must be at least 1"),
    ({"between_models": {"reset": ""}}, "between_models.reset: the command is empty"),
    ({"probe": {"timeout": "5s"}}, "probe: missing required key 'command'"),
]


@pytest.mark.parametrize(("fields", "fragment"), BROKEN_QUEUE_KEYS)
def test_broken_queue_keys_are_located_errors(tmp_path: Path, fields: dict, fragment: str) -> None:
    with pytest.raises(SweepError) as info:
        load_sweep(write_sweep(tmp_path, **fields))
    assert fragment in str(info.value)


# --- in the driver ---------------------------------------------------------------------------


def test_model_major_runs_reset_then_every_job_of_one_model_then_the_next(tmp_path: Path) -> None:
    trace = tmp_path / "trace.txt"
    reset = write_job_script(
        tmp_path,
        f"import sys\nopen({str(trace)!r}, 'a').write('reset ' + sys.argv[1] + '\\n')\n",
        name="reset.py",
    )
    path = write_sweep(
        tmp_path,
        cases=["c1", "c2"],
        models=["m1", "m2"],
        command=fake_agent_command(f"count={trace}"),
        max_concurrent=2,
        between_models={
            "reset": [sys.executable, str(reset), "{model}"],
            # Real RAM, but any change counts as quiet: one poll settles.
            "settle": {"epsilon_mb": 1_000_000, "plateau_polls": 1, "poll_interval": "10ms"},
        },
    )
    out = io.StringIO()
    assert run_main(path, RunOptions(progress=False), out=out, err=out) == 0
    lines = [line.split("\t")[:2] for line in trace.read_text().splitlines()]
    # A reset line is "reset MODEL"; a job's is "case<TAB>model<TAB>attempt".
    order = [cols[0] if cols[0].startswith("reset") else cols[1] for cols in lines]
    assert order == ["reset m1", "m1", "m1", "reset m2", "m2", "m2"]
    batch_dir = next((tmp_path / "runs").iterdir())
    events = [json.loads(line) for line in (batch_dir / "batch-logs" / "events.jsonl").open()]
    switches = [e for e in events if e["event"] == "between_models"]
    assert [e["model"] for e in switches] == ["m1", "m2"]
    assert all(e["reset"]["ok"] and e["settle"]["settled"] for e in switches)
