"""Find and read every ``run-meta.json`` of a batch dir, fast, with a cache that is never stale.

A batch dir holds one record per run at ``<model_dir>/<run_dir>/run-meta.json``. Parsing
100,000 of them costs seconds; most are unchanged since the last look. The index
(``.ledger-index`` in the batch dir) keeps what each record was read as beside its stat
signature (inode, size, mtime, ctime); a record is taken from the index only when its
signature is unchanged. A record whose ctime is within ``RACY_WINDOW_NS`` of the moment the
index was built is never cached, because a rewrite in the same clock tick could keep the
same signature (git's "racy clean" problem). ctime cannot be set by ``os.utime``, so a file
rewritten in place is always seen on the next call.

What is cached is the caller's :class:`Digest` of the parsed JSON (by default the JSON
itself). The index names the digest it holds and carries a checksum of its body, so a
reader that digests differently never takes another's entries and a damaged index is
never trusted. The index is an optimisation only: an unreadable, foreign, damaged or
unwritable index is ignored, and no result depends on whether one was used. The format
is described in ``docs/ledger.md``.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs

from run_support import jsonio
from run_support.atomic import atomic_write_bytes

RUN_META = "run-meta.json"
INDEX_NAME = ".ledger-index"
INDEX_SCHEMA = 2
RACY_WINDOW_NS = 2_000_000_000
#: Larger records are re-read every time rather than copied into the index.
MAX_CACHED_BYTES = 1 << 20
#: Top-level directories that hold driver files, not runs.
NOT_MODEL_DIRS = frozenset({"batch-logs"})


@attrs.frozen
class Digest:
    """What a reader keeps of one parsed record, and so what the index caches for it.

    ``make(raw)`` returns a JSON-encodable value or raises ``ValueError`` (whose message
    becomes the record's error). ``id`` must change whenever ``make`` could return something
    different for the same input: an index is only used by a reader with the same ``id``.
    """

    id: str
    make: Callable[[Any], Any]


#: The parsed JSON itself.
RAW_JSON = Digest(id="json", make=lambda raw: raw)


@attrs.define
class LedgerFiles:
    """Every record found: ``(run dir relative to the batch dir, digest, error)``.

    Exactly one of digest and error is None: a record that could not be read or digested
    has the reason in error.
    """

    files: list[tuple[str, Any, str | None]] = attrs.Factory(list)
    #: Run dirs (relative paths) that have no ``run-meta.json``.
    incomplete: list[str] = attrs.Factory(list)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small acyclic objects.

    A 100,000-record scan allocates millions of containers; each allocation burst triggers
    collections that find nothing to free, and pausing them saves a third of the scan.
    Reference counting still frees everything as usual.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _read(path: str, digest: Digest) -> tuple[Any, str | None]:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"
    if not data.strip():
        return None, "empty file"
    try:
        raw = jsonio.loads(data)
    except ValueError as exc:
        return None, f"not valid JSON (truncated?): {exc}"
    try:
        return digest.make(raw), None
    except ValueError as exc:
        return None, str(exc)


# --- the index file: a header line, then the entries -------------------------------------
#
#   {"schema": 2, "digest": "<Digest.id>", "crc32": <of the body>}\n
#   {"<model_dir>": {"<run_dir>": [ino, size, mtime_ns, ctime_ns, digest, error]}}\n


def _load_index(path: Path, digest: Digest) -> dict[str, Any]:
    """``{model_dir: {run_dir: entry}}`` from the index, or ``{}`` when it is not usable."""
    try:
        head, _, body = path.read_bytes().partition(b"\n")
        header = jsonio.loads(head)
    except (OSError, ValueError):
        return {}
    if (
        not isinstance(header, dict)
        or header.get("schema") != INDEX_SCHEMA
        or header.get("digest") != digest.id
        or header.get("crc32") != zlib.crc32(body)
    ):
        return {}
    try:
        entries = jsonio.loads(body)
    except ValueError:
        return {}
    return entries if isinstance(entries, dict) else {}


def _encode(document: Any) -> bytes | None:
    # A value the fast encoder refuses (a lone surrogate, an integer past 64 bits under
    # orjson) is written escaped; one nothing can encode costs the index, never the scan.
    for ascii_only in (False, True):
        try:
            return jsonio.dumps(document, ascii_only=ascii_only)
        except (ValueError, TypeError, RecursionError):
            continue
    return None


def _save_index(path: Path, digest: Digest, entries: dict[str, dict[str, list[Any]]]) -> None:
    body = _encode(entries)
    if body is None:
        return
    header = jsonio.dumps({"schema": INDEX_SCHEMA, "digest": digest.id, "crc32": zlib.crc32(body)})
    # A read-only batch dir (someone else's, an archive) still reads, just uncached.
    with contextlib.suppress(OSError):
        atomic_write_bytes(path, header + body, fsync=False)


# --- the scan -----------------------------------------------------------------------------


def read_ledger_files(
    batch_dir: Path,
    *,
    digest: Digest = RAW_JSON,
    use_index: bool = True,
    update_index: bool = True,
) -> LedgerFiles:
    """Read every ``*/*/run-meta.json`` under ``batch_dir`` (hidden names skipped, like glob).

    Each record comes back as ``digest.make`` of its parsed JSON, from the index when the
    file is provably unchanged. ``update_index=False`` still reads the index but never
    writes it, for commands that promise to change nothing on disk (``batch plan``,
    ``batch status``). ``use_index=False`` neither reads nor writes it.
    """
    with gc_paused():
        return _scan(Path(batch_dir), digest, use_index=use_index, update_index=update_index)


def _names(directory: str | int) -> list[str]:
    """Sorted entries of ``directory`` that are not hidden (like glob's ``*``)."""
    return sorted(name for name in os.listdir(directory) if name[0] != ".")


def _scan(batch_dir: Path, digest: Digest, *, use_index: bool, update_index: bool) -> LedgerFiles:
    found = LedgerFiles()
    try:
        with os.scandir(batch_dir) as entries:
            top = sorted(e.name for e in entries if e.name[0] != "." and e.is_dir())
    except (FileNotFoundError, NotADirectoryError):
        return found

    index_path = batch_dir / INDEX_NAME
    cached = _load_index(index_path, digest) if use_index else {}
    racy_after = time.time_ns() - RACY_WINDOW_NS
    kept: dict[str, dict[str, list[Any]]] = {}
    changed = not cached.keys() <= set(top)
    files = found.files
    stat = os.stat

    for model_dir in top:
        try:
            # Paths relative to an open directory spare the kernel a walk from / per file.
            dir_fd = os.open(batch_dir / model_dir, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue
        try:
            try:
                # Plain names, no is_dir() per entry: the stat below tells a run dir
                # (found, or ENOENT) from a stray file (ENOTDIR).
                runs = _names(dir_fd)
            except OSError:
                runs = []
            cached_runs = cached.get(model_dir)
            if type(cached_runs) is not dict:
                cached_runs = {}
            kept_runs: dict[str, list[Any]] = {}
            for run_dir in runs:
                name = f"{run_dir}/{RUN_META}"
                try:
                    st = stat(name, dir_fd=dir_fd)
                except OSError as exc:
                    if exc.errno != errno.ENOTDIR and model_dir not in NOT_MODEL_DIRS:
                        found.incomplete.append(f"{model_dir}/{run_dir}")
                    continue
                entry = cached_runs.get(run_dir)
                # Unchanged means the same inode, size, mtime and ctime as when it was cached.
                if (
                    type(entry) is list
                    and len(entry) == 6
                    and entry[0] == st.st_ino
                    and entry[1] == st.st_size
                    and entry[2] == st.st_mtime_ns
                    and entry[3] == st.st_ctime_ns
                ):
                    value, error = entry[4], entry[5]
                else:
                    entry = None
                    value, error = _read(f"{batch_dir}/{model_dir}/{name}", digest)
                files.append((f"{model_dir}/{run_dir}", value, error))
                if use_index and st.st_ctime_ns < racy_after and st.st_size <= MAX_CACHED_BYTES:
                    if entry is None:
                        changed = True
                        entry = [
                            st.st_ino,
                            st.st_size,
                            st.st_mtime_ns,
                            st.st_ctime_ns,
                            value,
                            error,
                        ]
                    kept_runs[run_dir] = entry
        finally:
            os.close(dir_fd)
        if kept_runs:
            kept[model_dir] = kept_runs
        changed = changed or len(kept_runs) != len(cached_runs)

    if use_index and update_index and changed:
        _save_index(index_path, digest, kept)
    return found
