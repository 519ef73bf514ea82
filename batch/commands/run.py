"""``batch SWEEP``: one invocation, end to end.

Load the sweep and find the batch dir (:mod:`batch.plan.planner`), take the batch dir's lock,
stop leftovers of a dead driver, decide every job against the ledger, keep the resolved
sweep beside the results, then execute the plan (:mod:`batch.execution`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from batch.display.next_steps import typed_command
from batch.display.plain import Display, make_display
from batch.errors import BatchDirUnwritable, ExitStatus, RecordWriteError
from batch.execution.execute import Execution
from batch.executors.select import check_executor
from batch.layout import LOGS_DIR, PGIDS, SNAPSHOT, snapshot_history_name
from batch.plan import batch_dir as batchdir
from batch.plan.case_order import write_seed
from batch.plan.lock import BatchLock
from batch.plan.planner import Plan, RunOptions, decide_jobs, prepare_plan
from batch.pools.connect import open_store
from batch.pools.store import PoolStore, PoolStoreError
from batch.processes.watchdog import reap_leftovers
from batch.sweep.features.containers import ContainerSpec
from batch.sweep.load import Sweep
from batch.sweep.secrets import redactor, secret_values
from batch.sweep.snapshot import read_snapshot, snapshot_data, snapshot_text
from run_support.atomic import atomic_write_bytes
from run_support.heap import built_then_frozen, thawed_after
from run_support.results import Ledger, utc_stamp
from run_support.safe_files import open_fd


# The heap policy (run_support.heap): the plan, the sweep and the Execution live as long as
# the driver; built with the collector paused and frozen, no collection walks them (100,000
# jobs: millions of objects), and they are unfrozen when the run is over.
@thawed_after()
def run_main(
    sweep_path: Path,
    options: RunOptions,
    *,
    out: TextIO,
    err: TextIO,
    program: tuple[str, ...] = ("batch",),
) -> ExitStatus:
    """Run (or resume) a sweep; returns the exit status, or raises a
    :class:`~batch.errors.BatchError` before the first job starts. ``program`` is how the
    user ran batch (``../../.venv/bin/batch``), for the hints."""
    with built_then_frozen():
        plan = prepare_plan(sweep_path, options)
    check_executor(plan.sweep.executor, workers=plan.sweep.uses_workers)
    if plan.sweep.containers is not None and plan.sweep.executor.kind == "local":
        # Before the batch dir is made: a sweep whose engine is missing runs nothing.
        from batch.processes.containers import check_engine

        check_engine(plan.sweep.containers, plan.sweep.path)
    # Before the batch dir is made: a pool store that cannot be reached runs nothing (never
    # a sweep with no limit on a key others share).
    pools_store = _open_pools_store(plan.sweep)
    try:
        if plan.batch_dir is None:
            plan.batch_dir = batchdir.create_batch_dir(plan.sweep.output, plan.sweep.name)
        lock = BatchLock(plan.batch_dir)
        lock.acquire()  # or LockedError, naming the holder
    except OSError as exc:
        where = exc.filename if exc.filename is not None else plan.sweep.output
        why = "not a directory" if isinstance(exc, FileExistsError) else exc.strerror or exc
        raise BatchDirUnwritable(where, why) from exc
    secrets = secret_values(plan.sweep.env, *(model.env for model in plan.sweep.models))
    # Built once: it runs on every display line and event.
    redact = redactor(secrets)
    display = make_display(stream=out, progress=options.progress, redact=redact)
    try:
        # Decided under the lock: no other driver can add records while this one plans.
        with built_then_frozen(), Ledger(plan.batch_dir) as ledger:
            ledger.remove_old_files()
            decide_jobs(plan, options, ledger)
        if lock.took_over:
            pid, host = lock.took_over
            display.message(f"warning: took over the lock of a dead driver (pid {pid} on {host})")
        reaped = reap_leftovers(plan.batch_dir, grace=plan.sweep.kill_grace)
        if reaped.groups:
            display.message(
                f"stopped {len(reaped.groups)} leftover job process group(s) of a dead driver"
            )
        if reaped.escaped:
            display.message(
                f"stopped {len(reaped.escaped)} leftover job process(es) of a dead driver "
                "outside their job's group"
            )
        for pgid, why in sorted(reaped.left_alone.items()):
            display.message(
                f"warning: left process group {pgid} of {PGIDS} alone: not this batch's job ({why})"
            )
        if plan.sweep.containers is not None and plan.resuming:  # a new batch dir has none
            _reap_containers(plan.sweep.containers, plan.batch_dir.name, plan.sweep.env, display)
        if plan.changes:
            display.message("the sweep changed since this batch last ran:")
            for line in plan.changes:
                display.message(f"  {line}")
        for rel_path, reason in plan.unreadable:
            display.message(f"warning: unreadable record {rel_path}: {reason} (job runs again)")
        try:
            if plan.sweep.stop_when is not None and plan.sweep.stop_when.seed is not None:
                write_seed(plan.batch_dir, plan.sweep.stop_when.seed)  # before any job runs
            _write_snapshot(plan)
        except OSError as exc:
            raise BatchDirUnwritable(exc.filename, exc.strerror or exc) from exc
        except RecordWriteError as exc:
            raise BatchDirUnwritable(exc.path, exc.error.strerror or exc.error) from exc
        try:
            with built_then_frozen():
                execution = Execution(
                    plan,
                    display,
                    redact,
                    frozenset(secrets),
                    halt=options.halt,
                    deadline=options.deadline,
                    command=typed_command(sweep_path, options, program),
                    pools_store=pools_store,
                )
        except OSError as exc:  # events.jsonl a directory, a FIFO, a symlink...
            raise BatchDirUnwritable(exc.filename, exc.strerror or exc) from exc
        viewer = _start_view(plan.batch_dir, secrets, display) if options.view else None
        try:
            return asyncio.run(_executed(execution, lock))
        finally:
            if viewer is not None:
                _stop_view(viewer)
    finally:
        display.close()
        lock.release()


def _open_pools_store(sweep: Sweep) -> PoolStore | None:
    """The store of the pools the sweep's models name; None when they name none."""
    if not any(sweep.pool_of(model.id) for model in sweep.models):
        return None
    try:
        return open_store(sweep.pools_store)
    except PoolStoreError as exc:
        raise PoolStoreError(f"{sweep.path}: {exc}") from None


