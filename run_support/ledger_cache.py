"""The ledger's cache: one SQLite database per batch dir of what each record was read as,
beside its stat signature, so that a read parses only the records that changed.

Where it lives: ``$XDG_CACHE_HOME/batch-ledger/<sha256 of the batch dir's real path>.sqlite``
(``~/.cache`` without ``XDG_CACHE_HOME``), on the reader's own host, not in the batch dir:
SQLite's WAL mode, which lets readers read while a writer writes, needs every process on
one host and does not work over a network filesystem, where batch dirs often are; and a
cache outside the batch dir is not shared with the jobs that run in it (docs/ledger.md).

The cache is an optimisation only. A database that cannot be opened or written, is
corrupt, truncated or locked, or was made by another version of this reader is ignored for
the read at hand and, when it can be, rebuilt; no answer ever depends on it. Which rows a
read may use is ``run_support.ledger_scan``'s decision; this module only keeps them.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from run_support import jsonio
from run_support.run_meta import FIELDS

#: ``PRAGMA user_version`` of the database this code makes; any other is rebuilt.
CACHE_VERSION = 1
#: How long a write waits for another writer before it gives up (the rows are then not
#: cached this time: one parse each on a later read). Reads never wait in WAL mode.
BUSY_SECONDS = 0.5
#: No text or blob in the database may be longer: a record over 1 MiB is never cached
#: (``ledger_scan.MAX_CACHED_BYTES``), so a longer value is a forged one, refused by SQLite
#: before it is read into memory.
MAX_VALUE_BYTES = 2 << 20

_SIGNATURE = ("ino", "size", "mtime_ns", "ctime_ns")
#: What a row holds after its key: the signature, the error of an unreadable record, and
#: the record's fields as a JSON array, one value per field of RunMeta in declaration order
#: but ``run_dir`` (where the record was found, never cached). One value, not a column per
#: field: SQLite hands Python a row's columns one object each, and 27 of them for each of
#: 100,000 rows cost more than one JSON array of them per model dir (bench/ledger_side.py).
_STORED = tuple(field for field in FIELDS if field.name != "run_dir")
_RUN_DIR_AT = [field.name for field in FIELDS].index("run_dir")
_CREATE = (
    "CREATE TABLE records (model_dir TEXT NOT NULL, run_dir TEXT NOT NULL, "
    + ", ".join(f"{name} INTEGER NOT NULL" for name in _SIGNATURE)
    + ", error TEXT, fields BLOB, PRIMARY KEY (model_dir, run_dir)) WITHOUT ROWID"
)
_ABOUT = "CREATE TABLE about (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID"
_SELECT = (
    "SELECT run_dir, "
    + ", ".join(_SIGNATURE)
    + ", error, fields FROM records WHERE model_dir = ? ORDER BY run_dir"
)
_INSERT = "INSERT OR REPLACE INTO records VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
#: The names of the values of ``fields``, in order (docs/ledger.md).
STORED_FIELDS = tuple(field.name for field in _STORED)
#: SQLite's own words for a file that is not a database of ours, a damaged one or one
#: holding a value no reader of ours wrote (past ``MAX_VALUE_BYTES``): only then is the file
#: removed and made again (a locked or unreadable one is left as it is).
_DAMAGED = frozenset({"SQLITE_NOTADB", "SQLITE_CORRUPT", "SQLITE_TOOBIG"})


def _reader_id() -> str:
    """What makes a cached read valid: the reading rules (``run_support/run_meta.py``)."""
    source = Path(__file__).with_name("run_meta.py")
    try:
        return hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    except OSError:
        return os.urandom(8).hex()  # no source to hash: never reuse a cache


READER = _reader_id()


def cache_path(batch_dir: Path | str) -> Path | None:
    """Where ``batch_dir``'s cache lives; None when this process has no cache dir (no home)."""
    root = os.environ.get("XDG_CACHE_HOME", "")
    try:
        base = Path(root) if os.path.isabs(root) else Path.home() / ".cache"
    except (RuntimeError, KeyError):
        return None
    real = os.fsencode(os.path.realpath(batch_dir))
    return base / "batch-ledger" / f"{hashlib.sha256(real).hexdigest()[:32]}.sqlite"


