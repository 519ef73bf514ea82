"""``scripts/slurm-local``'s node: as many CPUs as this process may use, whatever the
environment of the process that starts it says (no Slurm needed to check)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "slurm-local"


def test_the_node_gets_every_usable_cpu_even_under_omp_num_threads_1(tmp_path: Path) -> None:
    # A test process that imported Dask has OMP_NUM_THREADS=1, and GNU nproc honours it:
    # a one-CPU node ran one worker job at a time, and a two-worker cluster never started.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SLURM_LOCAL_DIR": str(tmp_path)}
    done = subprocess.run(
        ["bash", str(SCRIPT), "conf"], env=env, capture_output=True, text=True, check=True
    )
    (node,) = [line for line in done.stdout.splitlines() if line.startswith("NodeName=")]
    cpus = re.search(r"\bCPUs=(\d+)\b", node)
    assert cpus is not None, node
    assert int(cpus.group(1)) == len(os.sched_getaffinity(0))
    assert not any(tmp_path.iterdir())  # conf writes nothing
