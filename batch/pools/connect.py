"""Opening the pool store a sweep's ``pools_store`` names: unset, a directory or ``file:``
the local store (:mod:`batch.pools.local`), ``redis://`` Redis
(:mod:`batch.pools.redis_store`, imported only then). docs/policies.md, "Pools".
"""

from __future__ import annotations

from batch.pools.store import PoolStore, PoolStoreError


def open_store(url: str | None) -> PoolStore:
    """The store ``pools_store`` names; :class:`PoolStoreError` if it cannot be reached."""
    if url is None or url.startswith("file:") or url.startswith("/"):
        from batch.pools.local import LocalStore

        return LocalStore.connect(None if url is None else url.removeprefix("file:"))
    if url.startswith(("redis://", "rediss://", "unix://")):
        from batch.pools.redis_store import RedisStore

        return RedisStore.connect(url)
    raise PoolStoreError(f"pools_store {url!r}: not a redis:// URL or a directory")
