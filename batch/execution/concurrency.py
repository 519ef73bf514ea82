"""Adaptive concurrency at work: AIMD limits applied to the scheduler, shown and logged.

The decision is :class:`batch.policies.aimd.Adaptive` (pure); this module builds it from the
sweep, writes each new limit into the scheduler's per-model limits (read on every start, so
a change takes effect at the next start; running jobs are never stopped), tells the display
and writes a ``concurrency`` event. docs/policies.md, "Adaptive concurrency".
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

import attrs

from batch.display.plain import Display
from batch.policies.aimd import Adaptive, AimdConfig
from batch.sweep.load import Sweep


def aimd_configs(sweep: Sweep) -> dict[str, AimdConfig]:
    """Every adaptive model's config. Its ceiling is its ``max_concurrent`` within the sweep's
    (``-j`` included): halving a limit the total never lets it reach would change nothing."""
    configs = {}
    for model in sweep.models:
        config = model.aimd(sweep.max_concurrent)
        if config is None:
            continue
        ceiling = min(config.max_concurrent, sweep.max_concurrent)
        initial = None if config.initial is None else min(config.initial, ceiling)
        configs[model.id] = attrs.evolve(config, max_concurrent=ceiling, initial=initial)
    return configs


class AdaptiveLimits:
    """The adaptive models' current limits, kept in ``limits`` (the scheduler's own dict)."""

    def __init__(
        self,
        sweep: Sweep,
        limits: MutableMapping[str, int | None],
        display: Display,
        emit: Callable[..., Any],
    ) -> None:
        self.adaptive = Adaptive(aimd_configs(sweep))
        self._limits = limits
        self._display = display
        self._emit = emit
        for model in self.adaptive.configs:
            limits[model] = self.adaptive.limit(model)

    def begin(self) -> None:
        """Show every adaptive model's starting limit."""
        for model, config in self.adaptive.configs.items():
            current = self.adaptive.limit(model)
            assert current is not None
            self._display.model_limit(model, current, config.max_concurrent)

    def record(
        self, model: str, status: str, category: str | None, *, started: float, now: float
    ) -> None:
        """One finished attempt of ``model`` (started and finished on the driver's clock)."""
        change = self.adaptive.record(model, status, category, started=started, now=now)
        if change is None:
            return
        ceiling = self.adaptive.configs[model].max_concurrent
        self._limits[model] = change.new
        self._display.model_limit(model, change.new, ceiling)
        self._emit(
            "concurrency",
            model=model,
            current=change.new,
            max=ceiling,
            old=change.old,
            reason=change.why,
        )
