"""A real network filesystem for the tests: sshfs over loopback, by ``scripts/sshfs-local``.

``sshfs_mount`` (session scope) runs ``scripts/sshfs-local start`` with a state dir of its
own under /tmp (installing openssh-server and sshfs when missing; an sshd on a free port of
127.0.0.1, never the machine's), and yields the mount point: every file written under it
travels through FUSE, SFTP and sshd to the exported dir. At the end of the session it runs
``stop``, which unmounts and ends exactly that sshd, and removes the state dir. When it
cannot be started the test FAILS with the script's reason; it never skips.

``remount_sshfs`` (per test) is a call that unmounts it and mounts it again, as a client
that starts cold: sshfs's and the kernel's caches empty, every inode numbered afresh.

Use them with ``pytest_plugins = ("helpers.sshfs_fixture",)``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from helpers.setup_scripts import run_start, run_stop

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "sshfs-local"
#: Generous: a first start on a fresh machine installs the packages with apt-get.
START_TIMEOUT = 600.0


@pytest.fixture(scope="session")
def sshfs_mount() -> Iterator[Path]:
    state = tempfile.mkdtemp(prefix="batch-ledger-sshfs-", dir="/tmp")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SSHFS_LOCAL_DIR", state)
        try:
            exports = run_start(SCRIPT, "sshfs could not be mounted", START_TIMEOUT)
            yield Path(exports["SSHFS_MOUNT"])
        finally:
            run_stop(SCRIPT)
            # Only once nothing is mounted there: a mount still up would lead rmtree into
            # the exported dir through the network.
            if not os.path.ismount(Path(state) / "mnt"):
                shutil.rmtree(state, ignore_errors=True)


@pytest.fixture
def remount_sshfs(sshfs_mount: Path) -> Callable[[], None]:
    def remount() -> None:
        run_start(SCRIPT, "sshfs could not be remounted", START_TIMEOUT, command="remount")

    return remount
