"""The durable floor: what keeping a record of every job costs a Python program here.

    .venv/bin/python bench/durable_floor.py DIRECTORY JOBS [CONCURRENCY]

Runs JOBS jobs of ``/usr/bin/true``, CONCURRENCY (4) at a time on one asyncio event loop,
and does for each the file work ``batch`` promises and nothing else: a run dir, its
``output.log`` as the job's stdout and stderr, the job in its own session with a few
variables of its own, its end seen through a pidfd, the failed look for ``result.json``,
a 30-field JSON record written to a temp file, fsynced, renamed into place and its directory
fsynced (in a thread, as ``batch`` does), and a line appended to a journal. No scheduler,
summary, events, display, watchdog or ledger index.

``bench/overhead.py`` runs it beside ``batch``, GNU parallel and ``xargs``: the gap between
it and ``xargs`` is what durability and Python cost before any of ``batch``'s own work.
Prints nothing; exits 1 if a job failed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import subprocess
import sys
import time


def write_record(run_dir: str, data: bytes, journal: str) -> None:
    tmp = os.path.join(run_dir, ".run-meta.json.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
        os.replace(tmp, os.path.join(run_dir, "run-meta.json"))
    finally:
        os.close(fd)
    directory = os.open(run_dir, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    line = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(line, data[:200].replace(b"\n", b" ") + b"\n")
    finally:
        os.close(line)


async def run_job(
    number: int,
    root: str,
    slots: asyncio.Semaphore,
    files: concurrent.futures.Executor,
    base_env: dict[str, str],
) -> int:
    async with slots:
        run_dir = os.path.join(root, f"c{number:05d}")
        os.mkdir(run_dir)
        log = os.open(
            os.path.join(run_dir, "output.log"),
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND,
            0o644,
        )
        started = time.time()
        env = {
            **base_env,
            "BATCH_RUN_DIR": run_dir,
            "BATCH_CASE": f"c{number}",
            "BATCH_JOB_TOKEN": f"t.{number}",
        }
        try:
            process = await asyncio.create_subprocess_exec(
                "/usr/bin/true",
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                start_new_session=True,
            )
        finally:
            os.close(log)
        returncode = await process.wait()
        with contextlib.suppress(FileNotFoundError):
            os.close(os.open(os.path.join(run_dir, "result.json"), os.O_RDONLY))
        record: dict[str, object] = {f"field_{n}": f"value {n} of {number}" for n in range(28)}
        record.update(exit_code=returncode, duration_seconds=time.time() - started)
        data = json.dumps(record, indent=2).encode()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(files, write_record, run_dir, data, os.path.join(root, "j"))
        return returncode


async def main(root: str, jobs: int, concurrency: int) -> int:
    if hasattr(asyncio, "PidfdChildWatcher") and sys.version_info < (3, 12):
        watcher = asyncio.PidfdChildWatcher()
        watcher.attach_loop(asyncio.get_running_loop())
        asyncio.set_child_watcher(watcher)
    slots = asyncio.Semaphore(concurrency)
    with concurrent.futures.ThreadPoolExecutor(concurrency + 2) as files:
        base_env = dict(os.environ)  # once, as batch builds each model's environment once
        codes = await asyncio.gather(
            *(run_job(n, root, slots, files, base_env) for n in range(jobs))
        )
    return 1 if any(codes) else 0


if __name__ == "__main__":
    os.makedirs(sys.argv[1])
    concurrency = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    sys.exit(asyncio.run(main(sys.argv[1], int(sys.argv[2]), concurrency)))