def _connect(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    connection = sqlite3.connect(
        path, timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=False
    )
    try:
        connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        connection.execute("PRAGMA journal_mode=WAL")
        # WAL with NORMAL: a crash or power cut loses at most the last writes, never the
        # database's consistency; no fsync per write.
        connection.execute("PRAGMA synchronous=NORMAL")
        if not _is_ours(connection):
            _make_ours(connection)
    except BaseException:
        connection.close()
        raise
    return connection


def _is_ours(connection: sqlite3.Connection) -> bool:
    (version,) = connection.execute("PRAGMA user_version").fetchone()
    if version != CACHE_VERSION:
        return False
    tables = dict(connection.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
    if tables != {"records": _CREATE, "about": _ABOUT}:
        return False
    found = connection.execute("SELECT value FROM about WHERE key = 'reader'").fetchone()
    return bool(found == (READER,))


def _make_ours(connection: sqlite3.Connection) -> None:
    """Empty the database and give it this version's tables (another version's, a foreign
    file's or an empty one's alike)."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        for (name,) in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'"
        ).fetchall():
            connection.execute(f'DROP TABLE "{name}"')
        connection.execute(_CREATE)
        connection.execute(_ABOUT)
        connection.execute("INSERT INTO about VALUES ('reader', ?)", (READER,))
        connection.execute(f"PRAGMA user_version = {CACHE_VERSION}")
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


def _note_batch_dir(connection: sqlite3.Connection, real: str) -> None:
    """Keep in ``about`` which batch dir (its real path, as hex of its bytes: a path need
    not be UTF-8) the cache stands for, so that :func:`prune` can tell when it is gone."""
    try:
        found = connection.execute("SELECT value FROM about WHERE key = 'batch_dir'").fetchone()
        if found != (real,):
            connection.execute("INSERT OR REPLACE INTO about VALUES ('batch_dir', ?)", (real,))
    except sqlite3.Error:
        pass  # busy or read-only: noted at a later open


#: How often a process looks for the caches of batch dirs that are gone (a file's mtime in
#: the cache dir says when it last did).
PRUNE_EVERY_SECONDS = 24 * 3600
_PRUNED = ".pruned"


def prune(cache_dir: Path, *, keep: Path | None = None, now: float | None = None) -> list[Path]:
    """Remove the cache of every batch dir that no longer exists, at most once per
    :data:`PRUNE_EVERY_SECONDS`; the caches removed. A cache that does not say its batch dir
    (made before it was kept), cannot be read, or whose batch dir cannot be told gone (an
    error other than "no such file": an unreadable or unmounted parent) is left. A batch dir
    that is back later has its records read once afresh, as with any missing cache."""
    marker = cache_dir / _PRUNED
    now = time.time() if now is None else now
    try:
        if now - marker.stat().st_mtime < PRUNE_EVERY_SECONDS:
            return []
    except FileNotFoundError:
        pass
    except OSError:
        return []
    try:
        marker.touch()
        os.utime(marker, (now, now))
        candidates = [p for p in cache_dir.glob("*.sqlite") if p != keep]
    except OSError:
        return []
    removed = []
    for path in candidates:
        gone = _batch_dir_gone(path)
        if gone:
            _remove(path)
            removed.append(path)
    return removed


def _batch_dir_gone(path: Path) -> bool:
    try:
        connection = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=0)
    except (sqlite3.Error, ValueError):
        return False
    try:
        found = connection.execute("SELECT value FROM about WHERE key = 'batch_dir'").fetchone()
        real = os.fsdecode(bytes.fromhex(found[0])) if found and type(found[0]) is str else None
    except (sqlite3.Error, ValueError):
        return False
    finally:
        connection.close()
    if real is None:
        return False
    try:
        os.stat(real)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(OSError):
            os.unlink(f"{path}{suffix}")


def _damaged(exc: sqlite3.Error) -> bool:
    return getattr(exc, "sqlite_errorname", None) in _DAMAGED


class Cache:
    """One batch dir's cache database, open; every method gives up quietly when it fails."""

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        self.path = path
        self._connection: sqlite3.Connection | None = connection
        self._lock = threading.Lock()

    @classmethod
    def of(cls, batch_dir: Path | str) -> Cache | None:
        """``batch_dir``'s cache, made if need be; None when it cannot be had now. Once a
        day, the caches of batch dirs that no longer exist are removed (:func:`prune`)."""
        path = cache_path(batch_dir)
        if path is None:
            return None
        for attempt in (1, 2):
            try:
                connection = _connect(path)
            except sqlite3.Error as exc:
                if attempt == 1 and _damaged(exc):
                    _remove(path)  # not a database, or a damaged one: made again
                    continue
                return None
            except (OSError, ValueError):
                return None
            _note_batch_dir(connection, os.fsencode(os.path.realpath(batch_dir)).hex())
            prune(path.parent, keep=path)
            return cls(path, connection)
        return None

    def _failed(self, exc: sqlite3.Error) -> None:
        """Stop using the database; remove it when it is damaged, so the next read makes it
        anew."""
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(sqlite3.Error):
                connection.close()
        if _damaged(exc):
            _remove(self.path)

    def rows(self, model_dir: str) -> list[tuple[Any, ...]] | None:
        """Every row cached for ``model_dir``: (run dir, inode, size, mtime, ctime, error,
        *RunMeta fields), dicts and lists decoded; None when the cache failed (read
        everything afresh)."""
        with self._lock:
            if self._connection is None:
                return None
            try:
                found = self._connection.execute(_SELECT, (model_dir,)).fetchall()
            except sqlite3.Error as exc:
                self._failed(exc)
                return None
            except UnicodeEncodeError:  # a model dir whose name is not UTF-8
                return []
        try:
            return _decoded(found)
        except (ValueError, TypeError):
            return []  # a forged value: that dir's records are read afresh

    def write(self, model_dir: str, rows: Sequence[tuple[Any, ...]], gone: Sequence[str]) -> None:
        """Put ``rows`` (from :func:`stored`) in the cache and remove the rows of ``gone``
        run dirs of ``model_dir``, at once; nothing when another writer holds it too long."""
        if not rows and not gone:
            return
        with self._lock:
            connection = self._connection
            if connection is None:
                return
            try:
                connection.execute("BEGIN IMMEDIATE")
                try:
                    connection.executemany(
                        "DELETE FROM records WHERE model_dir = ? AND run_dir = ?",
                        ((model_dir, name) for name in gone),
                    )
                    connection.executemany(_INSERT, rows)
                    connection.execute("COMMIT")
                except BaseException:
                    connection.execute("ROLLBACK")
                    raise
            except sqlite3.OperationalError as exc:
                if _damaged(exc):
                    self._failed(exc)
                # Busy, full, read-only: not cached this time.
            except sqlite3.Error as exc:
                self._failed(exc)
            except (UnicodeEncodeError, OverflowError):
                pass  # a name or a number SQLite cannot take (stored() refuses them): uncached

    def put(self, row: tuple[Any, ...]) -> None:
        """Put one row in the cache (a writer's: one statement, its own transaction)."""
        with self._lock:
            connection = self._connection
            if connection is None:
                return
            try:
                connection.execute(_INSERT, row)
            except sqlite3.Error as exc:
                if _damaged(exc) or not isinstance(exc, sqlite3.OperationalError):
                    self._failed(exc)
                # Busy, full, read-only: not cached this time.
            except (UnicodeEncodeError, OverflowError):
                pass  # as in write()

    def keep_only(self, model_dirs: Sequence[str]) -> None:
        """Remove the rows of every model dir not in ``model_dirs`` (gone from the batch)."""
        with self._lock:
            connection = self._connection
            if connection is None:
                return
            try:
                cached = {name for (name,) in connection.execute(
                    "SELECT DISTINCT model_dir FROM records"
                )}  # fmt: skip
            except sqlite3.Error as exc:
                self._failed(exc)
                return
        for name in cached - set(model_dirs):
            self.write_gone_dir(name)

    def write_gone_dir(self, model_dir: str) -> None:
        with self._lock:
            connection = self._connection
            if connection is None:
                return
            try:
                connection.execute("DELETE FROM records WHERE model_dir = ?", (model_dir,))
            except sqlite3.Error as exc:
                if _damaged(exc):
                    self._failed(exc)

    def close(self) -> None:
        with self._lock:
            connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(sqlite3.Error):
                connection.close()


def _decoded(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``rows`` as (run dir, inode, size, mtime, ctime, error, *RunMeta fields), their
    ``fields`` decoded (``run_dir`` None); a forged row raises ValueError or TypeError.

    A model dir's arrays are parsed as one JSON array: 10,000 small parses cost far more
    than one big one. Each must be one JSON value, so the whole must hold exactly one per
    row (one that is not fails to parse, or changes the count)."""
    records = [row[6] for row in rows if row[6] is not None]
    if set(map(type, records)) - {bytes}:
        raise TypeError("fields that are not JSON")
    parsed = jsonio.loads(b"[" + b",".join(records) + b"]") if records else []
    if type(parsed) is not list or len(parsed) != len(records):
        raise ValueError("fields holding more or less than one value")
    width = len(_STORED)
    empty = (None,) * (width + 1)
    out = []
    values = iter(parsed)
    for row in rows:
        if row[6] is None:
            out.append((*row[:6], *empty))
            continue
        fields = next(values)
        if type(fields) is not list or len(fields) != width:
            raise ValueError("fields of another shape")
        fields.insert(_RUN_DIR_AT, None)
        out.append((*row[:6], *fields))
    return out


def stored(
    model_dir: str, run_dir: str, signature: Sequence[int], fields: Sequence[Any] | None,
    error: str | None,
) -> tuple[Any, ...] | None:  # fmt: skip
    """The row that caches one record (its RunMeta ``fields`` in order, or the ``error`` it
    was read with); None when it cannot be stored so that it reads back the same: text that
    is not UTF-8 in its key, a value JSON gives back otherwise (a NaN, an integer orjson
    reads back as a float), a signature past SQLite's 64-bit integers."""
    if not all(map(jsonio.is_text, (model_dir, run_dir, error or ""))):
        return None
    if not all(_INT64[0] <= number <= _INT64[1] for number in signature):
        return None
    encoded = None
    if fields is not None:
        kept = [value for at, value in enumerate(fields) if at != _RUN_DIR_AT]
        encoded = jsonio.dumps(kept, ascii_only=True)[:-1]  # its newline
        if jsonio.loads(encoded) != kept:
            return None
    return (model_dir, run_dir, *signature, error, encoded)


_INT64 = (-(1 << 63), (1 << 63) - 1)


# --- writers: one open cache per batch dir per process ---------------------------------------

_WRITERS: dict[str, tuple[int, Cache | None]] = {}
_WRITERS_LOCK = threading.Lock()


def _writer(batch_dir: Path) -> Cache | None:
    key = os.fspath(batch_dir)
    with _WRITERS_LOCK:
        pid, cache = _WRITERS.get(key, (-1, None))
        if pid != os.getpid():  # none yet, or one a forked parent opened: never shared
            cache = Cache.of(batch_dir)
            _WRITERS[key] = (os.getpid(), cache)
        return cache


def note_written(
    batch_dir: Path, model_dir: str, run_dir: str, signature: Sequence[int], fields: Sequence[Any]
) -> None:
    """Cache a record just written (its signature taken from the written file itself), so
    that the next read of the batch need not parse it even if the driver dies next."""
    cache = _writer(batch_dir)
    if cache is None:
        return
    row = stored(model_dir, run_dir, signature, fields, None)
    if row is not None:
        cache.put(row)


@contextlib.contextmanager
def writers_closed() -> Iterator[None]:
    """Close every writer's database at the end (tests, a process about to exit)."""
    try:
        yield
    finally:
        with _WRITERS_LOCK:
            for pid, cache in _WRITERS.values():
                if cache is not None and pid == os.getpid():
                    cache.close()
            _WRITERS.clear()
