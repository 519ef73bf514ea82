"""A resume writes the ledger index it read after its first jobs started, not before."""

from __future__ import annotations

import asyncio
import time

import pytest

from batch.commands import run
from batch.errors import ExitStatus


class Sweep:
    """Stands in for an Execution: notes when the index was written against its own run."""

    def __init__(self, seconds: float, fail: bool = False) -> None:
        self.seconds, self.fail = seconds, fail
        self.events: list[str] = []

    async def run(self) -> ExitStatus:
        self.events.append("started")
        await asyncio.sleep(self.seconds)
        self.events.append("ended")
        if self.fail:
            raise RuntimeError("lost")
        return ExitStatus.OK

    def save_index(self) -> None:
        self.events.append("index")


def test_the_index_is_written_while_the_sweep_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run, "INDEX_AFTER", 0.05)
    sweep = Sweep(0.5)
    started = time.monotonic()
    assert asyncio.run(run._executed(sweep, sweep.save_index)) == ExitStatus.OK  # type: ignore[arg-type]
    assert sweep.events == ["started", "index", "ended"]
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("fail", [False, True])
def test_a_sweep_that_ends_first_writes_the_index_once_at_its_end(
    monkeypatch: pytest.MonkeyPatch, fail: bool
) -> None:
    monkeypatch.setattr(run, "INDEX_AFTER", 60.0)
    sweep = Sweep(0.0, fail=fail)
    if fail:
        with pytest.raises(RuntimeError):
            asyncio.run(run._executed(sweep, sweep.save_index))  # type: ignore[arg-type]
    else:
        asyncio.run(run._executed(sweep, sweep.save_index))  # type: ignore[arg-type]
    assert sweep.events == ["started", "ended", "index"]
