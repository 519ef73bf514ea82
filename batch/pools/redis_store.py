"""The Redis pool store (``pools_store: redis://HOST:PORT/DB``): drivers on several machines
sharing one key. Needs the ``redis`` extra (``pip install 'batch-ledger[redis]'``).

The pool's state is one key, ``batch-ledger:pool:NAME``, changed only in a ``WATCH`` /
``MULTI`` transaction (redis-py's ``transaction`` helper retries when another driver changed
it first). The clock is the server's ``TIME``, one clock for every machine. A member is a
lease: every decision renews the calling driver's (the driver makes one at least five times
a second while it runs, ``batch.execution.pools``), and a member whose lease ran out (a
SIGKILLed driver, a machine gone) is dropped with its slots at the next decision of any
driver.
"""

from __future__ import annotations

import os
import socket
import uuid
from typing import Any

from batch.pools.decide import prune
from batch.pools.state import Member, PoolState, StateError, dumps, loads
from batch.pools.store import Decision, PoolStoreError, T

#: Seconds a member lives without a renewal; a running driver renews every quarter of it.
LEASE = 0.8
#: The state key outlives its last driver by a day, then Redis drops it.
KEY_TTL = 86400
PREFIX = "batch-ledger:pool:"
CONNECT_TIMEOUT = 5.0


class RedisStore:
    def __init__(self, client: Any, where: str) -> None:
        self._client = client
        self.where = where
        self._me = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    @classmethod
    def connect(cls, url: str) -> RedisStore:
        try:
            import redis
        except ImportError:
            raise PoolStoreError(
                f"pools_store {url}: needs redis-py: pip install 'batch-ledger[redis]'"
            ) from None
        where = url.split("@")[-1]  # never a password in a message
        try:
            client = redis.Redis.from_url(
                url, socket_timeout=CONNECT_TIMEOUT, socket_connect_timeout=CONNECT_TIMEOUT
            )
            client.ping()
        except (redis.RedisError, ValueError, OSError) as exc:
            raise PoolStoreError(f"pools_store {where}: cannot reach it ({exc})") from None
        return cls(client, where)

    def member_id(self) -> str:
        return self._me

    def _now(self, pipe: Any) -> float:
        seconds, micros = pipe.time()
        return float(seconds) + float(micros) / 1e6

    def transact(self, pool: str, decision: Decision[T]) -> T:
        import redis

        key = PREFIX + pool
        result: list[T] = []

        def run(pipe: Any) -> None:
            raw = pipe.get(key)
            now = self._now(pipe)
            state = self._parse(pool, raw, now)
            new, answer = decision(state, now)
            if new is not None and self._me in new.members:
                new.members[self._me].lease_until = now + LEASE
            pipe.multi()
            if new is None:
                pipe.delete(key)
            else:
                pipe.set(key, dumps(new), ex=KEY_TTL)
            result[:] = [answer]

        try:
            self._client.transaction(run, key)
        except redis.RedisError as exc:
            raise PoolStoreError(f"pools_store {self.where}: {exc}") from None
        return result[0]

    def _parse(self, pool: str, raw: bytes | None, now: float) -> PoolState | None:
        if raw is None:
            return None
        try:
            state = loads(raw)
        except StateError as exc:
            raise PoolStoreError(f"pools_store {self.where}: pool {pool!r}: {exc}") from None

        def dead(member_id: str, member: Member) -> bool:
            return member.lease_until is not None and member.lease_until < now

        prune(state, dead)
        return state

    def pools(self) -> dict[str, PoolState]:
        import redis

        found: dict[str, PoolState] = {}
        try:
            keys = sorted(self._client.scan_iter(match=PREFIX + "*"))
            now = self._now(self._client)
            for key in keys:
                name = key.decode()[len(PREFIX) :]
                state = self._parse(name, self._client.get(key), now)
                if state is not None and state.members:
                    found[name] = state
        except redis.RedisError as exc:
            raise PoolStoreError(f"pools_store {self.where}: {exc}") from None
        return found

    def close(self) -> None:
        self._client.close()
