"""A real podman for the tests, set up by ``scripts/podman-local``.

``local_podman`` (session scope) runs ``scripts/podman-local start``, which installs
``podman runc busybox-static`` when missing, writes a ``containers.conf`` this VM accepts
and a ``storage.conf`` whose containers live under its own state dir (never the system's
podman storage), and returns once a container starts. It then points this process's
``CONTAINERS_CONF`` and ``CONTAINERS_STORAGE_CONF`` at that setup, so every ``batch`` and
job a test starts uses it. When podman cannot be set up the test FAILS with the script's
reason; it never skips.

``podman`` (per test) gives the test a sweep name of its own; batch dirs, and so the labels
of the containers its jobs start, begin with it. At the end of the test every container
whose label begins with it is removed, and only those: a test never touches a container it
did not start.

Use it with ``pytest_plugins = ("helpers.podman_fixture",)``.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from helpers.setup_scripts import run_start

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "podman-local"
#: Generous: a first start on a fresh machine installs the packages with apt-get.
START_TIMEOUT = 600.0
LABEL_KEY = "batch-ledger.run"


@attrs.frozen
class LocalPodman:
    """podman set up for the tests: its environment and a root filesystem to run."""

    env: dict[str, str]
    rootfs: Path

    def labelled(self, prefix: str) -> dict[str, str]:
        """id → label value of every container (running or not) whose label value begins
        with ``prefix``."""
        ids = self.podman("ps", "--all", "--quiet", "--no-trunc", "--filter", f"label={LABEL_KEY}")
        if not ids.split():
            return {}
        out = self.podman("inspect", "--type", "container", *ids.split(), check=False)
        found = {}
        # JSON, not lines of a template: a label value may hold a newline.
        for item in json.loads(out or "[]"):
            value = ((item.get("Config") or {}).get("Labels") or {}).get(LABEL_KEY, "")
            if item.get("Id") in ids.split() and value.startswith(prefix):
                found[item["Id"]] = value
        return found

    def remove(self, prefix: str) -> None:
        """Remove the containers whose label value begins with ``prefix`` (and no other)."""
        ids = sorted(self.labelled(prefix))
        if ids:
            self.podman("rm", "--force", "--time", "0", *ids, check=False)

    def podman(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(
            ["podman", *args],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)}: {done.stderr}")
        return done.stdout


@attrs.frozen
class PodmanTest:
    """One test's podman: ``name`` for its sweep, so its containers' labels start with it."""

    local: LocalPodman
    name: str

    def left(self) -> dict[str, str]:
        """The containers of this test's batches still there (id → label value)."""
        return self.local.labelled(self.name + "-")


def start_local_podman() -> LocalPodman:
    """Set up (or reuse) podman; ``pytest.fail`` with the script's reason if not."""
    env = run_start(SCRIPT, "podman could not be set up", START_TIMEOUT)
    if "PODMAN_LOCAL_ROOTFS" not in env:
        pytest.fail(f"scripts/podman-local start printed no PODMAN_LOCAL_ROOTFS: {env!r}")
    rootfs = Path(env.pop("PODMAN_LOCAL_ROOTFS"))
    return LocalPodman(env=env, rootfs=rootfs)


@pytest.fixture(scope="session")
def local_podman() -> Iterator[LocalPodman]:
    podman = start_local_podman()
    with pytest.MonkeyPatch.context() as patch:
        for name, value in podman.env.items():
            # Every batch, watchdog and job the tests start inherits them.
            patch.setenv(name, value)
        yield podman


@pytest.fixture
def podman(local_podman: LocalPodman) -> Iterator[PodmanTest]:
    test = PodmanTest(local_podman, f"ctr{secrets.token_hex(4)}")
    try:
        yield test
    finally:
        local_podman.remove(test.name + "-")
