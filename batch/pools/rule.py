"""The pool's adaptive rule: a rate-limited finish any member sees lowers the pool's limits
for all of them; a run of good finishes raises them, together. Pure.

As the per-model rule (:mod:`batch.policies.aimd`), additive increase and multiplicative
decrease, but over the pool's two limits: the concurrency halves (never below 1) and the
rate of starts falls to :data:`RATE_DECREASE` of itself. A pool with no rate gets one at the
first refusal: that fraction of the rate it was starting jobs at, so three drivers that
overfill a key at one job each are slowed below one job at a time. A raise adds one job to
the concurrency and a tenth of the pool's first rate to the rate, up to what is declared;
near the level last refused it takes :data:`NEAR_LIMIT_FACTOR` times as long a run.
docs/policies.md, "Pools".
"""

from __future__ import annotations

from batch.policies.aimd import NEAR_LIMIT_FACTOR
from batch.pools.bucket import recent_rate
from batch.pools.state import Change, PoolState

#: What a refusal leaves of the rate (as TCP CUBIC's beta).
RATE_DECREASE = 0.7
#: The lowest rate the rule goes to: one start a minute.
MIN_RATE = 1 / 60
#: Seconds of starts the rate the pool ran at is taken over.
RATE_WINDOW = 5.0


def lowered(state: PoolState, started: float, now: float, by: str) -> Change | None:
    """A rate-limited finish of an attempt started at ``started``: lower the limits, unless
    the attempt started before the latest lowering (which already answered its burst)."""
    state.good_run = 0
    if not state.config.adaptive:
        return None
    if state.lowered_at is not None and started < state.lowered_at:
        return None
    state.lowered_at = now
    concurrency = state.concurrency if state.concurrency is not None else state.running() + 1
    state.refused_concurrency = concurrency
    rate = state.rate
    if rate is None:
        rate = recent_rate(state.recent_starts, now, RATE_WINDOW)
    new_rate = None if rate is None else max(MIN_RATE, rate * RATE_DECREASE)
    if state.rate_step is None and new_rate is not None:
        state.rate_step = (state.config.rate or new_rate) / 10
    state.refused_rate = rate
    return move(state, max(1, concurrency // 2), new_rate, "rate-limited: lowered", by)


def raised(state: PoolState, by: str) -> Change | None:
    """A finish that was not rate-limited (a pass or a model failure): one more in the run
    of good finishes; at the end of the run, raise both limits by a step."""
    if not state.config.adaptive:
        return None
    state.good_run += 1
    concurrency, rate = state.concurrency, state.rate
    new_concurrency = _raise_concurrency(state)
    new_rate = _raise_rate(state)
    if new_concurrency == concurrency and new_rate == rate:
        return None
    needed = max(1, concurrency or 1)
    near = (
        state.refused_concurrency is not None
        and concurrency is not None
        and concurrency + 1 >= state.refused_concurrency
    ) or (
        state.refused_rate is not None and new_rate is not None and new_rate >= state.refused_rate
    )
    if near:
        needed *= NEAR_LIMIT_FACTOR
    if state.good_run < needed:
        return None
    state.good_run = 0
    finishes = "finish" if needed == 1 else "finishes"
    return move(state, new_concurrency, new_rate, f"{needed} {finishes} not rate-limited", by)


def _raise_concurrency(state: PoolState) -> int | None:
    if state.concurrency is None:
        return None
    ceiling = state.config.max_concurrent
    if ceiling is not None and state.concurrency >= ceiling:
        return state.concurrency
    if ceiling is None and state.refused_concurrency is None:
        return state.concurrency
    return state.concurrency + 1


def _raise_rate(state: PoolState) -> float | None:
    if state.rate is None or state.rate_step is None:
        return state.rate
    ceiling = state.config.rate
    return (
        state.rate + state.rate_step
        if ceiling is None
        else min(ceiling, state.rate + state.rate_step)
    )


def move(
    state: PoolState, concurrency: int | None, rate: float | None, why: str, by: str
) -> Change | None:
    """Set the limits; the change, if they moved."""
    old_concurrency, old_rate = state.concurrency, state.rate
    if concurrency == old_concurrency and rate == old_rate:
        return None
    state.concurrency, state.rate = concurrency, rate
    seq = 1 if state.last_change is None else state.last_change.seq + 1
    state.last_change = Change(seq, concurrency, rate, old_concurrency, old_rate, why, by)
    return state.last_change
