"""Resume at scale: the first ``batch plan --resume`` after a crash on a 100,000-record batch.

    .venv/bin/python bench/resume_scale.py [--models 10] [--cases 10000] [--repeat 3]
                                           [--dir DIR] [--plan-format table] [--no-cold]
                                           [--no-pyc]

Each repetition builds, in a fresh directory, a batch exactly as a driver leaves it when it
dies: the real driver (``batch sweep.yaml``, jobs ``touch``) is started on a sweep of
``--models`` x ``--cases`` plain-id cases, SIGKILLed once it has recorded a few runs, and
every other (case, model) then gets its record through the runner's write path
(``write_run_meta``, runner's run dir names, its row in the ledger cache; four writer
processes at once, as Dask workers on one host; without fsync, to build in minutes rather
than hours — the files are the same). Then, in this order:

- warm: the straightforward reader (sorted glob, ``json.loads`` + ``run_meta_from_dict`` per
  record, newest per pair by ``record_order``; in this process, so no interpreter start is
  charged to it) and ``batch plan sweep.yaml --resume`` (a process of its own, from start to
  exit, its peak RSS from ``wait4`` in a small launcher that forks it: see ``_MEASURED``).
  ``plan`` writes nothing, so it meets the batch as the driver left it every time;
- the ledger read alone: ``load_recorded_runs(batch_dir)`` in this
  process, what ``plan`` does with the ledger, compared with the same reader (warm, cold);
- cold: all three again after ``sync; echo 3 > /proc/sys/vm/drop_caches`` (root only; when the
  kernel refuses, the script says so and prints no cold figures);
- resume: 1,000 records removed (the run dirs stay, as a killed run leaves them), then the
  time from starting ``batch sweep.yaml --resume`` to its first job's ``touch``; the driver
  is then SIGKILLed.

Every ``batch`` process runs as an installed ``batch`` does: with its modules' bytecode
compiled once beforehand (into a ``PYTHONPYCACHEPREFIX`` under the bench's temp dir, filled
by a small sweep and its plan before the first build, as in ``bench/overhead.py``), where
``PYTHONDONTWRITEBYTECODE`` in this machine's environment would otherwise make every run
compile every module again (≈ 0.15 s). ``--no-pyc`` measures it that way.

Every plan must carry every record and run nothing; the script exits 1 otherwise. The batch
dirs are deleted only after the last repetition (mass deletes slow the disk down). Figures
are medians over the repetitions; the machine's load is printed with them.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

from batch.layout import model_dir_name, run_dir_name, run_stamp
from run_support.jsonio import BACKEND
from run_support.results import (
    RUN_META,
    InvalidRecord,
    RunMeta,
    load_recorded_runs,
    record_order,
    run_meta_from_dict,
    utc_stamp,
    write_run_meta,
)

GOAL_WARM_SECONDS = 2.0
GOAL_WARM_RATIO = 4.0
GOAL_COLD_RATIO = 3.0
GOAL_RSS_MB = 200.0
GOAL_FIRST_JOB_SECONDS = 3.0
REMOVED = 1_000
WRITERS = 4
_OUTCOMES = (("passed", None), ("passed", None), ("failed", "model_failure"))


def batch_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "batch.cli", *args]


#: The environment of every ``batch`` process (see the module's docstring on bytecode).
BATCH_ENV: dict[str, str] | None = None


def use_bytecode_cache(pycache: Path) -> None:
    """Run ``batch`` with its bytecode kept in ``pycache``, compiled before measuring."""
    global BATCH_ENV
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    BATCH_ENV = env
    # With a prefix Python looks for every module's bytecode there, the standard library's
    # and the dependencies' too: a small sweep and its plan import what the measured do.
    warm_up = pycache.parent / "warm-up"
    warm_up.mkdir()
    sweep = write_sweep(warm_up, 1, 2)
    for argv in (batch_argv(str(sweep)), batch_argv("plan", str(sweep), "--resume")):
        subprocess.run(argv, cwd=warm_up, env=env, stdout=subprocess.DEVNULL, check=True)


def write_sweep(directory: Path, models: int, cases: int) -> Path:
    sweep = {
        "name": "scale",
        "output": "runs",
        "cases": [f"case-{c:05d}" for c in range(cases)],
        "models": [f"provider/model-{m}:latest" for m in range(models)],
        "command": ["touch", str(directory / "started")],
        "max_concurrent": 2,
    }
    path = directory / "sweep.yaml"
    path.write_text(json.dumps(sweep), encoding="utf-8")  # JSON is YAML
    return path


def recorded_pairs(batch_dir: Path) -> set[tuple[str, str]]:
    pairs = set()
    for path in batch_dir.glob(f"*/*/{RUN_META}"):
        raw = json.loads(path.read_bytes())
        pairs.add((raw["test_case"], raw["model"]))
    return pairs


def build(directory: Path, models: int, cases: int) -> tuple[Path, Path]:
    """A batch dir as a driver SIGKILLed mid-sweep leaves it, every pair recorded."""
    directory.mkdir(parents=True)
    sweep = write_sweep(directory, models, cases)
    driver = subprocess.Popen(
        batch_argv(str(sweep), "--no-progress"),
        cwd=directory,
        env=BATCH_ENV,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    runs = directory / "runs"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(list(runs.glob(f"*/*/*/{RUN_META}"))) < 5:
        time.sleep(0.05)
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    (batch_dir,) = runs.iterdir()
    done = recorded_pairs(batch_dir)
    if not done:
        raise SystemExit("resume_scale: the driver recorded no run before it was killed")
    started = time.time()
    # Several writers at once, as Dask workers on one host: the build takes minutes, not
    # tens of minutes, and their cache rows must all land.
    with ProcessPoolExecutor(WRITERS) as pool:
        list(
            pool.map(
                partial(write_model, batch_dir, cases, done, started), range(models), chunksize=1
            )
        )
    os.sync()
    (directory / "started").unlink(missing_ok=True)
    return sweep, batch_dir


def write_model(
    batch_dir: Path, cases: int, done: set[tuple[str, str]], started: float, m: int
) -> None:
    """Every record of model ``m`` the driver did not write, through the runner's write path."""
    model = f"provider/model-{m}:latest"
    model_dir = model_dir_name(model)
    (batch_dir / model_dir).mkdir(exist_ok=True)
    for c in range(cases):
        case = f"case-{c:05d}"
        if (case, model) in done:
            continue
        moment = started + (m * cases + c) * 0.001
        run_dir = batch_dir / model_dir / run_dir_name(case, model, run_stamp(moment), 1)
        run_dir.mkdir()
        outcome, category = _OUTCOMES[(c + m) % len(_OUTCOMES)]
        meta = RunMeta(
            test_case=case,
            model=model,
            outcome=outcome,
            failure_category=category,
            timestamp=utc_stamp(),
            finished_at=utc_stamp(),
            duration_seconds=round(0.01 + (c % 97) * 0.001, 6),
            stop_reason="exit",
            exit_code=0 if outcome == "passed" else 1,
            attempt=1,
            batch_id=batch_dir.name,
            run_dir=f"{model_dir}/{run_dir.name}",
            result={},
        )
        write_run_meta(run_dir, meta, fsync=False)


