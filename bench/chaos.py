"""Chaos: SIGKILL the driver at random moments of a sweep, resume it, and check the ledger.

    .venv/bin/python bench/chaos.py [--seed 1] [--kills 60] [--cases 60] [--models 3]

A sweep of mixed jobs — passing, failing, slow, rate-limited (``429`` in the log) and
crashing (exit 3) — runs under the real ``batch`` command. The driver is SIGKILLed after a
random delay, then started again with ``--resume``, ``--kills`` times; a last ``--resume``
runs the sweep to its end. After every kill:

- every ``run-meta.json`` on disk is a complete JSON record, and no (case, model) pair has
  more than one (the sweep has ``retries: 0``, so a second record means a job that already
  had a record ran again);
- ``batch-summary.json``, once it exists, parses, lists every job once, and says nothing the
  ledger does not: a job it calls passed, failed or error has a record with that status;
- the driver that was just killed started no job that had a record when it was started;
- within one kill grace, no job process of the dead driver is still running (so no resume
  ever runs a job beside its orphan).

``--early`` kills each driver instead within half a second of its first job start, with
``max_concurrent: 40`` (``--max-concurrent``): the moment when dozens of jobs are being
spawned at once and the driver has just begun to record them.

At the end every job has exactly one record and one terminal status, the one its kind
implies, and no job process is left. ``tests/e2e/test_chaos.py`` runs this harness with a fixed
seed and five kills; the script is the long variant and ends with its figures::

    chaos: seed 1, 40 kills (40 after the summary existed), 40 resumes, 120 jobs,
    246 job starts, 34 lock takeovers, 0 violations, 38.2 s
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import psutil

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from helpers.fake_jobs import FAKE_AGENT  # noqa: E402

from batch.plan.jobs import FINAL_STATUSES  # noqa: E402

#: Job kinds: (fake agent actions, the status the job must end with).
KINDS: dict[str, tuple[tuple[str, str], str]] = {
    "pass": (("sleep=0.1", "exit=0"), "passed"),
    "fail": (("sleep=0.1", "exit=1"), "failed"),
    "slow": (("sleep=1.5", "exit=0"), "passed"),
    "rate_limited": (("print=HTTP 429: rate limit exceeded", "exit=1"), "error"),
    "crash": (("sleep=0.05", "exit=3"), "error"),
}
#: ``--early``: slow jobs outlast the orphan check's wait, so an orphan cannot hide by
#: simply finishing before it is looked for.
EARLY_KINDS = {**KINDS, "slow": (("sleep=5", "exit=0"), "passed")}
KILL_GRACE = 0.5
#: How long after a kill job processes may still run: the kill grace and the watchdog's
#: start-up on a loaded machine.
ORPHAN_WAIT = KILL_GRACE + 3
SUMMARY = "batch-summary.json"
EVENTS = Path("batch-logs") / "events.jsonl"


class ChaosViolation(AssertionError):
    """A guarantee did not hold; the message says which and where."""


@attrs.define
class ChaosResult:
    seed: int
    kills: int = 0
    #: Kills that happened after batch-summary.json existed (the rest hit driver start-up).
    kills_with_summary: int = 0
    resumes: int = 0
    jobs: int = 0
    #: Job starts seen in events.jsonl across every driver; past ``jobs``, each is a rerun
    #: of a job killed mid-run (one with no record yet).
    starts: int = 0
    elapsed: float = 0.0
    takeover_warnings: int = 0
    final_exit: int | None = None


def write_sweep(
    directory: Path,
    *,
    cases: int,
    models: int,
    seed: int,
    max_concurrent: int = 4,
    kinds: dict[str, tuple[tuple[str, str], str]] = KINDS,
) -> tuple[Path, dict[tuple[str, str], str]]:
    """A chaos sweep in ``directory``; returns its path and each job's expected status."""
    rng = random.Random(seed)
    names = list(kinds)
    expected: dict[tuple[str, str], str] = {}
    case_lines = []
    for c in range(cases):
        kind = rng.choice(names)
        (first, second), status = kinds[kind]
        case_id = f"c{c:03d}-{kind}"
        case_lines.append(
            f"  - {{id: {case_id}, params: {{first: {json.dumps(first)}, "
            f"second: {json.dumps(second)}}}}}"
        )
        for m in range(models):
            expected[(case_id, f"m{m}/model")] = status
    model_lines = [
        # Models differ in how fast their jobs start, so finishes interleave.
        f"  - {{id: m{m}/model, env: {{FAKE_AGENT_ACTIONS: '[\"sleep={0.05 * m}\"]'}}}}"
        for m in range(models)
    ]
    text = "\n".join(
        [
            "name: chaos",
            "output: runs",
            "cases:",
            *case_lines,
            "models:",
            *model_lines,
            f"command: [{json.dumps(sys.executable)}, {json.dumps(str(FAKE_AGENT))}, "
            '"{params.first}", "{params.second}"]',
            f"max_concurrent: {max_concurrent}",
            f"kill_grace: {KILL_GRACE}",
            "retries: 0",
            # Rewritten often, so kills land in the middle of summary writes too.
            "summary_interval: 0.1",
            "",
        ]
    )
    path = directory / "sweep.yaml"
    path.write_text(text, encoding="utf-8")
    return path, expected


