"""Issue 44's figures, the ledger's cache of two trees side by side in one run.

    .venv/bin/python bench/ledger_side.py --old OLD_TREE [--new NEW_TREE] [--records 100000]
        [--complete-jobs 200000] [--plan-rows 500000] [--sshfs-records 10000] [--only ...]

``--old`` is a checkout of the code before (``git worktree add --detach DIR REV``); ``--new``
defaults to this tree. Every figure of a tree is taken in a process of its own started with
``PYTHONPATH`` set to that tree, from a small launcher that forks it and reports its wall
time and peak RSS (``wait4``; see ``bench/resume_scale.py``'s ``_MEASURED`` for why a
launcher). Each tree's ledger cache goes to its own ``XDG_CACHE_HOME`` under the bench's
temp dir (the old tree keeps its cache in the batch dir and ignores it). Figures, each
tree's beside the other's and beside the straightforward reader (sorted glob, ``json.loads``
and ``run_meta_from_dict`` per record, newest per pair; in this process):

- **written**: ``--records`` records written through the tree's own ``write_run_meta`` (two
  writer processes, as a driver's file threads or Dask workers on one host; no fsync), each
  tree into its own batch dir; then, after the racy window, the tree's first
  ``load_recorded_runs`` (the first resume after the driver wrote them) and its second;
- **complete**: a batch of ``--complete-jobs`` jobs, every one recorded (a driver started and
  SIGKILLed, then every record written), and ``batch SWEEP --resume`` on it twice per tree
  (old first): wall time and peak RSS; nothing runs;
- **plan**: ``batch plan`` of a sweep of 2 models over a ``--plan-rows``-row JSONL dataset,
  after its floor (``bench/plan_dataset.py``'s ``FLOOR``, the simplest correct program);
- **sshfs** (root only, ``scripts/sshfs-local``): ``--sshfs-records`` records in the export,
  read through the mount: the straightforward reader cold (fresh mount), each tree's first
  read (builds its cache), then, remounted, each tree's read again (cold mount, its cache).

Every result is compared with the straightforward reader's (a hash of every record as
``run_meta_to_dict`` writes it); the script exits 1 if any differs. The load average is
printed with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from plan_dataset import FLOOR  # noqa: E402
from resume_scale import _MEASURED, straightforward  # noqa: E402

from run_support import jsonio  # noqa: E402
from run_support.results import run_meta_to_dict  # noqa: E402

RACY_SECONDS = 2.5

_READ = """
import hashlib, json, sys, time
from pathlib import Path
from run_support import jsonio
from run_support.results import load_recorded_runs, run_meta_to_dict
start = time.perf_counter()
found = load_recorded_runs(Path(sys.argv[1]))
seconds = time.perf_counter() - start
digest = hashlib.sha256()
for key in sorted(found):
    digest.update(jsonio.dumps([list(key), run_meta_to_dict(found[key])]))
print(json.dumps({"seconds": seconds, "records": len(found), "hash": digest.hexdigest()}))
"""

_WRITE = """
import sys, time
from pathlib import Path
from batch.layout import model_dir_name, run_dir_name, run_stamp
from run_support.results import RunMeta, utc_stamp, write_run_meta
batch_dir, cases, first, step, models = Path(sys.argv[1]), *map(int, sys.argv[2:6])
outcomes = (("passed", None), ("passed", None), ("failed", "model_failure"),
            ("error", "api_or_credit"))
skip = set(sys.argv[6].split(",")) if len(sys.argv) > 6 and sys.argv[6] else set()
started = time.time()
for m in range(first, models, step):
    model = f"provider/model-{m}:latest"
    model_dir = model_dir_name(model)
    (batch_dir / model_dir).mkdir(parents=True, exist_ok=True)
    for c in range(cases):
        case = f"case-{c:05d}"
        if f"{case}|{model}" in skip:
            continue
        name = run_dir_name(case, model, run_stamp(started + (m * cases + c) * 0.001), 1)
        run_dir = batch_dir / model_dir / name
        run_dir.mkdir()
        outcome, category = outcomes[(c + m) % len(outcomes)]
        meta = RunMeta(
            test_case=case, model=model, outcome=outcome, failure_category=category,
            timestamp=utc_stamp(), finished_at=utc_stamp(),
            duration_seconds=round(0.01 + (c % 97) * 0.001, 6), stop_reason="exit",
            exit_code=0 if outcome == "passed" else 1, attempt=1, batch_id=batch_dir.name,
            run_dir=f"{model_dir}/{name}", result={"score": float(c % 2)} if c % 3 else {},
            usage={"input_tokens": c, "output_tokens": 7} if c % 5 == 0 else None,
            usage_total={"input_tokens": c, "output_tokens": 7} if c % 5 == 0 else None,
        )
        write_run_meta(run_dir, meta, fsync=False)
