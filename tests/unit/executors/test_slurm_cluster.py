"""dask-jobqueue's ``SLURMCluster`` against the real one-node Slurm of ``scripts/slurm-local``.

This is the ground the ``executor: {kind: slurm}`` integration stands on: worker jobs
submitted with ``sbatch`` under a name tied to the batch, tasks that run inside a Slurm
allocation, and a closed cluster that leaves nothing of that name in the queue.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from distributed import Client
from helpers.fake_jobs import wait_until

if TYPE_CHECKING:
    from dask_jobqueue import SLURMCluster
    from helpers.slurm_fixture import LocalSlurm

#: Brings the session fixture ``local_slurm``.
pytest_plugins = ("helpers.slurm_fixture",)

TESTS = Path(__file__).resolve().parent  # tests/unit/executors


def make_cluster(slurm: LocalSlurm, job_name: str, directory: Path) -> SLURMCluster:
    return slurm.cluster_class()(
        queue=slurm.partition,
        job_name=job_name,
        cores=1,
        processes=1,
        memory="1GiB",
        walltime="00:10:00",
        python=sys.executable,
        # Everything on loopback, and no fixed dashboard port to collide with other runs.
        scheduler_options={"host": "127.0.0.1", "dashboard_address": ":0"},
        # A worker whose scheduler is gone (driver killed) ends its Slurm job this soon.
        death_timeout=30,
        local_directory=str(directory / "worker-space"),
        log_directory=str(directory / "worker-logs"),
    )


def test_slurm_cluster_runs_tasks_in_slurm_jobs_and_leaves_no_job_behind(
    local_slurm: LocalSlurm, tmp_path: Path
) -> None:
    job_name = f"batch-ledger-test-{uuid.uuid4().hex[:8]}"
    cluster = make_cluster(local_slurm, job_name, tmp_path)
    try:
        assert f"#SBATCH -J {job_name}" in cluster.job_script()
        cluster.scale(2)
        with Client(cluster) as client:
            client.wait_for_workers(2, timeout=60)
            submitted = {job.job_id for job in cluster.workers.values()}
            assert len(submitted) == 2
            assert set(local_slurm.squeue_ids(job_name)) == submitted

            # os.getenv travels by reference (workers cannot import this test module) and
            # runs in the worker process: the id of the Slurm job the worker lives in.
            seen = client.run(os.getenv, "SLURM_JOB_ID")
            assert set(seen.values()) == submitted
            task = client.submit(os.getenv, "SLURM_JOB_ID", pure=False)
            assert task.result(timeout=30) in submitted
    finally:
        cluster.close()
        leftover_ok = wait_until(lambda: not local_slurm.squeue_ids(job_name), timeout=20)
        if not leftover_ok:
            local_slurm.scancel_name(job_name)
    assert leftover_ok, f"jobs named {job_name} still queued after close"


def test_importing_slurm_cluster_keeps_the_ctrl_c_handler() -> None:
    # A fresh interpreter: dask_jobqueue is imported once per process. The reload shows the
    # module really does replace the handler, so the first check is not vacuous.
    check = """
import importlib, signal
from helpers.slurm_fixture import import_slurm_cluster
import_slurm_cluster()
assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, "handler replaced"
import dask_jobqueue.runner
importlib.reload(dask_jobqueue.runner)
assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler, "upstream fixed"
"""
    done = subprocess.run(
        [sys.executable, "-c", check],
        cwd=TESTS.parent.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
