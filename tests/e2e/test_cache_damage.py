"""A damaged or forged ledger cache costs a re-read, never the batch (issues 27 and 44).

Through the real CLI: the batch's cache database gets rows whose signatures are right but
whose values are built to make a reader allocate without end — a value of 100 MB, JSON
nested past any sense, a megabyte of digits — and the batch dir gets the cache files of an
earlier version (an index holding the marshal list declaring 2**31 items that every reader
once handed to ``marshal.loads``: 16 GiB, ``MemoryError``, and a journal of the like).
``status``, ``plan --resume`` and ``--resume`` each run under a 700 MB address-space limit,
read the records and carry them; the resume removes the old files.
"""

from __future__ import annotations

import binascii
import json
import os
import resource
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path

from conftest import BatchCli
from helpers.paths import REPO_ROOT

from run_support import ledger_cache
from run_support.names import OLD_CACHE_NAMES

INDEX_NAME, JOURNAL_NAME = OLD_CACHE_NAMES

ADDRESS_SPACE = 700 << 20
#: marshal's list type code, then a count of 2**31 - 1: what it allocates before reading on.
MARSHAL_BOMB = b"[\xff\xff\xff\x7f"


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def _batch(cli: BatchCli, *args: str | Path) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "batch.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cli.dir,
        env={**os.environ, "PYTHONPATH": path},
        preexec_fn=_limited,
        timeout=60,
    )


def _forge(batch_dir: Path) -> None:
    """The cache database, each of its rows built to exhaust a reader, each signature right;
    and the cache files earlier versions kept in the batch dir, in their formats."""
    path = ledger_cache.cache_path(batch_dir)
    assert path is not None and path.exists()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM records").fetchone() == (3,)
        db.execute("UPDATE records SET fields = ? WHERE run_dir LIKE 'c1-%'", (b"[" * 100_000,))
        # 100 MB, made by SQLite itself.
        db.execute("UPDATE records SET fields = zeroblob(100000000) WHERE run_dir LIKE 'c2-%'")
        db.execute("UPDATE records SET fields = ? WHERE run_dir LIKE 'c3-%'", (b"9" * 10**6,))
    digest = "run-meta/1/0123456789abcdef"
    marshal_version = 4
    old = {"schema": 3, "digest": digest, "marshal": marshal_version}
    old["crc32"] = zlib.crc32(MARSHAL_BOMB)
    nested = b"[" * 4000
    # One index holds one header: the old format's, whose body is the marshal bomb; the
    # current format's hostile JSON goes into the journal beside it.
    (batch_dir / INDEX_NAME).write_bytes(json.dumps(old).encode() + b"\n" + MARSHAL_BOMB)
    payload = binascii.b2a_base64(MARSHAL_BOMB, newline=False)
    lines = [
        b"%08x m%d %s\n" % (zlib.crc32(payload), marshal_version, payload),
        b"%08x %s\n" % (zlib.crc32(nested), nested),
        b"%08x %s\n" % (zlib.crc32(b"9" * 4000), b"9" * 4000),
    ]
    (batch_dir / JOURNAL_NAME).write_bytes(b"".join(lines))


def test_a_forged_cache_that_would_exhaust_memory_is_dropped_and_the_records_read(
    batch_cli: BatchCli,
) -> None:
    sweep = batch_cli.write_sweep({"c1": [], "c2": ["fail"], "c3": []})
    assert batch_cli.run(sweep, "--no-progress").returncode == 0
    batch_dir = batch_cli.only_batch_dir()
    _forge(batch_dir)

    status = _batch(batch_cli, "status", batch_dir, "--format", "json")
    assert status.returncode == 0, status.stderr  # before: MemoryError, exit 1
    shown = json.loads(status.stdout)
    assert (shown["recorded_pairs"], shown["unreadable"]) == (3, [])
    plan = _batch(batch_cli, "plan", sweep, "--resume", batch_dir)
    assert plan.returncode == 0, plan.stderr
    assert "3 carried" in plan.stdout
    resumed = _batch(batch_cli, sweep, "--resume", batch_dir, "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert not (batch_dir / INDEX_NAME).exists() and not (batch_dir / JOURNAL_NAME).exists()
    assert batch_cli.runs_counted() == ["c1", "c2", "c3"]  # the first run's; none again
    assert {row["status"] for row in batch_cli.summary()["jobs"]} == {"passed", "failed"}