"""


#: The floor of a complete resume: the simplest correct program for what it must do, with
#: a cache of its own (``build``: every record read once into SQLite, as a first resume
#: would). ``run``: list and stat every record, take the cached fields of each whose stat is
#: unchanged (a record that changed would be parsed), find a record for every job of the
#: sweep, and write the summary of every job atomically. No checks of the cache, no
#: events, no lock, no snapshot: what no implementation can do without.
_COMPLETE_FLOOR = """
import json, os, sqlite3, sys, time
start = time.perf_counter()
sweep_path, batch, cache, mode = sys.argv[1:5]
con = sqlite3.connect(cache)
models = sorted(d for d in os.listdir(batch) if os.path.isdir(os.path.join(batch, d))
                and d != "batch-logs")
if mode == "build":
    con.execute("CREATE TABLE r (model_dir TEXT, run_dir TEXT, ino INT, size INT, "
                "mtime_ns INT, ctime_ns INT, fields TEXT, PRIMARY KEY (model_dir, run_dir)) "
                "WITHOUT ROWID")
    for md in models:
        rows = []
        for rd in os.listdir(os.path.join(batch, md)):
            path = os.path.join(batch, md, rd, "run-meta.json")
            try:
                st = os.stat(path)
            except FileNotFoundError:
                continue
            with open(path, "rb") as handle:
                raw = json.loads(handle.read())
            fields = [raw["test_case"], raw["model"], raw["outcome"], raw["failure_category"],
                      raw["duration_seconds"], raw["attempt"], raw["timestamp"]]
            rows.append((md, rd, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                         json.dumps(fields)))
        con.executemany("INSERT INTO r VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    con.commit()
    sys.exit()
sweep = json.loads(open(sweep_path, "rb").read())
NON_MODEL = ("api_or_credit", "build_instruction", "infra_failure", "task_data")
newest = {}
for md in models:
    cached = {row[0]: row for row in con.execute(
        "SELECT run_dir, ino, size, mtime_ns, ctime_ns, fields FROM r WHERE model_dir = ?",
        (md,))}
    fd = os.open(os.path.join(batch, md), os.O_RDONLY | os.O_DIRECTORY)
    for rd in os.listdir(fd):
        try:
            st = os.stat(rd + "/run-meta.json", dir_fd=fd)
        except FileNotFoundError:
            continue
        row = cached[rd]
        if row[1:5] != (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns):
            raise SystemExit("floor: a record changed (not in this bench)")
        case, model, outcome, category, duration, attempt, stamp = json.loads(row[5])
        key = (case, model)
        if key not in newest or newest[key][0] < stamp:
            newest[key] = (stamp, outcome, category, duration, attempt, f"{md}/{rd}")
    os.close(fd)
jobs = []
for case in sweep["cases"]:
    for model in sweep["models"]:
        stamp, outcome, category, duration, attempt, run_dir = newest[(case, model)]
        status = "passed" if outcome == "passed" else (
            "error" if category in NON_MODEL else "failed")
        jobs.append({"case": case, "model": model, "status": status,
                     "duration_seconds": round(duration, 3), "resumed": True,
                     "failure_category": category, "attempts": attempt or 1,
                     "run_dir": run_dir})
text = json.dumps({"schema": 1, "jobs": jobs}, separators=(",", ":")).encode()
with open(os.path.join(batch, "floor-summary.json.tmp"), "wb") as handle:
    handle.write(text)
os.replace(os.path.join(batch, "floor-summary.json.tmp"),
           os.path.join(batch, "floor-summary.json"))
print(len(jobs), time.perf_counter() - start)
"""


_NO_HEAP_POLICY = """
import contextlib
import run_support.heap as heap


class _Nothing(contextlib.ContextDecorator):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


heap.gc_paused = heap.built_then_frozen = heap.thawed_after = _Nothing
"""


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


class Trees:
    def __init__(self, root: Path, old: Path, new: Path) -> None:
        self.root = root
        self.trees = {"old": old, "new": new}

    def env(self, label: str) -> dict[str, str]:
        env = dict(os.environ)
        if label == "new-noheap":
            # The new tree with its heap policy (run_support.heap) made a no-op, to measure
            # what the policy earns.
            env["PYTHONPATH"] = f"{self._noheap()}{os.pathsep}{self.trees['new']}"
        else:
            env["PYTHONPATH"] = str(self.trees[label])
        env["XDG_CACHE_HOME"] = str(self.root / f"cache-{label}")
        env.pop("BATCH_LEDGER_CACHE", None)
        return env

    def _noheap(self) -> Path:
        where = self.root / "noheap"
        if not where.exists():
            where.mkdir()
            (where / "sitecustomize.py").write_text(_NO_HEAP_POLICY)
        return where

    def measured(
        self, label: str, argv: list[str], cwd: Path | None = None, ok: tuple[int, ...] = (0,)
    ) -> tuple[float, float, str]:
        """Wall seconds, peak RSS (MB) and stdout of ``argv`` run with ``label``'s tree."""
        done = subprocess.run(
            [sys.executable, "-c", _MEASURED, *argv],
            cwd=cwd or self.root,
            env=self.env(label),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
        )
        if done.returncode not in ok or b"Traceback" in done.stderr:
            raise SystemExit(
                f"ledger_side: {label} {argv[1:4]} exited {done.returncode}:\n"
                + done.stderr.decode()[-2000:]
            )
        seconds, rss_kb, _cpu = done.stderr.split()[-3:]
        return float(seconds), int(rss_kb) / 1024, done.stdout.decode()

    def read(self, label: str, batch_dir: Path, times: int = 1) -> dict[str, Any]:
        """A read of ``batch_dir`` in a process of its own; with ``times``, the fastest of
        that many (the machine is shared: the fastest is the least disturbed)."""
        best: dict[str, Any] = {}
        for _ in range(times):
            wall, rss, out = self.measured(label, [sys.executable, "-c", _READ, str(batch_dir)])
            found: dict[str, Any] = json.loads(out)
            found.update(wall=wall, rss=rss)
            if not best or found["seconds"] < best["seconds"]:
                best = found
        return best

    def write(self, label: str, batch_dir: Path, models: int, cases: int, skip: str = "") -> float:
        start = time.perf_counter()

        def argv(first: int) -> list[str]:
            return [sys.executable, "-c", _WRITE, str(batch_dir), str(cases), str(first), "2",
                    str(models), skip]  # fmt: skip

        writers = [subprocess.Popen(argv(first), env=self.env(label)) for first in (0, 1)]
        if any(writer.wait() for writer in writers):
            raise SystemExit(f"ledger_side: a writer of {label} failed")
        return time.perf_counter() - start


def expected_hash(batch_dir: Path) -> tuple[float, str, int]:
    import hashlib

    start = time.perf_counter()
    found = straightforward(batch_dir)
    seconds = time.perf_counter() - start
    digest = hashlib.sha256()
    for key in sorted(found):
        digest.update(jsonio.dumps([list(key), run_meta_to_dict(found[key])]))
    return seconds, digest.hexdigest(), len(found)


class Results:
    def __init__(self) -> None:
        self.identical = True
        self.rows: list[str] = []

    def line(self, text: str) -> None:
        text = f"{text} ({load()})"
        print(text, flush=True)
        self.rows.append(text)

    def check(self, label: str, got: dict[str, Any], want: str) -> str:
        same = got["hash"] == want
        self.identical = self.identical and same
        return "" if same else f" RESULT DIFFERS ({label})"


def written(trees: Trees, out: Results, records: int, labels: list[str]) -> None:
    models = 10
    cases = records // models
    for label in labels:
        batch_dir = trees.root / f"written-{label}" / "batch-20261206T000000Z"
        seconds = trees.write(label, batch_dir, models, cases)
        os.sync()
        time.sleep(RACY_SECONDS)
        naive, want, count = expected_hash(batch_dir)
        first = trees.read(label, batch_dir)
        second = trees.read(label, batch_dir, times=3)
        naive_again, _, _ = expected_hash(batch_dir)
        naive = min(naive, naive_again)
        out.line(
            f"written/{label}: {count} records written in {seconds:.1f} s; straightforward "
            f"{naive:.2f} s; first read {first['seconds']:.2f} s ({naive / first['seconds']:.2f}x, "
            f"{first['rss']:.0f} MB); second read {second['seconds']:.2f} s "
            f"({naive / second['seconds']:.2f}x, {second['rss']:.0f} MB; fastest of 3)"
            + out.check("first", first, want)
            + out.check("second", second, want)
        )


def complete(trees: Trees, out: Results, jobs: int, labels: list[str]) -> None:
    models = 20
    cases = jobs // models
    directory = trees.root / "complete"
    directory.mkdir()
    sweep = {
        "name": "complete",
        "output": "runs",
        "cases": [f"case-{c:05d}" for c in range(cases)],
        "models": [f"provider/model-{m}:latest" for m in range(models)],
        "command": ["true"],
        "max_concurrent": 2,
    }
    sweep_path = directory / "sweep.yaml"
    sweep_path.write_text(json.dumps(sweep), encoding="utf-8")
    # A real driver makes the batch dir (snapshot, summary, lock), then is killed.
    driver = subprocess.Popen(
        [sys.executable, "-m", "batch.cli", str(sweep_path), "--no-progress"],
        cwd=directory, env=trees.env("new"), stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    runs = directory / "runs"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(list(runs.glob("*/*/*/run-meta.json"))) < 3:
        time.sleep(0.05)
    os.killpg(driver.pid, 9)
    driver.wait()
    (batch_dir,) = runs.iterdir()
    done = []
    for path in batch_dir.glob("*/*/run-meta.json"):
        raw = json.loads(path.read_bytes())
        done.append(f"{raw['test_case']}|{raw['model']}")
    seconds = trees.write("new", batch_dir, models, cases, ",".join(done))
    os.sync()
    time.sleep(RACY_SECONDS)
    cache = trees.root / "floor.sqlite"
    floor = [sys.executable, "-c", _COMPLETE_FLOOR, str(sweep_path), str(batch_dir), str(cache)]
    trees.measured("new", [*floor, "build"])
    wall, rss, printed = min(
        (trees.measured("new", [*floor, "run"]) for _ in range(3)), key=lambda m: m[0]
    )
    if int(printed.split()[0]) != jobs:
        raise SystemExit(f"ledger_side: the floor found {printed.split()[0]} of {jobs} jobs")
    out.line(f"complete/floor: {jobs} jobs, stat + cache + summary: {wall:.2f} s {rss:.0f} MB "
             "(fastest of 3)")  # fmt: skip
    argv = [sys.executable, "-m", "batch.cli", str(sweep_path), "--resume", "--no-progress"]
    for label in [*labels, *(["new-noheap"] if "new" in labels else [])]:
        # Exit status 1: the batch holds errors (api_or_credit), carried as they are.
        first = trees.measured(label, argv, cwd=directory, ok=(0, 1))
        second = min(
            (trees.measured(label, argv, cwd=directory, ok=(0, 1)) for _ in range(2)),
            key=lambda measured: measured[0],
        )
        out.line(
            f"complete/{label}: {jobs} jobs (records written in {seconds:.0f} s by the new "
            f"tree's writer), --resume: first {first[0]:.2f} s {first[1]:.0f} MB, "
            f"second (fastest of 2) {second[0]:.2f} s {second[1]:.0f} MB"
        )


def plan(trees: Trees, out: Results, rows: int, labels: list[str]) -> None:
    directory = trees.root / "plan"
    directory.mkdir()
    with open(directory / "data.jsonl", "w", encoding="utf-8") as handle:
        for index in range(rows):
            handle.write(json.dumps({"id": f"t{index}", "prompt": f"question {index} " * 8}))
            handle.write("\n")
    (directory / "sweep.yaml").write_text(
        "name: plan\ncases: {jsonl: data.jsonl, id: id}\nmodels: [a, b]\ncommand: ['true']\n"
    )
    # The floor first (bench/plan_dataset.py's FLOOR: the simplest correct program).
    floor = subprocess.run(
        [sys.executable, "-c", _MEASURED, sys.executable, "-c", FLOOR, "data.jsonl"],
        cwd=directory, stdin=subprocess.DEVNULL, capture_output=True, check=True,
    )  # fmt: skip
    wall, rss_kb, _cpu = floor.stderr.split()[-3:]
    out.line(f"plan/floor: {2 * rows} jobs: {float(wall):.2f} s {int(rss_kb) / 1024:.0f} MB")
    argv = [sys.executable, "-m", "batch.cli", "plan", "sweep.yaml"]
    for label in labels:
        wall, rss, _ = trees.measured(label, argv, cwd=directory)
        out.line(f"plan/{label}: {2 * rows} jobs, a {rows}-row JSONL: {wall:.2f} s {rss:.0f} MB")


def sshfs_figures(trees: Trees, out: Results, records: int, labels: list[str]) -> None:
    from ledger_scan import build_ledger
    from sharedfs import sshfs

    state = Path(tempfile.mkdtemp(prefix="ledger-side-sshfs-", dir="/tmp"))
    try:
        export = Path(sshfs(state, "start")["SSHFS_EXPORT"])
        build_ledger(export / "batch", 10, records // 10)
        os.sync()
        time.sleep(RACY_SECONDS)
        batch = Path(sshfs(state, "remount")["SSHFS_MOUNT"]) / "batch"
        naive, want, count = expected_hash(batch)
        firsts = {}
        for label in labels:
            sshfs(state, "remount")
            firsts[label] = trees.read(label, batch)
        for label in labels:
            sshfs(state, "remount")
            cold = trees.read(label, batch)
            first = firsts[label]
            out.line(
                f"sshfs/{label}: {count} records, straightforward cold {naive:.2f} s; first "
                f"read {first['seconds']:.2f} s; cold mount, cached {cold['seconds']:.2f} s "
                f"({naive / cold['seconds']:.2f}x)"
                + out.check("first", first, want)
                + out.check("cold", cold, want)
            )
    finally:
        sshfs(state, "stop")
        if not os.path.ismount(state / "mnt"):
            shutil.rmtree(state, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True)
    parser.add_argument("--new", type=Path, default=HERE.parent)
    parser.add_argument("--trees", default="old,new", help="which to measure, in order")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--complete-jobs", type=int, default=200_000)
    parser.add_argument("--plan-rows", type=int, default=500_000)
    parser.add_argument("--sshfs-records", type=int, default=10_000)
    parser.add_argument(
        "--only", default="written,complete,plan,sshfs", help="comma-separated figures"
    )
    args = parser.parse_args(argv)
    labels = args.trees.split(",")
    only = set(args.only.split(","))
    root = Path(tempfile.mkdtemp(prefix="ledger-side-"))
    trees = Trees(root, args.old.resolve(), args.new.resolve())
    out = Results()
    print(f"ledger_side: old {trees.trees['old']}, new {trees.trees['new']}, in {root}", flush=True)
    try:
        if "written" in only:
            written(trees, out, args.records, labels)
        if "complete" in only:
            complete(trees, out, args.complete_jobs, labels)
        if "plan" in only:
            plan(trees, out, args.plan_rows, labels)
        if "sshfs" in only:
            if os.geteuid() == 0:
                sshfs_figures(trees, out, args.sshfs_records, labels)
            else:
                print("sshfs: not root, no figures")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"ledger_side: results {'identical' if out.identical else 'DIFFER'}")
    return 0 if out.identical else 1


if __name__ == "__main__":
    sys.exit(main())