def driver_env() -> dict[str, str]:
    """The environment for ``python -m batch.cli``: this tree first, wherever it is."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def driver_argv(sweep: Path, *, resume: bool) -> list[str]:
    argv = [sys.executable, "-m", "batch.cli", str(sweep), "--no-progress"]
    return [*argv, "--resume"] if resume else argv


def batch_dir_of(directory: Path) -> Path | None:
    found = sorted((directory / "runs").glob("chaos-*"))
    if len(found) > 1:
        raise ChaosViolation(f"more than one batch dir: {[p.name for p in found]}")
    return found[0] if found else None


def read_records(batch_dir: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """Every record, strictly: each must be complete JSON, at most one per (case, model)."""
    records: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(batch_dir.glob("*/*/run-meta.json")):
        try:
            record = json.loads(path.read_bytes())
        except ValueError as exc:
            raise ChaosViolation(f"{path}: torn record ({exc})") from None
        key = (record["test_case"], record["model"])
        if key in records:
            raise ChaosViolation(
                f"{key} has two records ({records[key]['run_dir']}, {record['run_dir']}): "
                "a job that already had a record ran again"
            )
        records[key] = record
    return records


def record_status(record: dict[str, Any]) -> str:
    if record["outcome"] == "passed":
        return "passed"
    return "failed" if record["failure_category"] == "model_failure" else "error"


def check_summary(
    batch_dir: Path,
    expected: dict[tuple[str, str], str],
    records: dict[tuple[str, str], dict[str, Any]],
) -> bool:
    """The summary parses and tells no lie; False when there is none yet."""
    path = batch_dir / SUMMARY
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return False
    try:
        summary = json.loads(data)
    except ValueError as exc:
        raise ChaosViolation(f"{path} does not parse: {exc}") from None
    rows = {(row["case"], row["model"]): row for row in summary["jobs"]}
    if len(rows) != len(summary["jobs"]) or rows.keys() != expected.keys():
        raise ChaosViolation(f"{path}: the rows are not the sweep's jobs, once each")
    for key, row in rows.items():
        if row["status"] in FINAL_STATUSES:
            record = records.get(key)
            if record is None or record_status(record) != row["status"]:
                raise ChaosViolation(
                    f"{path}: {key} is {row['status']!r} but its record says "
                    f"{record and record_status(record)!r}"
                )
    return True


def new_starts(batch_dir: Path, offset: int) -> tuple[list[tuple[str, str]], int]:
    """Job starts logged in events.jsonl past byte ``offset``, and the new offset."""
    try:
        with open(batch_dir / EVENTS, "rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except FileNotFoundError:
        return [], offset
    starts = []
    for line in data.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line torn by the kill; events are for humans, not the ledger
        if event.get("event") == "start":
            starts.append((event["case"], event["model"]))
    return starts, offset + len(data)


def job_processes(directory: Path) -> list[psutil.Process]:
    """Live job processes of this sweep: the fake agent, run with the sweep's dir as cwd."""
    found = []
    for process in psutil.process_iter(["cmdline", "status", "cwd"]):
        info = process.info
        if (
            str(FAKE_AGENT) in (info["cmdline"] or [])
            and info["status"] != psutil.STATUS_ZOMBIE
            and info["cwd"] == str(directory.resolve())
        ):
            found.append(process)
    return found


def has_started_a_job(driver: subprocess.Popen[bytes]) -> bool:
    """True once a child of ``driver`` runs the fake agent (or the driver is gone)."""
    try:
        children = psutil.Process(driver.pid).children()
    except psutil.Error:
        return True
    for child in children:
        try:
            if str(FAKE_AGENT) in child.cmdline():
                return True
        except psutil.Error:
            continue
    return False


EARLY_WINDOW = 0.5