#: Seconds the view has to print its URL.
VIEW_START_TIMEOUT = 15.0


def _start_view(
    batch_dir: Path, secrets: set[str], display: Display
) -> subprocess.Popen[bytes] | None:
    """``batch view BATCH_DIR`` beside the run, in its own session (Ctrl-C in this terminal
    is the sweep's, not the view's): its URL is said first. It watches this driver's pid
    and ends when the driver does, however it ends; a view that fails is a warning only."""
    argv = [sys.executable, "-m", "batch.cli", "view", str(batch_dir), "--port", "0",
            "--beside", str(os.getpid()), "--secrets-stdin"]  # fmt: skip
    try:
        viewer = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        display.message(f"warning: --view: cannot start batch view: {exc.strerror}")
        return None
    assert viewer.stdin is not None and viewer.stdout is not None
    # The sweep's secrets, for the view to redact; on a pipe, never in argv or the env.
    with contextlib.suppress(OSError):
        viewer.stdin.write(json.dumps(sorted(secrets)).encode())
        viewer.stdin.close()
    ready, _, _ = select.select([viewer.stdout], [], [], VIEW_START_TIMEOUT)
    line = viewer.stdout.readline().decode("utf-8", "replace").strip() if ready else ""
    if not line.startswith("http"):
        display.message("warning: --view: batch view did not start; the sweep goes on without it")
        _stop_view(viewer)
        return None
    display.message(f"view: {line}")
    return viewer


def _stop_view(viewer: subprocess.Popen[bytes]) -> None:
    """End the view this run started (by its pid), waiting briefly for it."""
    if viewer.poll() is None:
        viewer.terminate()
        try:
            viewer.wait(5)
        except subprocess.TimeoutExpired:
            viewer.kill()
            viewer.wait()
    if viewer.stdout is not None:
        viewer.stdout.close()


def _reap_containers(
    spec: ContainerSpec, batch_id: str, sweep_env: Mapping[str, str], display: Display
) -> None:
    """Remove the containers a dead driver's attempts left: every one of this batch whose
    attempt has no live process here (after ``reap_leftovers``, none of that driver's)."""
    from batch.processes.containers import alive_labels, engine_env, remove_orphans, run_now

    if shutil.which(spec.engine) is None:
        return  # the jobs run elsewhere (a cluster's hosts), with no engine on this one
    removal = run_now(remove_orphans(spec, batch_id, alive_labels(), engine_env(sweep_env)))
    if removal.removed:
        display.message(f"removed {removal.removed} leftover container(s) of a dead driver")
    if removal.warning is not None:
        display.message(f"warning: {removal.warning}")


async def _executed(execution: Execution, lock: BatchLock | None = None) -> ExitStatus:
    """Run the sweep; every ``LOCK_CHECK`` seconds ``driver.lock`` is made again should a job
    have removed it."""
    keeper = None if lock is None else asyncio.create_task(_keep_lock(lock, execution))
    try:
        return await execution.run()
    finally:
        if keeper is not None:
            keeper.cancel()


#: Seconds between two checks that ``driver.lock`` is still this driver's.
LOCK_CHECK = 1.0


async def _keep_lock(lock: BatchLock, execution: Execution) -> None:
    while True:
        await asyncio.sleep(LOCK_CHECK)
        said = lock.keep()
        if said is not None:
            execution.display.message(said)


def _write_snapshot(plan: Plan) -> None:
    """Keep the resolved sweep beside the results; a resume with a sweep other than the one
    the batch last ran adds a copy, so the newest snapshot is always what ran last."""
    assert plan.batch_dir is not None
    data = snapshot_data(plan.sweep)
    path = plan.batch_dir / SNAPSHOT
    if os.path.lexists(path):
        try:
            # A symlink, FIFO or directory in the snapshot's place is refused, not read.
            os.close(open_fd(path, os.O_RDONLY))
        except OSError as exc:
            raise RecordWriteError(path, exc) from exc
        # Read and compared already while deciding, under the same lock.
        if plan.snapshot_current or _same_sweep(batchdir.latest_snapshot(plan.batch_dir), data):
            return
        path = plan.batch_dir / LOGS_DIR / snapshot_history_name(utc_stamp().replace(":", ""))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # In batch-logs/ (a changed sweep's), that must be a real directory.
        real_dirs = 0 if path.parent == plan.batch_dir else 1
        atomic_write_bytes(path, snapshot_text(data).encode(), real_dirs=real_dirs)
    except OSError as exc:
        raise RecordWriteError(path, exc) from exc


def _same_sweep(latest: tuple[Path, str] | None, data: dict[str, Any]) -> bool:
    """Whether the batch's latest snapshot records this sweep (compared as data: writing
    10,000 cases as YAML costs seconds, reading them a fraction)."""
    if latest is None:
        return False
    try:
        return bool(read_snapshot(latest[1]) == data)
    except ValueError:
        return False
