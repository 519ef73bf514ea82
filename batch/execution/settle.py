"""Waiting for RAM to settle: used memory polled until it stops moving, or a timeout.

Between two models of an overnight queue (``batch.execution.model_switch``) and in
``batch check``, the previous model's memory may still be on its way out.
:func:`wait_until_settled` polls used RAM until it plateaus — ``plateau_polls`` polls in a
row each within ``epsilon_mb`` of the one before, ``poll_interval`` apart — or ``timeout``
passes (a dirty baseline: the caller warns and goes on). RAM poll, sleep and clock are
passed in, so tests never sleep.
:func:`settle_fields` reads the ``settle`` mapping of a ``between_models`` sweep key.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs

from batch.sweep.features.between_models import Settle


@attrs.frozen
class SettleResult:
    settled: bool
    #: Used RAM in MB at each poll, first to last.
    readings_mb: tuple[float, ...]
    waited: float
    interrupted: bool = False

    @property
    def baseline_mb(self) -> float:
        return self.readings_mb[-1]


def used_ram_mb() -> float:
    """Used RAM in MB (2**20 bytes), as psutil counts it."""
    import psutil

    return psutil.virtual_memory().used / 2**20


async def wait_until_settled(
    ram_poll: Callable[[], float],
    sleep: Callable[[float], Awaitable[None]],
    clock: Callable[[], float],
    *,
    settle: Settle,
    stopping: Callable[[], bool] = lambda: False,
) -> SettleResult:
    """Poll used RAM until it plateaus or ``settle.timeout`` passes (then ``settled`` False).

    A plateau is ``plateau_polls`` consecutive polls each within ``epsilon_mb`` of the one
    before. The wait may overrun the timeout by at most one ``poll_interval``. Returns early,
    ``interrupted``, once ``stopping()`` is true.
    """
    start = clock()
    readings = [ram_poll()]
    streak = 0
    while streak < settle.plateau_polls:
        if stopping() or clock() - start >= settle.timeout:
            return SettleResult(False, tuple(readings), clock() - start, interrupted=stopping())
        await sleep(settle.poll_interval)
        readings.append(ram_poll())
        streak = streak + 1 if abs(readings[-1] - readings[-2]) < settle.epsilon_mb else 0
    return SettleResult(True, tuple(readings), clock() - start)
