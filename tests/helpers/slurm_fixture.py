"""A real one-node Slurm for the tests, started by ``scripts/slurm-local``.

``local_slurm`` (session scope) runs ``scripts/slurm-local start``, which installs the
Debian packages when missing, starts munged/slurmctld/slurmd, or reuses the ones already
running, and returns once ``srun hostname`` works. It then points this process's
``SLURM_CONF`` at that Slurm, so ``sbatch``/``squeue``/``scancel`` run by dask-jobqueue or
by a test find it. When Slurm cannot be started the test FAILS with the script's reason
(its last log lines); it never skips.

Each test session has a Slurm of its own: its state dir (slurm.conf, munge key and socket,
spool, pid files) is a temporary dir of this session, its ports free ones when 6817/6818 are
taken, so it never collides with a Slurm the machine or another test run already has; at
the end of the session ``scripts/slurm-local stop`` ends exactly its daemons and the dir is
removed. Under pytest-xdist the Slurm tests share one worker (``xdist_group("slurm")``),
so one Slurm serves them all.

Use it in a test module with ``pytest_plugins = ("helpers.slurm_fixture",)`` (importing names from
this module there instead keeps pytest from rewriting its asserts), and get ``SLURMCluster``
from ``local_slurm.cluster_class()``, never by importing dask_jobqueue at a module's top:
dask-jobqueue 0.9.0 replaces the process's SIGINT handler on import (dask/dask-jobqueue#696),
which would turn every Ctrl-C of the test run into a quiet exit 0.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import psutil
import pytest

from helpers.setup_scripts import run_start, run_stop

if TYPE_CHECKING:
    from dask_jobqueue import SLURMCluster

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "slurm-local"
#: Generous: a first start on a fresh machine installs the packages with apt-get.
START_TIMEOUT = 600.0


@attrs.frozen
class LocalSlurm:
    """A running Slurm: its client config and partition, and how long it took to get."""

    conf: Path
    partition: str
    start_seconds: float

    def cluster_class(self) -> type[SLURMCluster]:
        """``SLURMCluster``, imported without losing Ctrl-C (see ``import_slurm_cluster``)."""
        return import_slurm_cluster()

    def squeue_ids(self, job_name: str) -> list[str]:
        """Ids of this name's jobs still in the queue (pending, running or completing)."""
        out = subprocess.run(
            ["squeue", "-h", "-n", job_name, "-o", "%i"],
            env={**os.environ, "SLURM_CONF": str(self.conf)},
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
        return out.split()

    def processes(self, job_name: str) -> list[str]:
        """The processes still alive that run in a Slurm job of this name (a worker, or a
        job it started), each as ``pid command``: what a cancelled job must not leave."""
        left = []
        for process in psutil.process_iter(["pid", "cmdline"]):
            with contextlib.suppress(psutil.Error):
                if process.environ().get("SLURM_JOB_NAME") == job_name:
                    left.append(f"{process.pid} {' '.join(process.info['cmdline'] or [])}")
        return left

    def scancel_name(self, job_name: str) -> None:
        """Cancel every job of this name: the way to clean up after a lost client."""
        subprocess.run(
            ["scancel", "-n", job_name],
            env={**os.environ, "SLURM_CONF": str(self.conf)},
            capture_output=True,
            check=False,
            timeout=30,
        )


def import_slurm_cluster() -> type[SLURMCluster]:
    """``dask_jobqueue.SLURMCluster``, imported with this process's SIGINT handler kept.

    dask-jobqueue 0.9.0 runs ``signal.signal(SIGINT, lambda *_: sys.exit())`` when
    ``dask_jobqueue.runner`` is first imported (every cluster class imports it); fixed
    upstream by dask/dask-jobqueue#697, not yet released.
    """
    handler = signal.getsignal(signal.SIGINT)
    try:
        from dask_jobqueue import SLURMCluster
    finally:
        signal.signal(signal.SIGINT, handler)
    return SLURMCluster


def start_local_slurm() -> LocalSlurm:
    """Start (or reuse) the local Slurm; ``pytest.fail`` with the script's reason if not."""
    began = time.monotonic()
    exports = run_start(SCRIPT, "Slurm could not be started", START_TIMEOUT)
    elapsed = time.monotonic() - began
    if "SLURM_CONF" not in exports:
        pytest.fail(f"scripts/slurm-local start printed no SLURM_CONF line: {exports!r}")
    partition = os.environ.get("SLURM_LOCAL_PARTITION", "debug")
    return LocalSlurm(conf=Path(exports["SLURM_CONF"]), partition=partition, start_seconds=elapsed)


@pytest.fixture(scope="session")
def local_slurm() -> Iterator[LocalSlurm]:
    state = tempfile.mkdtemp(prefix="batch-ledger-slurm-", dir="/tmp")
    os.chmod(state, 0o755)  # munged refuses a socket in a dir others cannot search
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SLURM_LOCAL_DIR", state)
        try:
            slurm = start_local_slurm()
            # dask-jobqueue runs sbatch/scancel with this process's environment.
            patch.setenv("SLURM_CONF", str(slurm.conf))
            yield slurm
        finally:
            run_stop(SCRIPT)
            shutil.rmtree(state, ignore_errors=True)
