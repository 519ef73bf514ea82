"""Pools at work: this driver's share of limits it holds with every sweep naming the pool.

The decisions are :mod:`batch.pools.decide` (pure), run in the pool's store
(:mod:`batch.pools.store`) one transaction at a time. This module joins the sweep's pools
when the run begins (telling the user when their declaration is not what holds), is the
scheduler's gate for a job of a pool (a start takes a slot and a token of the pool's rate,
or the job waits, asking again after the wait the pool names), gives the slot back when the
attempt ends, whatever way, and says the pool's changes: a ``pool`` event and a ``POOL``
line for each, its own and the other sweeps'. docs/policies.md, "Pools".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from batch.display.plain import Display
from batch.execution.gate import GateDecision
from batch.plan.jobs import Job
from batch.policies.aimd import RATE_LIMITED
from batch.pools import decide
from batch.pools.config import format_rate
from batch.pools.state import Change, Member, PoolState
from batch.pools.store import PoolStore, PoolStoreError
from batch.sweep.load import Sweep

#: Seconds between looks at the pools while the sweep runs: the other sweeps' changes are
#: said, and a Redis lease renewed well before it ends.
FOLLOW_EVERY = 0.2


def pool_line(name: str, state: PoolState) -> str:
    """``key: 4 at once, 4.2/s; 3 sweeps; 12 refused``: a pool as the user sees it."""
    concurrency = (
        "no limit at once" if state.concurrency is None else (f"{state.concurrency} at once")
    )
    users = len(state.members)
    sweeps = "1 sweep" if users == 1 else f"{users} sweeps"
    return f"{name}: {concurrency}, {format_rate(state.rate)}; {sweeps}; {state.refusals} refused"


def pool_fields(name: str, state: PoolState) -> dict[str, Any]:
    """A pool's figures for an event or the view: limits, users, refusals."""
    return {
        "pool": name,
        "concurrency": state.concurrency,
        "rate": state.rate,
        "max_concurrent": state.config.max_concurrent,
        "max_rate": state.config.rate,
        "sweeps": sorted(member.sweep for member in state.members.values()),
        "running": state.running(),
        "refused": state.refusals,
    }


