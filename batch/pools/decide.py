"""The pool's decisions, one per transaction of its store: join, ask to start, finish,
leave, and dropping the members that died. Pure: each takes the state and the store's time
and changes the state; the store loads, calls and saves it atomically.

A start needs three things: the pool's running jobs below its concurrency, the member's own
running jobs below its fair share (:mod:`batch.pools.share`), and a token of the pool's
rate (:mod:`batch.pools.bucket`) that no member with fewer starts is waiting for, so that
equal demand gets equal starts whether the concurrency or the rate is what binds.
docs/policies.md, "Pools".
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from batch.pools.bucket import refill, wait_for_token
from batch.pools.config import PoolConfig, describe, strictest
from batch.pools.rule import lowered, move, raised
from batch.pools.share import fair_shares
from batch.pools.state import STATE_VERSION, Change, Member, PoolState

#: Seconds a member that must wait asks again: another driver's finish wakes no one here.
POLL = 0.05
#: A member that asked (or waited for a token) this recently still wants to start jobs.
STALE = 0.5
#: Seconds a token waits for the member whose turn it is (the fewest starts): past it, the
#: first to ask takes it, so a member slow to come back costs the key nothing.
TURN_GRACE = 0.05
#: Start times kept for the rate the pool ran at.
RECENT_STARTS = 64


@attrs.frozen
class Answer:
    """Start now (``granted``), or ask again in ``wait`` seconds; ``reason`` says why not."""

    granted: bool
    wait: float = 0.0
    reason: str = ""


def new_state(config: PoolConfig, now: float) -> PoolState:
    return PoolState(
        version=STATE_VERSION,
        config=config,
        concurrency=config.max_concurrent,
        rate=config.rate,
        tokens=1.0,
        at=now,
        token_at=now,
        rate_step=None if config.rate is None else config.rate / 10,
    )


def join(
    state: PoolState | None, name: str, member_id: str, me: Member, now: float
) -> tuple[PoolState, list[str]]:
    """Add ``me``; the state, and what to tell its sweep when its declaration is not what
    holds (one line each)."""
    if state is None or not state.members:
        state = new_state(me.declared, now)
    me = attrs.evolve(me, running=0, asked_at=None, token_wait_at=None)
    if state.members:
        me.starts = min(member.starts for member in state.members.values())
    state.members[member_id] = me
    notes = []
    holds = strictest(member.declared for member in state.members.values())
    if holds != me.declared:
        others = "; ".join(
            f"{member.sweep}: {describe(member.declared)}"
            for other_id, member in sorted(state.members.items())
            if other_id != member_id and member.declared != me.declared
        )
        notes.append(
            f"pool {name}: this sweep declares {describe(me.declared)}, other sweeps "
            f"using it declare otherwise ({others}); what holds is the strictest of each, "
            f"{describe(holds)}, while they share it (one key is protected by its lowest limit)"
        )
    set_config(state, holds, me.sweep)
    return state, notes


def set_config(state: PoolState, config: PoolConfig, by: str) -> Change | None:
    """What holds is now ``config``: a non-adaptive pool's limits are it; an adaptive pool's
    stay where the rule put them, within it."""
    if config == state.config:
        return None
    state.config = config
    if not config.adaptive:
        return move(state, config.max_concurrent, config.rate, "declarations changed", by)
    concurrency, rate = state.concurrency, state.rate
    if config.max_concurrent is not None:
        concurrency = min(concurrency or config.max_concurrent, config.max_concurrent)
    if config.rate is not None:
        rate = min(rate or config.rate, config.rate)
        state.rate_step = state.rate_step or config.rate / 10
    return move(state, concurrency, rate, "declarations changed", by)


def leave(state: PoolState, member_id: str) -> None:
    member = state.members.pop(member_id, None)
    if member is not None and state.members:
        set_config(state, strictest(m.declared for m in state.members.values()), member.sweep)


def prune(state: PoolState, dead: Callable[[str, Member], bool]) -> list[str]:
    """Drop the members ``dead`` says are gone, with their slots; their sweeps' names."""
    gone = [member_id for member_id, member in state.members.items() if dead(member_id, member)]
    names = [state.members[member_id].sweep for member_id in gone]
    for member_id in gone:
        leave(state, member_id)
    return names


def _recent(at: float | None, now: float) -> bool:
    return at is not None and now - at < STALE


def ask(state: PoolState, member_id: str, now: float) -> Answer:
    """May the member start one more job now? A grant counts it as running."""
    member = state.members[member_id]
    member.asked_at = now
    state.tokens, state.at = refill(state.tokens, state.at, state.rate, now), now
    if state.concurrency is not None:
        if state.running() >= state.concurrency:
            return Answer(False, POLL, f"pool at its limit ({state.concurrency} at once)")
        demands = {
            other_id: other.cap if _recent(other.asked_at, now) else other.running
            for other_id, other in state.members.items()
        }
        starts = {other_id: other.starts for other_id, other in state.members.items()}
        share = fair_shares(state.concurrency, demands, starts)[member_id]
        if member.running >= share:
            return Answer(False, POLL, f"pool: this sweep's fair share is {share} at once")
    if state.rate is not None:
        if state.tokens < 1.0:
            member.token_wait_at = now
            wait = max(wait_for_token(state.tokens, state.rate), 0.005)
            return Answer(False, wait, f"pool rate {state.rate:.3g}/s")
        ahead = now - state.token_at < TURN_GRACE and any(
            other.starts < member.starts and _recent(other.token_wait_at, now)
            for other_id, other in state.members.items()
            if other_id != member_id
        )
        if ahead:  # the token is another's turn: it comes for it now, or it is ours
            member.token_wait_at = now
            return Answer(False, TURN_GRACE, f"pool rate {state.rate:.3g}/s (another's turn)")
        state.tokens -= 1.0
        state.token_at = now + wait_for_token(state.tokens, state.rate)
    member.running += 1
    member.starts += 1
    member.token_wait_at = None
    state.recent_starts = [*state.recent_starts[-(RECENT_STARTS - 1) :], now]
    return Answer(True)


def finish(
    state: PoolState,
    member_id: str,
    *,
    rate_limited: bool,
    counts: bool,
    started: float,
    now: float,
) -> Change | None:
    """One of the member's jobs ended (``started`` on the store's clock): its slot is free;
    ``rate_limited`` lowers the pool's limits, a finish that ``counts`` (a pass or a model
    failure) goes toward raising them."""
    member = state.members.get(member_id)
    if member is None:
        return None
    member.running = max(0, member.running - 1)
    if rate_limited:
        member.refusals += 1
        state.refusals += 1
        return lowered(state, started, now, member.sweep)
    if counts:
        return raised(state, member.sweep)
    return None
