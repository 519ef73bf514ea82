"""A per-model circuit breaker: stop starting a model's jobs while its provider is down.

N consecutive non-model failures of one model (categories ``api_or_credit`` and
``infra_failure`` by default) open its breaker: none of its jobs start, every other model
goes on. A pass or a model failure resets the count; a non-model failure of a category the
breaker does not count neither counts nor resets it. With a ``cooldown`` the breaker
half-opens once the cooldown has passed: exactly one job may try; a pass or a model failure
closes the breaker, another counted failure opens it again for a new cooldown. Without a
cooldown it stays open for the invocation (``--resume`` runs the jobs it skipped).
docs/policies.md, "Per-model circuit breaker".

Pure state, no clock of its own: every call takes ``now`` (the driver's monotonic clock),
and :meth:`Breakers.record` returns the transition so the driver can write the event and
the display line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import attrs

BreakerState = Literal["closed", "open", "half_open"]

DEFAULT_THRESHOLD = 5
DEFAULT_CATEGORIES: frozenset[str] = frozenset({"api_or_credit", "infra_failure"})


@attrs.frozen
class BreakerConfig:
    """One model's breaker: ``threshold`` consecutive counted failures open it."""

    threshold: int = DEFAULT_THRESHOLD
    categories: frozenset[str] = DEFAULT_CATEGORIES
    #: Seconds open before one job may try again; None: open for the rest of the invocation.
    cooldown: float | None = None
    enabled: bool = True


@attrs.frozen
class Transition:
    """A change of one model's breaker, for ``events.jsonl`` (event ``breaker``)."""

    model: str
    old: BreakerState
    new: BreakerState
    #: One line: why (``5 consecutive api_or_credit``, ``half-open try passed``).
    reason: str


@attrs.define
class _ModelBreaker:
    state: BreakerState = "closed"
    #: Consecutive counted failures, and the category of the latest.
    run: int = 0
    categories: set[str] = attrs.Factory(set)
    opened_at: float = 0.0
    #: Half-open: the number of the one trial job while it runs (0: none runs). A trial
    #: still running when the breaker closes or opens again is just a late job: its finish
    #: must not end a later half-open period's trial.
    trial: int = 0
    trials: int = 0


class Breakers:
    """Every model's breaker; models without a config use ``default``."""

    def __init__(
        self,
        default: BreakerConfig = BreakerConfig(),
        per_model: Mapping[str, BreakerConfig] | None = None,
    ) -> None:
        self.default = default
        self.per_model = dict(per_model or {})
        self._models: dict[str, _ModelBreaker] = {}

    def config(self, model: str) -> BreakerConfig:
        return self.per_model.get(model, self.default)

    def _get(self, model: str) -> _ModelBreaker:
        return self._models.setdefault(model, _ModelBreaker())

    def state(self, model: str, now: float) -> BreakerState:
        """The state at ``now``: an open breaker whose cooldown has passed is half-open."""
        breaker = self._get(model)
        cooldown = self.config(model).cooldown
        if breaker.state == "open" and cooldown is not None and now >= breaker.opened_at + cooldown:
            return "half_open"
        return breaker.state

    def half_opens_at(self, model: str) -> float | None:
        """When an open breaker lets one job try (the caller's clock); None when it is not
        open or has no cooldown, so a driver knows whether waiting can help."""
        breaker = self._get(model)
        cooldown = self.config(model).cooldown
        if breaker.state != "open" or cooldown is None:
            return None
        return breaker.opened_at + cooldown

    def may_start(self, model: str, now: float) -> bool:
        """Whether a job of ``model`` may start at ``now`` (asking claims nothing)."""
        state = self.state(model, now)
        if state == "closed":
            return True
        return state == "half_open" and self._get(model).trial == 0

    def started(self, model: str, now: float) -> Transition | None:
        """A job of ``model`` started: while half-open it is the one trial job.

        Call it right after :meth:`may_start` said yes; the half-open transition it returns
        (once per cooldown) is worth an event.
        """
        if self.state(model, now) != "half_open":
            return None
        breaker = self._get(model)
        assert breaker.trial == 0, "a second job started while half-open"
        old = breaker.state
        breaker.trials += 1
        breaker.state, breaker.trial = "half_open", breaker.trials
        if old == "half_open":
            return None
        return Transition(model, old, "half_open", "cooldown passed: one job tries")

    def trial(self, model: str) -> int:
        """The number of ``model``'s running half-open trial (0: none), to hand back to
        :meth:`record` when that job finishes."""
        return self._get(model).trial

    def record(
        self, model: str, status: str, category: str | None, now: float, *, trial: int = 0
    ) -> Transition | None:
        """A job of ``model`` finished; the transition, if its breaker changed state.

        ``trial``: the job's trial number (:meth:`trial` right after :meth:`started`), 0 for
        a job started while closed. A job that started before the breaker opened and
        finishes late is evidence too: a counted failure restarts the cooldown, a pass or
        model failure closes the breaker. So is a trial of an earlier half-open period.
        """
        config = self.config(model)
        if not config.enabled:
            return None
        breaker = self._get(model)
        is_trial = trial != 0 and trial == breaker.trial
        if is_trial:
            breaker.trial = 0
        counted = status != "passed" and category in config.categories
        if not counted and status == "error":
            # Another non-model failure (task_data) says nothing about the provider; a trial
            # that ended so leaves the breaker as it was before the trial: another job tries.
            if is_trial and breaker.state == "half_open":
                breaker.state = "open"
            return None
        if not counted:
            breaker.run = 0
            breaker.categories.clear()
            if breaker.state == "closed":
                return None
            old = breaker.state
            breaker.state, breaker.trial = "closed", 0
            return Transition(model, old, "closed", f"a job {status}: the model answers again")
        breaker.run += 1
        breaker.categories.add(str(category))
        reopen = is_trial and breaker.state == "half_open"
        if reopen or (breaker.state == "closed" and breaker.run >= config.threshold):
            before = breaker.state
            breaker.state, breaker.opened_at, breaker.trial = "open", now, 0
            return Transition(model, before, "open", self._cause(breaker))
        if breaker.state == "open":
            # The provider is still down: the cooldown counts from the latest evidence.
            breaker.opened_at = now
        return None

    def skip_reason(self, model: str) -> str:
        """Why a job of ``model`` is not started (``breaker open: 5 consecutive api_or_credit``)."""
        return f"breaker open: {self._cause(self._get(model))}"

    @staticmethod
    def _cause(breaker: _ModelBreaker) -> str:
        return f"{breaker.run} consecutive {' or '.join(sorted(breaker.categories))}"
