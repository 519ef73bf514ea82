"""The local pool store: SQLite in the user's state dir, for the drivers of one machine.

``$XDG_STATE_HOME/batch-ledger/pools/pools.sqlite`` (``~/.local/state/...`` without it), a
dir only the user can enter. Each decision is one ``BEGIN IMMEDIATE`` transaction: SQLite's
lock makes the drivers take turns, and the kernel drops a dead process's lock with its file
descriptors. A member is a process (host, pid and start time); a member whose process is
gone, or is another process now holding its pid, is dropped with its slots at the next
decision of any driver. The clock is ``CLOCK_MONOTONIC``, one for every process of the
machine.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from pathlib import Path
from typing import Any

import psutil

from batch.pools.decide import prune
from batch.pools.state import Member, PoolState, StateError, dumps, loads
from batch.pools.store import Decision, PoolStoreError, T

#: Seconds a driver waits for another's transaction (each takes milliseconds).
BUSY_TIMEOUT = 30.0


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "batch-ledger" / "pools"


def _process_id(pid: int) -> str:
    started = psutil.Process(pid).create_time()
    return f"{socket.gethostname()}:{pid}:{started:.2f}"


def _dead(member_id: str, member: Member) -> bool:
    host, _, rest = member_id.partition(":")
    if host != socket.gethostname():
        return False  # another machine's driver: not this store's to judge
    pid_text, _, _ = rest.partition(":")
    try:
        return _process_id(int(pid_text)) != member_id
    except (psutil.Error, ValueError):
        return True


class LocalStore:
    def __init__(self, connection: sqlite3.Connection, where: str) -> None:
        self._db = connection
        self.where = where
        self._me = _process_id(os.getpid())

    @classmethod
    def connect(cls, directory: str | None) -> LocalStore:
        base = Path(directory) if directory else state_dir()
        path = base / "pools.sqlite"
        try:
            base.mkdir(parents=True, exist_ok=True, mode=0o700)
            connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None)
            # The state is a few limits that die with their drivers: a commit need not reach
            # the disk (an fsync per start would be most of a decision's time).
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=OFF")
            connection.execute(
                "CREATE TABLE IF NOT EXISTS pools (name TEXT PRIMARY KEY, state TEXT NOT NULL)"
            )
        except (OSError, sqlite3.Error) as exc:
            raise PoolStoreError(f"pool store {path}: cannot open it ({exc})") from None
        return cls(connection, str(path))

    def member_id(self) -> str:
        return self._me

    def transact(self, pool: str, decision: Decision[T]) -> T:
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                state = self._load(pool)
                new, answer = decision(state, time.monotonic())
                if new is None:
                    self._db.execute("DELETE FROM pools WHERE name = ?", (pool,))
                else:
                    self._db.execute(
                        "INSERT INTO pools (name, state) VALUES (?, ?) "
                        "ON CONFLICT (name) DO UPDATE SET state = excluded.state",
                        (pool, dumps(new)),
                    )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise PoolStoreError(f"pool store {self.where}: {exc}") from None
        return answer

    def _load(self, pool: str) -> PoolState | None:
        row = self._db.execute("SELECT state FROM pools WHERE name = ?", (pool,)).fetchone()
        if row is None:
            return None
        try:
            state = loads(row[0])
        except StateError as exc:
            raise PoolStoreError(f"pool store {self.where}: pool {pool!r}: {exc}") from None
        prune(state, _dead)
        return state

    def pools(self) -> dict[str, PoolState]:
        try:
            names = [row[0] for row in self._db.execute("SELECT name FROM pools ORDER BY name")]
        except sqlite3.Error as exc:
            raise PoolStoreError(f"pool store {self.where}: {exc}") from None
        found: dict[str, Any] = {}
        for name in names:
            state = self._load(name)
            if state is not None and state.members:
                found[name] = state
        return found

    def close(self) -> None:
        self._db.close()
