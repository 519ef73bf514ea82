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
from typing import Any

import attrs

from batch.sweep.nodes import Node, as_integer, as_positive_duration, is_number, mapping_keys


@attrs.frozen
class Settle:
    epsilon_mb: float = 64.0
    plateau_polls: int = 3
    poll_interval: float = 2.0
    timeout: float = 120.0


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


# --- the sweep key ---------------------------------------------------------------------------


def _epsilon(node: Node) -> float:
    if not is_number(node.value) or node.value <= 0:
        raise node.type_error("a number of MB above 0")
    return float(node.value)


_SETTLE_KEYS: dict[str, Callable[[Node], Any]] = {
    "epsilon_mb": _epsilon,
    "plateau_polls": as_integer(1),
    "poll_interval": as_positive_duration,
    "timeout": as_positive_duration,
}


def settle_fields(node: Node) -> dict[str, Any]:
    """The keys given in a ``settle`` mapping, converted (the rest keep their defaults)."""
    keys = mapping_keys(node, list(_SETTLE_KEYS))
    return {name: _SETTLE_KEYS[name](value) for name, value in keys.items()}
