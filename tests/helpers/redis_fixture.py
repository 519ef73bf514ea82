"""A real Redis for the tests: Debian's ``redis-server`` on a free port of 127.0.0.1.

``local_redis`` (session scope) installs ``redis-server`` through ``scripts/apt-install``
when it is missing (as ``scripts/slurm-local`` installs Slurm), starts one of its own in a
temporary dir (no saving to disk, no other client's data), waits until it answers, and
stops exactly that process (by its pid) at the end. When it cannot be started the test
FAILS with the reason; it never skips. Under pytest-xdist the tests that use it share one
worker (``xdist_group("redis")``, tests/conftest.py).

Use it with ``pytest_plugins = ("helpers.redis_fixture",)``.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

APT_INSTALL = Path(__file__).resolve().parents[2] / "scripts" / "apt-install"
START_TIMEOUT = 30.0


@attrs.frozen
class LocalRedis:
    port: int

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as connection:
            connection.sendall(b"PING\r\n")
            return connection.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _installed() -> str:
    found = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
    )
    if found is None:
        log = Path(tempfile.gettempdir()) / "batch-ledger-apt-redis.log"
        done = subprocess.run(
            [str(APT_INSTALL), str(log), "redis-server"], capture_output=True, text=True
        )
        if done.returncode != 0:
            pytest.fail(f"cannot install redis-server: {done.stderr.strip()}")
        found = shutil.which("redis-server") or "/usr/bin/redis-server"
    return found


@contextlib.contextmanager
def running_redis() -> Iterator[tuple[LocalRedis, subprocess.Popen[bytes]]]:
    """A ``redis-server`` of its own for the ``with`` block, and its process (a test may
    stop it early, by its pid, to see what a driver does when its store goes away)."""
    program = _installed()
    directory = tempfile.mkdtemp(prefix="batch-ledger-redis-")
    port = _free_port()
    log = Path(directory) / "redis.log"
    argv = [program, "--port", str(port), "--bind", "127.0.0.1", "--dir", directory,
            "--save", "", "--appendonly", "no", "--logfile", str(log)]  # fmt: skip
    server = subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _answers(port):
            if server.poll() is not None or time.monotonic() > deadline:
                text = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                pytest.fail(f"redis-server did not start on port {port}: {text}")
            time.sleep(0.05)
        yield LocalRedis(port), server
    finally:
        if server.poll() is None:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def local_redis() -> Iterator[LocalRedis]:
    with running_redis() as (redis, _):
        yield redis
