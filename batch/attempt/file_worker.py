"""File work off the event loop, handed over and back in batches.

``asyncio.to_thread`` per record cost the driver's event-loop thread a thread wake-up going
out, a callback chain coming back and a wake-up of the loop (bench/overhead.py), for
every job. :class:`FileWorker` keeps a few long-lived threads on one queue (a call queued
while they are busy wakes nobody), and the results that finish while the event loop is busy
go back to it together, in one callback. A call's result (or exception) is its caller's
alone.

Nothing here weakens what a call promises: ``await worker.call(write_run_meta, ...)``
returns once ``write_run_meta`` has returned, its fsyncs done, exactly as ``to_thread``.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: Threads at most, as many as asyncio's default executor had (their fsyncs overlap); one
#: is started only when a call finds none free, so a sweep of 4 jobs at once has about 4.
THREADS = min(32, (os.cpu_count() or 1) + 4)

_Call = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[..., Any], tuple[Any, ...]]
_Outcome = tuple["asyncio.Future[Any]", Any, BaseException | None]


class FileWorker:
    def __init__(self, threads: int = THREADS) -> None:
        self._queue: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        self._size = threads
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._lock = threading.Lock()
        #: Per event loop, results not yet handed back: one callback takes them all.
        self._done: dict[asyncio.AbstractEventLoop, list[_Outcome]] = {}

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in one of the worker's threads; its result or its exception."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put((loop, future, fn, args))
        if self._idle == 0 and len(self._threads) < self._size:
            self._start_thread()
        return await future

    def _start_thread(self) -> None:
        with self._lock:
            if len(self._threads) >= self._size:
                return
            # Daemon: an idle worker must not keep the process alive; a call in progress is
            # always awaited by its caller before the driver ends.
            thread = threading.Thread(
                target=self._serve, name=f"batch-files-{len(self._threads)}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _serve(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            # One call at a time per thread: the calls' fsyncs overlap across threads.
            loop, future, fn, args = self._queue.get()
            with self._lock:
                self._idle -= 1
            try:
                outcome: _Outcome = (future, fn(*args), None)
            except BaseException as exc:  # handed to the caller, as to_thread would
                outcome = (future, None, exc)
            with self._lock:
                waiting = self._done.setdefault(loop, [])
                waiting.append(outcome)
                first = len(waiting) == 1
            if first:  # later results join this one's callback until it has run
                try:
                    loop.call_soon_threadsafe(self._settle, loop)
                except RuntimeError:
                    with self._lock:  # that loop is closed: nobody waits for these
                        self._done.pop(loop, None)

    def _settle(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            outcomes = self._done.pop(loop, [])
        for future, result, error in outcomes:
            if future.cancelled():
                continue
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)


#: The process's worker: its threads serve every event loop.
FILES = FileWorker()
