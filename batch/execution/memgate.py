"""The memory gate: no job starts while the machine has less memory available than ``memfree``.

``memfree: 4GiB`` in a sweep makes the scheduler ask :class:`MemoryGate` before every start;
the gate polls available memory (psutil's ``available``: what can be given to a new process
without swapping) until there is enough, telling the display why nothing starts meanwhile.
A sweep without ``memfree`` has no gate and pays nothing. Sizes are parsed by
:func:`parse_size` (``4GiB``, ``512MB``, ``2G``, plain bytes); memory, sleep and the stop
check are injected, so tests drive the gate without a machine's memory or real waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from batch.sweep.sizes import format_size

#: Bytes per unit. ``KB``/``MB``/... are decimal as on a disk label; ``KiB``/``K`` binary,
#: as ``free -h``, Docker's ``-m 4g`` and most RAM figures people read.
POLL_INTERVAL = 1.0


def available_memory() -> int:
    """Bytes available to new processes without swapping (Linux: ``MemAvailable``)."""
    import psutil

    return int(psutil.virtual_memory().available)


def total_memory() -> int:
    import psutil

    return int(psutil.virtual_memory().total)


def waiting_reason(available: int, needed: int, total: int | None = None) -> str | None:
    """Why no job may start, or None when ``available`` is enough (pure)."""
    if available >= needed:
        return None
    reason = f"memory: {format_size(available)} available, memfree needs {format_size(needed)}"
    if total is not None and needed > total:
        reason += f" (more than this machine's {format_size(total)})"
    return reason


class MemoryGate:
    """The scheduler's ``start_gate`` for ``memfree``: returns once enough memory is free.

    ``on_wait(reason)`` is told why nothing starts (repeatedly while it lasts, so a live
    display can show the figure move) and ``on_wait(None)`` once the gate opens. The gate
    also returns when ``stopping()`` turns true, so Ctrl-C is never held up by it.
    """

    def __init__(
        self,
        needed: int,
        *,
        on_wait: Callable[[str | None], None],
        stopping: Callable[[], bool] = lambda: False,
        available: Callable[[], int] = available_memory,
        total: Callable[[], int] | None = total_memory,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        poll_interval: float = POLL_INTERVAL,
    ) -> None:
        self.needed = needed
        self._on_wait = on_wait
        self._stopping = stopping
        self._available = available
        self._total = total
        self._sleep = sleep
        self._poll_interval = poll_interval

    async def __call__(self) -> None:
        waited = False
        total: int | None = None
        while not self._stopping():
            available = self._available()
            if available >= self.needed:
                break
            if not waited:
                waited = True
                # The machine's total does not change while it waits: asked once per wait.
                total = self._total() if self._total is not None else None
            self._on_wait(waiting_reason(available, self.needed, total))
            await self._sleep(self._poll_interval)
        if waited:
            self._on_wait(None)