def straightforward(batch_dir: Path) -> dict[tuple[str, str], RunMeta]:
    """Sorted glob, json.loads per record, newest per pair."""
    newest: dict[tuple[str, str], RunMeta] = {}
    pattern = os.path.join(glob.escape(str(batch_dir)), f"*/*/{RUN_META}")
    for path in sorted(glob.glob(pattern)):
        try:
            with open(path, "rb") as handle:
                meta = run_meta_from_dict(json.loads(handle.read()))
        except (OSError, ValueError, InvalidRecord):
            continue
        meta.run_dir = os.path.relpath(os.path.dirname(path), batch_dir)
        current = newest.get(meta.key)
        if current is None or record_order(meta) > record_order(current):
            newest[meta.key] = meta
    return newest


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


#: Runs its arguments as a child of its own and reports the child's wall time, peak RSS and
#: CPU time (user + system).
#: The plan cannot be a direct child of this script: ``subprocess`` starts it by ``vfork``
#: and ``exec``, and Linux keeps the peak RSS of the memory the ``exec`` replaced, so
#: ``wait4`` would report this script's own peak (it holds two 100,000-record ledgers,
#: ≈ 270 MB) whenever that is higher than the plan's. Forked from this small launcher, the
#: plan starts from the launcher's few MB.
_MEASURED = """
import os, sys, time
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execv(sys.argv[1], sys.argv[1:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
seconds = time.perf_counter() - start
sys.stderr.write(f"{seconds} {usage.ru_maxrss} {usage.ru_utime + usage.ru_stime}\\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_plan(directory: Path, sweep: Path, fmt: str) -> tuple[float, float, dict[str, int]]:
    """Wall seconds, peak RSS (MB) and counts of ``batch plan sweep --resume``."""
    out = directory / "plan.out"
    with open(out, "wb") as handle:
        plan = subprocess.run(
            [
                sys.executable,
                "-c",
                _MEASURED,
                *batch_argv("plan", str(sweep), "--resume", "--format", fmt),
            ],
            cwd=directory,
            env=BATCH_ENV,
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.PIPE,
            check=False,
        )
    if plan.returncode != 0:
        raise SystemExit(f"resume_scale: batch plan exited {plan.returncode}")
    seconds, max_rss_kb, _cpu = plan.stderr.split()[-3:]
    if fmt == "json":
        counts = json.loads(out.read_bytes())["counts"]
    else:  # the table's count line: "0 to run, 0 to retry, 100000 carried — ..."
        found = re.search(rb"^(\d+) to run, (\d+) to retry, (\d+) carried", out.read_bytes(), re.M)
        numbers = [int(n) for n in found.groups()] if found else [-1, -1, -1]
        counts = dict(zip(("run", "retry", "carry"), numbers, strict=True))
    return float(seconds), int(max_rss_kb) / 1024, counts


def drop_caches() -> str | None:
    """Empty the page cache; the reason when the kernel does not let us."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as handle:
            handle.write("3\n")
    except OSError as exc:
        return f"cannot drop the page cache ({exc.strerror or exc})"
    return None


