"""Per-model concurrency that follows the provider's rate limit (AIMD, as TCP does).

Opt-in per model (``adaptive: true``). A finish in the rate-limit category
(``api_or_credit``) halves the model's current limit, never below 1; a run of ``K``
finishes that were not rate-limited (passes and model failures; other non-model failures
say nothing about the limit and neither count nor break the run) raises it by one, up to
the model's ``max_concurrent``. ``K`` defaults to the current limit, so the limit grows by
about one per "round" of jobs, as TCP's window grows by one per round trip. Raising it back
to the level it was last halved from takes a run :data:`NEAR_LIMIT_FACTOR` times as long:
the limit lingers just below the level the provider refused and probes it only now and then
(as TCP CUBIC's plateau does), instead of running into the same 429s every few rounds.
docs/policies.md, "Adaptive concurrency".

Pure state: the scheduler asks :meth:`Adaptive.limit` instead of a fixed per-model limit, and
:meth:`Adaptive.record` returns the :class:`Change` to write as an ``concurrency`` event.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

RATE_LIMITED = "api_or_credit"
#: How much longer the run of good finishes must be to raise the limit to the level it was
#: last halved from (or past it).
NEAR_LIMIT_FACTOR = 4


@attrs.frozen
class AimdConfig:
    """One adaptive model: its ceiling, and how many good finishes raise the limit by one."""

    max_concurrent: int
    #: Good finishes in a row that raise the limit by one; None: the current limit.
    raise_after: int | None = None
    #: Where the limit starts; None: at ``max_concurrent`` (TCP would start low, but a
    #: provider that is not limiting should not pay a slow start every invocation).
    initial: int | None = None
    rate_limited: frozenset[str] = frozenset({RATE_LIMITED})

    def __attrs_post_init__(self) -> None:
        if self.max_concurrent < 1:
            raise ValueError("max_concurrent must be at least 1")
        if self.raise_after is not None and self.raise_after < 1:
            raise ValueError("raise_after must be at least 1")
        if self.initial is not None and not 1 <= self.initial <= self.max_concurrent:
            raise ValueError("initial must be between 1 and max_concurrent")


@attrs.frozen
class Change:
    """A model's concurrency moved from ``old`` to ``new``; ``why`` is one line."""

    model: str
    old: int
    new: int
    why: str


@attrs.define
class _ModelLimit:
    current: int
    good_run: int = 0
    #: When the limit was last halved (the caller's clock); None: never.
    halved_at: float | None = None
    #: The level the limit was last halved from; None: never halved.
    refused_level: int | None = None


class Adaptive:
    """The current limit of every adaptive model; other models are not tracked."""

    def __init__(self, configs: Mapping[str, AimdConfig]) -> None:
        self.configs = dict(configs)
        self._limits = {
            model: _ModelLimit(config.initial or config.max_concurrent)
            for model, config in self.configs.items()
        }

    def limit(self, model: str) -> int | None:
        """The model's current limit; None for a model that is not adaptive."""
        state = self._limits.get(model)
        return None if state is None else state.current

    def record(
        self,
        model: str,
        status: str,
        category: str | None,
        *,
        started: float | None = None,
        now: float | None = None,
    ) -> Change | None:
        """One finished attempt of ``model``; the change of its limit, if any.

        ``started`` and ``now`` (one clock) let a burst count once, as TCP halves once per
        window: the rate-limited finish of an attempt that started before the latest halving
        was already answered by it, so it does not halve again.
        """
        config = self.configs.get(model)
        if config is None:
            return None
        state = self._limits[model]
        if status != "passed" and category in config.rate_limited:
            state.good_run = 0
            if started is not None and state.halved_at is not None and started < state.halved_at:
                return None
            if now is not None:
                state.halved_at = now
            state.refused_level = state.current
            return self._move(model, state, max(1, state.current // 2), f"{category}: halved")
        if status not in ("passed", "failed"):
            return None  # another non-model failure says nothing about the rate limit
        state.good_run += 1
        needed = config.raise_after or state.current
        if state.refused_level is not None and state.current + 1 >= state.refused_level:
            needed *= NEAR_LIMIT_FACTOR
        if state.good_run < needed or state.current >= config.max_concurrent:
            return None
        state.good_run = 0
        finishes = "finish" if needed == 1 else "finishes"
        return self._move(model, state, state.current + 1, f"{needed} {finishes} not rate-limited")

    @staticmethod
    def _move(model: str, state: _ModelLimit, new: int, why: str) -> Change | None:
        old, state.current = state.current, new
        return None if new == old else Change(model, old, new, why)
