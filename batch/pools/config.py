"""A pool's declared limits (``pools: {NAME: {max_concurrent, rate, adaptive}}``), and which
of several declarations holds.

Pure data: the sweep file's converter (``batch.sweep.features.pools``) makes one, the
drivers put their own in the pool's state, and :func:`strictest` says what holds while they
share it: a key's limit is protected by the lowest limit anyone declared for it, so a sweep
that declares more than a colleague's cannot overfill the key they share.
docs/policies.md, "Pools".
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import attrs


@attrs.frozen
class PoolConfig:
    """One declaration of a pool: ``None`` for a limit it does not set."""

    #: Jobs of every sweep in the pool at once; None: no limit but the sweeps' own.
    max_concurrent: int | None = None
    #: Starts a second, below one allowed (0.5: one start every 2 s); None: no rate.
    rate: float | None = None
    #: Lower the limits on a rate-limited finish any sweep sees, raise them together.
    adaptive: bool = False

    def __attrs_post_init__(self) -> None:
        if self.max_concurrent is not None and self.max_concurrent < 1:
            raise ValueError("max_concurrent must be at least 1")
        if self.rate is not None and not (math.isfinite(self.rate) and self.rate > 0):
            raise ValueError("rate must be a positive, finite number of starts a second")


def strictest(configs: Iterable[PoolConfig]) -> PoolConfig:
    """The limits that hold for several declarations: the lowest of each, and adaptive when
    any asks for it (adapting only ever lowers what the key is sent)."""
    concurrent: int | None = None
    rate: float | None = None
    adaptive = False
    for config in configs:
        if config.max_concurrent is not None:
            concurrent = min(concurrent or config.max_concurrent, config.max_concurrent)
        if config.rate is not None:
            rate = min(rate or config.rate, config.rate)
        adaptive = adaptive or config.adaptive
    return PoolConfig(max_concurrent=concurrent, rate=rate, adaptive=adaptive)


def format_rate(rate: float | None) -> str:
    """``6/s``, ``0.5/s``; ``no rate`` for None."""
    return "no rate" if rate is None else f"{rate:.3g}/s"


def describe(config: PoolConfig) -> str:
    """``max_concurrent 8, rate 6/s, adaptive``: one declaration in words."""
    concurrent = (
        "no max_concurrent"
        if config.max_concurrent is None
        else (f"max_concurrent {config.max_concurrent}")
    )
    adaptive = ", adaptive" if config.adaptive else ""
    return f"{concurrent}, {'rate ' if config.rate is not None else ''}" + (
        f"{format_rate(config.rate)}{adaptive}"
    )