def first_job_seconds(directory: Path, sweep: Path, batch_dir: Path) -> float:
    """Remove ``REMOVED`` records, then time ``--resume`` until its first job starts."""
    records = sorted(batch_dir.glob(f"*/*/{RUN_META}"))
    for path in records[:: max(1, len(records) // REMOVED)][:REMOVED]:
        path.unlink()
    os.sync()
    marker = directory / "started"
    start = time.perf_counter()
    driver = subprocess.Popen(
        batch_argv(str(sweep), "--resume", "--no-progress"),
        cwd=directory,
        env=BATCH_ENV,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        while not marker.exists():
            if driver.poll() is not None:
                raise SystemExit(f"resume_scale: the resume exited {driver.returncode}")
            time.sleep(0.002)
        return time.perf_counter() - start
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3, choices=range(1, 21), metavar="N")
    parser.add_argument("--dir", type=Path, default=None, help="where to build (default: /tmp)")
    parser.add_argument(
        "--plan-format",
        choices=["json", "table"],
        default="table",
        help="what plan prints (default: its table, as `batch plan --resume` does)",
    )
    parser.add_argument(
        "--no-cold", action="store_true", help="skip the cold figures (no page cache drop)"
    )
    parser.add_argument(
        "--no-pyc", action="store_true", help="let every batch process compile its modules"
    )
    args = parser.parse_args(argv)

    root = Path(tempfile.mkdtemp(prefix="resume-scale-", dir=args.dir))
    if not args.no_pyc:
        use_bytecode_cache(root / "pycache")
    total = args.models * args.cases
    figures: dict[str, list[float]] = {
        k: []
        for k in (
            "reader_warm",
            "ledger_warm",
            "plan_warm",
            "rss_mb",
            "reader_cold",
            "ledger_cold",
            "plan_cold",
            "first_job",
        )
    }
    cold_refused: str | None = None
    ok = True
    print(
        f"resume_scale: {args.models} models x {args.cases} cases = {total} records, JSON "
        f"{BACKEND}, plan --format {args.plan_format}, {args.repeat} repetitions, in {root}, "
        + ("bytecode compiled every run" if args.no_pyc else "bytecode compiled beforehand")
    )
    try:
        for rep in range(args.repeat):
            directory = root / f"rep-{rep}"
            build_seconds, (sweep, batch_dir) = timed(
                partial(build, directory, args.models, args.cases)
            )
            kept = sorted(p.name for p in batch_dir.iterdir() if p.name.startswith("."))

            seconds, newest = timed(partial(straightforward, batch_dir))
            figures["reader_warm"].append(seconds)
            ok = ok and len(newest) == total
            seconds, found = timed(partial(load_recorded_runs, batch_dir))
            figures["ledger_warm"].append(seconds)
            ok = ok and dict(found) == newest
            seconds, rss, counts = run_plan(directory, sweep, args.plan_format)
            figures["plan_warm"].append(seconds)
            figures["rss_mb"].append(rss)
            if counts != {"run": 0, "carry": total, "retry": 0}:
                print(f"  rep {rep}: plan counts {counts}, expected {total} carried")
                ok = False

            cold_refused = "skipped (--no-cold)" if args.no_cold else drop_caches()
            if cold_refused is None:
                seconds, _ = timed(partial(straightforward, batch_dir))
                figures["reader_cold"].append(seconds)
                drop_caches()
                seconds, _ = timed(partial(load_recorded_runs, batch_dir))
                figures["ledger_cold"].append(seconds)
                drop_caches()
                seconds, _, _ = run_plan(directory, sweep, args.plan_format)
                figures["plan_cold"].append(seconds)

            figures["first_job"].append(first_job_seconds(directory, sweep, batch_dir))
            print(
                f"  rep {rep}: built in {build_seconds:.0f} s ({', '.join(kept)}); "
                + ", ".join(f"{k} {v[-1]:.2f}" for k, v in figures.items() if len(v) > rep)
            )
    finally:
        load = os.getloadavg()
        shutil.rmtree(root, ignore_errors=True)

    med = {k: statistics.median(v) for k, v in figures.items() if v}
    warm_ratio = med["reader_warm"] / med["plan_warm"]
    print(f"  load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    print("  medians of", args.repeat, "(seconds; RSS in MB):")
    print(
        f"    plan --resume warm     {med['plan_warm']:6.2f} s   straightforward reader "
        f"{med['reader_warm']:6.2f} s   {warm_ratio:4.1f}x   goal < {GOAL_WARM_SECONDS:.0f} s "
        f"and >= {GOAL_WARM_RATIO:.0f}x"
    )
    if cold_refused is None:
        cold_ratio = med["reader_cold"] / med["plan_cold"]
        print(
            f"    plan --resume cold     {med['plan_cold']:6.2f} s   straightforward reader "
            f"{med['reader_cold']:6.2f} s   {cold_ratio:4.1f}x   goal >= {GOAL_COLD_RATIO:.0f}x"
        )
    else:
        print(f"    plan --resume cold     not measured: {cold_refused}")
    # The ledger's share of the plan: the same read, in this process, no interpreter start.
    for kind in ("warm", "cold"):
        if figures[f"ledger_{kind}"]:
            print(
                f"    ledger read {kind}       {med[f'ledger_{kind}']:6.2f} s   "
                f"(load_recorded_runs, read-only, in process)   "
                f"{med[f'reader_{kind}'] / med[f'ledger_{kind}']:4.1f}x the straightforward reader"
            )
    print(f"    plan peak RSS          {med['rss_mb']:6.0f} MB  goal < {GOAL_RSS_MB:.0f} MB")
    print(
        f"    --resume to first job  {med['first_job']:6.2f} s   ({REMOVED} records removed) "
        f"goal < {GOAL_FIRST_JOB_SECONDS:.0f} s"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
