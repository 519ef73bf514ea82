"""The file worker runs calls off the event loop and hands their outcomes back in batches."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from batch.attempt.file_worker import FileWorker


def test_a_call_runs_in_another_thread_and_returns_its_result() -> None:
    worker = FileWorker(threads=2)

    async def main() -> tuple[int, int]:
        return await worker.call(lambda a, b: (a + b, threading.get_ident()), 2, 3)

    total, thread = asyncio.run(main())
    assert total == 5
    assert thread != threading.get_ident()


def test_a_calls_exception_is_raised_to_its_caller_alone(tmp_path: Path) -> None:
    worker = FileWorker(threads=2)

    def fail() -> None:
        raise FileNotFoundError(2, "No such file or directory", str(tmp_path / "gone"))

    async def main() -> list[object]:
        return await asyncio.gather(
            worker.call(fail), worker.call(str.upper, "ok"), return_exceptions=True
        )

    failed, ok = asyncio.run(main())
    assert isinstance(failed, FileNotFoundError)
    assert failed.filename == str(tmp_path / "gone")
    assert ok == "OK"


class _Counting(FileWorker):
    """Counts the outcomes each hand-back to the event loop carries."""

    def __init__(self, threads: int) -> None:
        super().__init__(threads)
        self.handed_back: list[int] = []

    def _settle(self, loop: asyncio.AbstractEventLoop) -> None:
        self.handed_back.append(len(self._done.get(loop, [])))
        super()._settle(loop)


def test_results_finishing_while_the_loop_is_busy_come_back_in_one_callback() -> None:
    worker = _Counting(threads=4)
    finished = threading.Semaphore(0)

    def job(n: int) -> int:
        finished.release()
        return n

    async def main() -> list[int]:
        calls = [asyncio.ensure_future(worker.call(job, n)) for n in range(8)]
        await asyncio.sleep(0)  # the calls are queued
        # The loop is held here: every call finishes meanwhile.
        for _ in range(8):
            assert finished.acquire(timeout=5)
        time.sleep(0.2)  # the last one's outcome is queued for the loop too
        return list(await asyncio.gather(*calls))

    assert asyncio.run(main()) == list(range(8))
    assert worker.handed_back == [8]


def test_the_worker_serves_one_event_loop_after_another() -> None:
    worker = FileWorker(threads=1)

    async def main(n: int) -> int:
        return await worker.call(int, str(n))

    assert [asyncio.run(main(n)) for n in range(3)] == [0, 1, 2]


def test_a_cancelled_caller_leaves_the_other_calls_alone() -> None:
    worker = FileWorker(threads=1)
    gate = threading.Event()

    async def main() -> str:
        slow = asyncio.ensure_future(worker.call(gate.wait, 5))
        after = asyncio.ensure_future(worker.call(str, "after"))
        await asyncio.sleep(0)
        slow.cancel()
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await slow
        return await after

    assert asyncio.run(main()) == "after"
