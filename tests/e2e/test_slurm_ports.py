"""``scripts/slurm-local`` on a machine whose Slurm ports are taken: it comes up on free
ports of its own, runs a job, and its ``stop`` ends only the daemons it started.

The blockers stand in for a system Slurm (or anything else) listening on 6817/6818: a
slurm-local that took the default ports regardless died with ``Address already in use``
and every Slurm test errored.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "slurm-local"
DEFAULT_PORTS = (6817, 6818)


@pytest.fixture
def default_ports_taken() -> Iterator[None]:
    """Something listens on 6817 and 6818 for the test's length (a port another Slurm
    already holds, this suite's own included, counts as taken as well)."""
    held: list[socket.socket] = []
    for port in DEFAULT_PORTS:
        blocker = socket.socket()
        try:
            blocker.bind(("", port))
        except OSError:
            blocker.close()  # already taken: by the suite's Slurm, or the machine's
            continue
        blocker.listen()
        held.append(blocker)
    try:
        for port in DEFAULT_PORTS:
            probe = socket.socket()
            with pytest.raises(OSError), probe:
                probe.bind(("", port))
        yield
    finally:
        for blocker in held:
            blocker.close()


def daemon_pids(state_dir: Path) -> dict[str, int]:
    """The live daemons whose pid files are in this state dir, by name."""
    files = {
        "munged": state_dir / "munge" / "munged.pid",
        "slurmctld": state_dir / "run" / "slurmctld.pid",
        "slurmd": state_dir / "run" / "slurmd.pid",
    }
    live = {}
    for name, file in files.items():
        with contextlib.suppress(OSError, ValueError, psutil.Error):
            pid = int(file.read_text().strip())
            if psutil.Process(pid).name() == name:
                live[name] = pid
    return live


def run_script(state_dir: Path, command: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SLURM_LOCAL_DIR": str(state_dir)}
    for key in ("SLURM_LOCAL_CTLD_PORT", "SLURM_LOCAL_SLURMD_PORT", "SLURM_CONF"):
        env.pop(key, None)
    return subprocess.run(
        ["bash", str(SCRIPT), command],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_a_second_slurm_comes_up_on_free_ports_and_stops_only_itself(
    tmp_path_factory: pytest.TempPathFactory, default_ports_taken: None
) -> None:
    # A short path: munged's socket path must fit in a sockaddr_un.
    state_dir = tmp_path_factory.mktemp("sl")
    others_before = {p.pid for p in psutil.process_iter(["name"]) if p.info["name"] in _DAEMONS}
    try:
        started = run_script(state_dir, "start")
        assert started.returncode == 0, started.stderr
        assert started.stdout.strip() == f"export SLURM_CONF={state_dir / 'slurm.conf'}"
        conf = (state_dir / "slurm.conf").read_text()
        ports = {
            key: int(value)
            for key, value in re.findall(r"^(SlurmctldPort|SlurmdPort)=(\d+)$", conf, re.M)
        }
        assert set(ports) == {"SlurmctldPort", "SlurmdPort"}
        assert not set(ports.values()) & set(DEFAULT_PORTS), conf
        assert ports["SlurmctldPort"] != ports["SlurmdPort"]
        # `start` ran `srun hostname` on it; `status` sees the node up.
        assert "srun ran on" in started.stderr
        assert run_script(state_dir, "status").returncode == 0
        ours = daemon_pids(state_dir)
        assert set(ours) == {"munged", "slurmctld", "slurmd"}
    finally:
        stopped = run_script(state_dir, "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert daemon_pids(state_dir) == {}
    assert not any(psutil.pid_exists(pid) for pid in ours.values())
    # Whatever else ran before (the suite's own Slurm, a system one) still runs.
    assert all(psutil.pid_exists(pid) for pid in others_before)


_DAEMONS = {"munged", "slurmctld", "slurmd"}
