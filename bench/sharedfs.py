"""A resume's read of a 100,000-record ledger on a network filesystem (sshfs over
loopback, ``scripts/sshfs-local``), cold and warm, against local disk and the
straightforward reader, in the same run.

    .venv/bin/python bench/sharedfs.py [--models 10] [--cases 10000]

The ledger (``bench/ledger_scan.py``'s ``build_ledger``: one ``run-meta.json`` per case x
model) is written into the exported dir directly, as workers on other hosts would have left
it, then read through the mount. *Cold* is a fresh mount (``sshfs-local remount``: sshfs's
and the kernel's FUSE caches empty, every inode numbered afresh; the server's page cache is
warm, as on a file server that just served them); *warm* is the same read again at once
(sshfs keeps attributes and listings 20 s, the kernel 1 s). Figures, in this order:

- local disk: the straightforward reader (sorted glob, ``json.loads`` per file) and
  ``load_recorded_runs`` served from its index;
- sshfs cold: the straightforward reader; ``load_recorded_runs`` with no index (builds it);
- sshfs warm: ``load_recorded_runs`` served from the index just built; the straightforward
  reader;
- sshfs cold again (remounted): ``load_recorded_runs`` with the index of the last mount,
  which keys records by path there (sshfs numbers inodes per mount).

Every result is compared with the straightforward reader's; the script exits 1 if any
differs. Needs root for ``scripts/sshfs-local`` (it installs openssh-server and sshfs when
missing); the sshd and mount it starts are stopped before it exits. The last line::

    sharedfs: 100000 records, sshfs warm: baseline 231 s, indexed 15.3 s (15.1x); ...
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger_scan import baseline, build_ledger, timed

from run_support.ledger_cache import cache_path
from run_support.ledger_scan import RACY_WINDOW_NS
from run_support.results import load_recorded_runs

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "sshfs-local"
GOAL_RATIO = 3.0


def sshfs(state: Path, command: str) -> dict[str, str]:
    """Run ``scripts/sshfs-local COMMAND`` with this state dir; what it exports."""
    done = subprocess.run(
        ["bash", str(SCRIPT), command],
        env={**os.environ, "SSHFS_LOCAL_DIR": str(state)},
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if done.returncode != 0:
        raise SystemExit(f"sharedfs: sshfs-local {command} failed:\n{done.stderr}")
    lines = (line.removeprefix("export ") for line in done.stdout.splitlines())
    return dict(line.split("=", 1) for line in lines if "=" in line)


def drop_cache_files(batch_dir: Path) -> None:
    path = cache_path(batch_dir)
    for suffix in ("", "-wal", "-shm"):
        if path is not None:
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--cases", type=int, default=10_000)
    args = parser.parse_args(argv)

    state = Path(tempfile.mkdtemp(prefix="sharedfs-bench-", dir="/tmp"))
    local_root = Path(tempfile.mkdtemp(prefix="sharedfs-local-"))
    figures: dict[str, float] = {}
    identical = True
    try:
        exports = sshfs(state, "start")
        export = Path(exports["SSHFS_EXPORT"])
        built, records = timed(lambda: build_ledger(export / "batch", args.models, args.cases))
        build_ledger(local_root / "batch", args.models, args.cases)
        print(f"sharedfs: built {records} records twice (export, local) in {built:.1f} s each")
        os.sync()
        time.sleep(RACY_WINDOW_NS / 1e9 + 0.5)

        def measure(label: str, call: Callable[[], Any]) -> None:
            nonlocal identical
            seconds, got = timed(call)
            figures[label] = seconds
            same = dict(got) == expected and len(got) == records
            identical = identical and same
            load = "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
            differs = "" if same else " (result DIFFERS)"
            print(f"  {label}: {seconds:.2f} s{differs} ({load})", flush=True)

        local = local_root / "batch"
        expected = baseline(local)
        measure("local baseline", lambda: baseline(local))
        load_recorded_runs(local)
        measure("local indexed", lambda: load_recorded_runs(local))

        batch = Path(sshfs(state, "remount")["SSHFS_MOUNT"]) / "batch"
        measure("sshfs cold baseline", lambda: baseline(batch))
        sshfs(state, "remount")
        drop_cache_files(batch)
        measure("sshfs cold first (builds index)", lambda: load_recorded_runs(batch))
        measure("sshfs warm indexed", lambda: load_recorded_runs(batch))
        measure("sshfs warm baseline", lambda: baseline(batch))
        sshfs(state, "remount")
        measure("sshfs cold indexed (index of the last mount)", lambda: load_recorded_runs(batch))
    finally:
        sshfs(state, "stop")
        if not os.path.ismount(state / "mnt"):
            shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(local_root, ignore_errors=True)

    warm = figures["sshfs warm baseline"] / figures["sshfs warm indexed"]
    cold = figures["sshfs cold baseline"] / figures["sshfs cold indexed (index of the last mount)"]
    local_ratio = figures["local baseline"] / figures["local indexed"]
    print(
        f"sharedfs: {records} records, "
        f"sshfs warm: baseline {figures['sshfs warm baseline']:.2f} s, "
        f"indexed {figures['sshfs warm indexed']:.2f} s ({warm:.1f}x); "
        f"sshfs cold: baseline {figures['sshfs cold baseline']:.2f} s, "
        f"indexed {figures['sshfs cold indexed (index of the last mount)']:.2f} s ({cold:.1f}x); "
        f"local: {local_ratio:.1f}x; goal >= {GOAL_RATIO:.0f}x: "
        f"warm {'met' if warm >= GOAL_RATIO else 'NOT met'}, "
        f"cold {'met' if cold >= GOAL_RATIO else 'NOT met'}; "
        f"results {'identical' if identical else 'DIFFER'}"
    )
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