class PoolRuntime:
    def __init__(
        self,
        sweep: Sweep,
        store: PoolStore,
        *,
        sweep_name: str,
        cap: int,
        display: Display,
        emit: Callable[..., Any],
        on_failure: Callable[[str], None],
    ) -> None:
        """``on_failure(message)``: the store failed while the sweep ran; start no more jobs
        (a job of a pool whose store cannot be asked must not start without its limit)."""
        self._store = store
        self._on_failure = on_failure
        self.failed = False
        self._display = display
        self._emit = emit
        self.pool_of = {
            model.id: pool for model in sweep.models if (pool := sweep.pool_of(model.id))
        }
        self._me = store.member_id()
        self._members = {
            name: Member(sweep=sweep_name, declared=sweep.pools[name], cap=cap)
            for name in sorted(set(self.pool_of.values()))
        }
        #: job key -> (pool, when its attempt started on the store's clock).
        self._held: dict[tuple[str, str, int], tuple[str, float]] = {}
        #: Pool -> (its latest change, its refusals, its users) as last said.
        self._seen: dict[str, tuple[int, int, tuple[str, ...]]] = {}

    def begin(self) -> None:
        """Join every pool the sweep's models name; say what holds."""
        for name, member in self._members.items():
            try:
                notes = self._store.transact(name, self._join(name, member))
            except PoolStoreError as exc:
                self.failed = True
                self._on_failure(f"{exc}; starting no jobs (--resume runs them)")
                return
            for note in notes:
                self._display.message(f"note: {note}")
            self._observe(name, announce=True)

    def _join(self, name: str, member: Member) -> Any:
        def decision(state: PoolState | None, now: float) -> tuple[PoolState, list[str]]:
            return decide.join(state, name, self._me, member, now)

        return decision

    def _transact(self, name: str, act: Callable[[PoolState, float], Any]) -> Any:
        """``act`` over the pool with this driver a member (joined again if its lease ran
        out while it was stalled): (its answer, the store's time, the state); None when the
        store failed (said once, and the sweep starts no more jobs)."""
        member = self._members[name]

        def decision(state: PoolState | None, now: float) -> tuple[PoolState, Any]:
            if state is None or self._me not in state.members:
                state, _ = decide.join(state, name, self._me, member, now)
                # Back after a lapse: the jobs it still runs count against the pool again.
                held = sum(pool == name for pool, _ in self._held.values())
                state.members[self._me].running = held
            return state, (act(state, now), now, state)

        if self.failed:
            return None
        try:
            return self._store.transact(name, decision)
        except PoolStoreError as exc:
            self.failed = True
            self._on_failure(
                f"{exc}; starting no more jobs (recorded results are intact; --resume runs "
                "the rest)"
            )
            return None

    def gate(self, job: Job, clock: float) -> GateDecision:
        """Start ``job`` now (it holds a slot of its pool), or wait; ``clock`` is the
        scheduler's time, which a wait's ``until`` is on."""
        name = self.pool_of.get(job.model)
        if name is None:
            return GateDecision.start()
        done = self._transact(name, lambda s, now: decide.ask(s, self._me, now))
        if done is None:
            return GateDecision.wait(f"pool {name}: its store failed")
        answer, now, state = done
        self._said(name, state)
        if answer.granted:
            self._held[job.key] = (name, now)
            return GateDecision.start()
        return GateDecision.wait(f"pool {answer.reason}", until=clock + answer.wait)

    def finished(self, job: Job, status: str, category: str | None) -> None:
        """``job``'s attempt has a record: its slot back, and its outcome to the rule."""
        held = self._held.pop(job.key, None)
        if held is None:
            return
        name, started = held
        limited = status != "passed" and category == RATE_LIMITED
        done = self._transact(
            name,
            lambda s, now: decide.finish(
                s,
                self._me,
                rate_limited=limited,
                counts=status in ("passed", "failed"),
                started=started,
                now=now,
            ),
        )
        if done is not None:
            self._said(name, done[2])

    def ended(self, job: Job) -> None:
        """``job``'s attempt ended without a record (lost, killed, refused): its slot back."""
        held = self._held.pop(job.key, None)
        if held is not None:
            name, started = held
            self._transact(
                name,
                lambda s, now: decide.finish(
                    s, self._me, rate_limited=False, counts=False, started=started, now=now
                ),
            )

    async def follow(self) -> None:
        """While the sweep runs: say the other sweeps' changes, keep this driver's lease."""
        while True:
            await asyncio.sleep(FOLLOW_EVERY)
            for name in self._members:
                self._observe(name)

    def _observe(self, name: str, *, announce: bool = False) -> None:
        done = self._transact(name, lambda s, now: None)
        if done is not None:
            self._said(name, done[2], announce=announce)

    def _said(self, name: str, state: PoolState, *, announce: bool = False) -> None:
        """Show and record the pool when its limits, its users or its refusals moved."""
        change = state.last_change
        seq = 0 if change is None else change.seq
        seen = (seq, state.refusals, tuple(sorted(m.sweep for m in state.members.values())))
        previous = self._seen.get(name)
        if not announce and previous == seen:
            return
        self._seen[name] = seen
        self._display.pool(name, pool_line(name, state))
        fields = pool_fields(name, state)
        if announce:
            self._emit("pool", action="join", **fields)
        elif previous is not None and previous[0] != seq and change is not None:
            self._emit("pool", action="change", **fields, **_change_fields(change))
        else:
            self._emit("pool", action="update", **fields)

    def close(self) -> None:
        """Leave every pool: this driver's slots are free for the others at once."""
        for name in self._members:
            with contextlib.suppress(Exception):
                self._store.transact(name, self._leave)
        self._store.close()

    def _leave(self, state: PoolState | None, now: float) -> tuple[PoolState | None, None]:
        if state is None:
            return None, None
        decide.leave(state, self._me)
        return (state if state.members else None), None


def _change_fields(change: Change) -> dict[str, Any]:
    return {
        "old_concurrency": change.old_concurrency,
        "old_rate": change.old_rate,
        "reason": change.why,
        "by": change.by,
    }
