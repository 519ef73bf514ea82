"""Start jobs in order within the limits; knows nothing of processes, files or output.

Limits: ``max_concurrent`` jobs at once overall, a per-model ``max_concurrent``, and a
minimum ``stagger`` between two starts. A job whose model is at its limit does not hold up
the jobs of other models behind it. Jobs come in blocks: a block starts only when the one
before it has finished (``order: model-major`` runs one block per model; ``interleave`` is
one block). ``run_job`` returns a retry delay in seconds, or ``None`` when the job is done;
a job waiting out its retry delay holds no slot. Clock and sleep are injected, so tests
drive time instead of waiting for it.

A ``gate`` (:mod:`batch.execution.gate`) has the last word on a job whose turn it is: start
it, skip it (``on_skip``), or wait. A model whose next job waits holds up no other model;
the run ends when nothing runs and every job left waits with nothing to wake it (each is
then skipped with its wait's reason).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence

from batch.execution.gate import Gate, GateDecision, OnSkip
from batch.plan.jobs import Job

RunJob = Callable[[Job], Awaitable[float | None]]
Hook = Callable[[Sequence[Job]], Awaitable[None]]


class Scheduler:
    def __init__(
        self,
        *,
        max_concurrent: int,
        model_limits: Mapping[str, int | None] | None = None,
        stagger: float = 0.0,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        start_gate: Callable[[], Awaitable[None]] | None = None,
        gate: Gate | None = None,
        on_skip: OnSkip | None = None,
    ) -> None:
        self.max_concurrent = max_concurrent
        self.model_limits = dict(model_limits or {})
        self.stagger = stagger
        self._clock = clock
        self._sleep = sleep
        self._start_gate = start_gate
        self._gate = gate
        self._on_skip = on_skip
        #: The models whose next job waits, and why (asked again on every wake).
        self._waiting: dict[str, GateDecision] = {}
        #: Wakes the loop at the earliest ``until`` of a waiting job: (when, timer).
        self._gate_timer: tuple[float, asyncio.Task[None]] | None = None
        self.running: dict[tuple[str, str, int], asyncio.Task[None]] = {}
        self._per_model: dict[str, int] = {}
        self._queues: dict[str, deque[tuple[int, Job]]] = {}
        self._timers: set[asyncio.Task[None]] = set()
        self._waits: set[asyncio.Future[None]] = set()
        self._wake = asyncio.Event()
        self._last_start: float | None = None
        self._error: BaseException | None = None
        self.stopping = False

    def stop(self) -> None:
        """Start nothing new; jobs already running finish."""
        self.stopping = True
        for waiter in (*self._timers, *self._waits):
            waiter.cancel()
        if self._gate_timer is not None:
            self._gate_timer[1].cancel()
        self._wake.set()

    def skip_queued(self, model: str, reason: str) -> int:
        """Skip every queued job of ``model`` now (``on_skip``), rather than as each one's
        turn comes: how many. A job waiting out a retry delay is skipped when it is back."""
        queue = self._queues.get(model)
        skipped = 0
        while queue:
            self._skip(queue.popleft()[1], reason)
            skipped += 1
        self._wake.set()
        return skipped

    def wake(self) -> None:
        """Ask the gate again now: a control changed its answer, or a limit changed."""
        self._wake.set()

    async def run(
        self, blocks: Sequence[Sequence[Job]], run_job: RunJob, before_block: Hook | None = None
    ) -> None:
        try:
            for block in blocks:
                if self.stopping:
                    break
                if not block:
                    continue
                if before_block is not None:
                    await before_block(block)
                await self._run_block(block, run_job)
        finally:
            if self.running:
                await asyncio.gather(*self.running.values(), return_exceptions=True)
            if self._gate_timer is not None:
                self._gate_timer[1].cancel()
        if self._error is not None:
            raise self._error

    def _has_capacity(self, model: str) -> bool:
        limit = self.model_limits.get(model)
        return limit is None or self._per_model.get(model, 0) < limit

    def _pick(self) -> tuple[int, Job] | None:
        """The earliest queued job whose model has a free slot and that the gate lets start,
        with its order; jobs the gate skips on the way are handed to ``on_skip``."""
        self._waiting = {}
        while True:
            best: tuple[int, Job] | None = None
            for model, queue in self._queues.items():
                if (
                    queue
                    and model not in self._waiting
                    and self._has_capacity(model)
                    and (best is None or queue[0][0] < best[0])
                ):
                    best = queue[0]
            if best is None:
                return None
            job = best[1]
            decision = GateDecision.start() if self._gate is None else self._gate(job)
            if decision.action == "wait":
                self._waiting[job.model] = decision
                if decision.until is not None:
                    self._wake_at(decision.until)
                continue
            self._queues[job.model].popleft()
            if decision.action == "start":
                return best
            self._skip(job, decision.reason)

    def _skip(self, job: Job, reason: str) -> None:
        if self._on_skip is not None:
            self._on_skip(job, reason)

    def _wake_at(self, when: float) -> None:
        """Ask the gate again at ``when``: one timer, for the earliest time asked for."""
        if self._gate_timer is not None:
            if self._gate_timer[0] <= when and not self._gate_timer[1].done():
                return
            self._gate_timer[1].cancel()
        self._gate_timer = (when, asyncio.create_task(self._wake_after(when)))

    async def _wake_after(self, when: float) -> None:
        await self._sleep(max(0.0, when - self._clock()))
        self._wake.set()

    def _gate_timer_pending(self) -> bool:
        return self._gate_timer is not None and not self._gate_timer[1].done()

    def _skip_waiting(self) -> None:
        """Nothing runs and nothing will wake a waiting job: skip every job left, each with
        the reason its model's next job waited for."""
        for model, queue in self._queues.items():
            waited = self._waiting.get(model)
            reason = waited.reason if waited is not None and waited.reason else "not started"
            while queue:
                self._skip(queue.popleft()[1], reason)

    def _enqueue(self, order: int, job: Job) -> None:
        queue = self._queues.setdefault(job.model, deque())
        # Retries come back with their original order; keep each queue sorted.
        if queue and queue[-1][0] > order:
            items = sorted([*queue, (order, job)], key=lambda item: item[0])
            queue.clear()
            queue.extend(items)
        else:
            queue.append((order, job))

    async def _run_block(self, block: Sequence[Job], run_job: RunJob) -> None:
        self._queues = {}
        # A job's order travels with it (its queue item, its task, its retry's timer): no
        # map of the block's every job, which lived as long as the block (the whole sweep).
        for order, queued in enumerate(block):
            self._enqueue(order, queued)
        while not self.stopping:
            while len(self.running) < self.max_concurrent and not self.stopping:
                picked = self._pick()
                if picked is None:
                    break
                order, job = picked
                await self._wait_to_start()
                if self.stopping:
                    self._enqueue(order, job)
                    break
                self._start(job, order, run_job)
            idle = not self.running and not self._timers
            if idle and not any(self._queues.values()):
                break
            if idle and not self._gate_timer_pending():
                self._skip_waiting()
                break
            await self._wake.wait()
            self._wake.clear()

    async def _wait_to_start(self) -> None:
        if self._start_gate is not None:
            await self._unless_stopped(self._start_gate())
        if self.stagger > 0 and self._last_start is not None and not self.stopping:
            delay = self._last_start + self.stagger - self._clock()
            if delay > 0:
                await self._unless_stopped(self._sleep(delay))
        self._last_start = self._clock()

    async def _unless_stopped(self, wait: Awaitable[None]) -> None:
        """Await ``wait``, cut short by :meth:`stop`: an interrupt must not sit out a long
        stagger or a wait for free memory before the sweep can end."""
        waiter = asyncio.ensure_future(wait)
        self._waits.add(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            current = asyncio.current_task()
            # Only stop() is swallowed here; a cancellation of the scheduler itself goes on.
            if not self.stopping or (current is not None and current.cancelling()):
                raise
        finally:
            self._waits.discard(waiter)

    def _start(self, job: Job, order: int, run_job: RunJob) -> None:
        self._per_model[job.model] = self._per_model.get(job.model, 0) + 1
        task = asyncio.create_task(self._run_one(job, order, run_job))
        self.running[job.key] = task

    async def _run_one(self, job: Job, order: int, run_job: RunJob) -> None:
        retry_in: float | None = None
        try:
            retry_in = await run_job(job)
        except BaseException as exc:
            if self._error is None:
                self._error = exc
            self.stopping = True
        finally:
            del self.running[job.key]
            self._per_model[job.model] -= 1
            if retry_in is not None and not self.stopping:
                timer = asyncio.create_task(self._requeue_after(job, order, retry_in))
                self._timers.add(timer)
                timer.add_done_callback(self._timers.discard)
            self._wake.set()

    async def _requeue_after(self, job: Job, order: int, delay: float) -> None:
        await self._sleep(delay)
        self._enqueue(order, job)
        # Gone from the timers before the loop wakes (the done callback runs only after
        # it): the gate may skip the job, and a stale timer would keep the loop waiting.
        current = asyncio.current_task()
        if current is not None:
            self._timers.discard(current)
        self._wake.set()

    def queued(self) -> list[Job]:
        """Jobs that were never started (or wait for a retry) in this block."""
        return [job for queue in self._queues.values() for _, job in queue]