def wait_for(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def run_chaos(
    directory: Path,
    *,
    seed: int,
    kills: int,
    cases: int = 20,
    models: int = 3,
    delays: tuple[float, float] = (0.1, 1.5),
    max_concurrent: int = 4,
    early: bool = False,
    log: Callable[[str], None] = lambda line: None,
) -> ChaosResult:
    """Run the chaos scenario in ``directory`` (see the module docstring); ``early``: kill
    each driver within :data:`EARLY_WINDOW` seconds of its first job start, not after one
    of ``delays``.

    Raises :class:`ChaosViolation` at the first broken guarantee.
    """
    rng = random.Random(seed)
    sweep, expected = write_sweep(
        directory,
        cases=cases,
        models=models,
        seed=seed,
        max_concurrent=max_concurrent,
        kinds=EARLY_KINDS if early else KINDS,
    )
    result = ChaosResult(seed=seed, jobs=len(expected))
    began = time.monotonic()
    recorded: set[tuple[str, str]] = set()
    offset = 0
    outputs = directory / "driver-output"
    outputs.mkdir()
    for round_number in range(kills + 1):
        batch_dir = batch_dir_of(directory)
        resume = batch_dir is not None
        result.resumes += resume
        out_path = outputs / f"round-{round_number:03d}.txt"
        with open(out_path, "wb") as out:
            driver = subprocess.Popen(
                driver_argv(sweep, resume=resume),
                stdout=out,
                stderr=subprocess.STDOUT,
                env=driver_env(),
            )
            last = round_number == kills
            if not last:
                # The kill's delay counts from the first job: on a loaded machine a driver
                # can take longer to start than the longest delay, and a kill before the
                # batch dir exists puts nothing to the test.
                wait_for(functools.partial(has_started_a_job, driver), 30)
            if early:
                # Every other kill at once: jobs are being spawned that nothing recorded yet.
                delay = rng.uniform(0, EARLY_WINDOW) if round_number % 2 else 0.0
            else:
                delay = rng.uniform(*delays)
            try:
                if not last and delay == 0.0:
                    raise subprocess.TimeoutExpired(driver.args, 0)
                driver.wait(timeout=120 if last else delay)
            except subprocess.TimeoutExpired:
                driver.send_signal(signal.SIGKILL)
                driver.wait()
                result.kills += 1
        output = out_path.read_text(errors="replace")
        result.takeover_warnings += "took over the lock of a dead driver" in output
        if driver.returncode not in (-signal.SIGKILL, 0, 1):
            raise ChaosViolation(f"round {round_number}: exit {driver.returncode}:\n{output}")
        batch_dir = batch_dir_of(directory)
        if batch_dir is None:
            log(f"round {round_number}: killed before the batch dir existed")
            continue
        records = read_records(batch_dir)
        if check_summary(batch_dir, expected, records):
            result.kills_with_summary += driver.returncode == -signal.SIGKILL
        starts, offset = new_starts(batch_dir, offset)
        result.starts += len(starts)
        rerun = recorded.intersection(starts)
        if rerun:
            raise ChaosViolation(f"round {round_number}: jobs with a record ran again: {rerun}")
        recorded = set(records)
        if not wait_for(lambda: not job_processes(directory), ORPHAN_WAIT):
            left = [p.pid for p in job_processes(directory)]
            raise ChaosViolation(f"round {round_number}: job processes outlived the driver: {left}")
        log(
            f"round {round_number}: exit {driver.returncode}, {len(records)}/{len(expected)} "
            f"recorded, {len(starts)} started"
        )
        if driver.returncode != -signal.SIGKILL:
            result.final_exit = driver.returncode
            break
    result.elapsed = time.monotonic() - began
    _check_end(batch_dir_of(directory), expected)
    return result


def _check_end(batch_dir: Path | None, expected: dict[tuple[str, str], str]) -> None:
    if batch_dir is None:
        raise ChaosViolation("no batch dir at the end")
    records = read_records(batch_dir)
    if records.keys() != expected.keys():
        missing = sorted(expected.keys() - records.keys())
        raise ChaosViolation(f"jobs without a record at the end: {missing[:5]}")
    summary = json.loads((batch_dir / SUMMARY).read_bytes())
    if summary["state"] != "complete":
        raise ChaosViolation(f"the summary ends {summary['state']!r}, not 'complete'")
    for row in summary["jobs"]:
        key = (row["case"], row["model"])
        want = expected[key]
        if row["status"] != want or record_status(records[key]) != want:
            raise ChaosViolation(
                f"{key}: summary {row['status']!r}, record {record_status(records[key])!r}, "
                f"expected {want!r}"
            )
    check_summary(batch_dir, expected, records)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kills", type=int, default=60)
    parser.add_argument("--cases", type=int, default=60)
    parser.add_argument("--models", type=int, default=3)
    parser.add_argument("--max-delay", type=float, default=2.0)
    parser.add_argument("--early", action="store_true", help="kill as the first jobs start")
    parser.add_argument("--max-concurrent", type=int, default=None)
    parser.add_argument("--keep", type=Path, default=None, help="run here and keep the files")
    args = parser.parse_args(argv)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
        directory = args.keep or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        try:
            result = run_chaos(
                directory,
                seed=args.seed,
                kills=args.kills,
                cases=args.cases,
                models=args.models,
                delays=(0.05, args.max_delay),
                max_concurrent=args.max_concurrent or (40 if args.early else 4),
                early=args.early,
                log=lambda line: print(line, flush=True),
            )
        except ChaosViolation as exc:
            print(f"chaos: VIOLATION: {exc}", flush=True)
            return 1
    print(
        f"chaos: seed {result.seed}, {result.kills} kills ({result.kills_with_summary} after "
        f"the summary existed), {result.resumes} resumes, {result.jobs} jobs, "
        f"{result.starts} job starts, {result.takeover_warnings} lock takeovers, "
        f"0 violations, {result.elapsed:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
