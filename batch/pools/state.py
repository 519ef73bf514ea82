"""A pool's shared state, as plain data: what every driver of the pool reads and writes in
one transaction of its store (``batch.pools.local``, ``batch.pools.redis_store``).

Times are the store's clock (seconds): one clock every member reads, so a bucket refilled by
one driver means the same to the next. The state travels as JSON (:func:`dumps`,
:func:`loads`); a state this version cannot read is a :class:`StateError`, never a pool
silently reset to no limit.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import cattrs

from batch.pools.config import PoolConfig

#: Bumped when the state's fields change incompatibly; a driver refuses another version.
STATE_VERSION = 1


class StateError(ValueError):
    """The stored state cannot be read."""


@attrs.define
class Member:
    """One driver using the pool."""

    #: The sweep's batch dir name (what the user recognizes), for messages and the view.
    sweep: str
    declared: PoolConfig
    #: The most jobs of this pool the driver would run at once (its own limits).
    cap: int
    running: int = 0
    #: Starts so far, evened out when it joins: the next token goes to the fewest.
    starts: int = 0
    #: When it last asked to start a job (it wants more slots while this is recent).
    asked_at: float | None = None
    #: When it last waited for a token (it is in the queue for one while this is recent).
    token_wait_at: float | None = None
    refusals: int = 0
    #: Redis: when its lease ends unless renewed; None where the store checks processes.
    lease_until: float | None = None


@attrs.define
class Change:
    """The pool's limits moved (or the limits that hold did): shown and written as events."""

    seq: int
    concurrency: int | None
    rate: float | None
    old_concurrency: int | None
    old_rate: float | None
    why: str
    #: The sweep whose finish (or arrival) moved it.
    by: str


@attrs.define
class PoolState:
    version: int
    #: What holds now: the strictest of the members' declarations.
    config: PoolConfig
    #: The current limits, at or below the config's (the adaptive rule moves them).
    concurrency: int | None
    rate: float | None
    tokens: float = 1.0
    at: float = 0.0
    #: When the bucket has (had) a whole token again after the latest start.
    token_at: float = 0.0
    good_run: int = 0
    lowered_at: float | None = None
    refused_concurrency: int | None = None
    refused_rate: float | None = None
    #: How much a raise adds to the rate (a tenth of the first rate the pool had).
    rate_step: float | None = None
    refusals: int = 0
    #: Recent start times, newest last: the rate the pool ran at, when it had no rate.
    recent_starts: list[float] = attrs.Factory(list)
    members: dict[str, Member] = attrs.Factory(dict)
    last_change: Change | None = None

    def running(self) -> int:
        return sum(member.running for member in self.members.values())


_CONVERTER = cattrs.Converter(forbid_extra_keys=True)


def dumps(state: PoolState) -> str:
    return json.dumps(_CONVERTER.unstructure(state), separators=(",", ":"))


def loads(text: str | bytes) -> PoolState:
    try:
        data: Any = json.loads(text)
    except ValueError as exc:
        raise StateError(f"not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
        found = data.get("version") if isinstance(data, dict) else None
        raise StateError(f"state version {found!r}, this batch reads {STATE_VERSION}")
    try:
        return _CONVERTER.structure(data, PoolState)
    except (cattrs.BaseValidationError, ValueError, TypeError) as exc:
        raise StateError(f"unreadable state: {exc}") from None
