"""Where a pool's state lives, shared by every driver of the pool: the interface every
store has (the one ``pools_store`` names is opened by :mod:`batch.pools.connect`).

A store runs one decision (:mod:`batch.pools.decide`) at a time over the pool's state, on
its own clock, after dropping the members that died (a process gone, a lease run out): a
SIGKILLed driver's slots are free for the next decision. ``pools_store`` unset is the local
store (:mod:`batch.pools.local`, this machine); ``redis://HOST:PORT/DB`` is Redis
(:mod:`batch.pools.redis_store`, several machines). A store that cannot be reached is a
:class:`PoolStoreError` when the sweep starts, never a pool with no limit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from batch.errors import UsageError
from batch.pools.state import PoolState

T = TypeVar("T")

#: One decision: the state (None: no such pool yet) and the store's time, to the state to
#: save (None: delete it) and the answer.
Decision = Callable[[PoolState | None, float], tuple[PoolState | None, T]]


class PoolStoreError(UsageError):
    """The pool store cannot be reached or read: one line for the user (exit status 2 when
    the sweep starts)."""


class PoolStore(Protocol):
    #: Where the state is, for messages (``~/.local/state/batch-ledger/pools/pools.sqlite``).
    where: str

    def member_id(self) -> str:
        """This driver's id in the store (a process, or a lease holder)."""
        ...

    def transact(self, pool: str, decision: Decision[T]) -> T:
        """Run ``decision`` over ``pool``'s state atomically and save what it returns."""
        ...

    def pools(self) -> dict[str, PoolState]:
        """Every pool the store holds (for ``batch status``), dead members dropped."""
        ...

    def close(self) -> None: ...
