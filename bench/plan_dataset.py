"""``batch plan`` of a million jobs from a 500,000-row JSONL dataset, beside its floor
(issue 44: under 5 s and 500 MB).

    .venv/bin/python bench/plan_dataset.py [--old OLD_TREE] [--new NEW_TREE] [--rows 500000]
        [--repeat 3]

Writes ``data.jsonl`` (row ``i``: ``{"id": "t<i>", "prompt": "question <i> " * 8}``, 158
bytes) and a sweep of it, ``cases: {jsonl: data.jsonl, id: id}``, ``models: [a, b]``,
``command: ['true']``, into a fresh temp dir; then, ``--repeat`` times in turn (the machine
is shared: turns alternate so that a burst of load falls on all of them alike):

- **floor**: :data:`FLOOR`, the simplest correct program for the same work: reads the file
  a line at a time, ``json.loads`` each, checks it is an object with a string id not seen
  before, keeps each row's bytes (what a job writes as its ``case.json``) and its id, and
  builds the 1,000,000 jobs as ``(case, model)`` tuples. No table is printed;
- **old** (with ``--old``, a checkout of the code before: ``git archive REV | tar -x -C DIR``)
  and **new** (this tree): ``batch plan sweep.yaml`` with its table sent to ``/dev/null``.

Each figure is one process started from a small launcher that reports its wall time, peak
RSS and CPU time (user + system) from ``wait4`` (``resume_scale._MEASURED``); every tree runs
with its bytecode compiled beforehand (``PYTHONPYCACHEPREFIX`` under the temp dir), as an
installed ``batch`` does. The load average is printed with every figure; at the end, each
label's fastest wall time and its median CPU time, peak RSS, and the ratios to the floor.
The old and new tables must be identical (exit 1 otherwise).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from resume_scale import _MEASURED  # noqa: E402

#: The floor: what the simplest correct plan of the dataset needs on this machine.
FLOOR = """
import json, sys

path, models = sys.argv[1], ("a", "b")
ids, rows, seen = [], [], set()
with open(path, "rb") as handle:
    for number, line in enumerate(handle, 1):
        line = line.rstrip(b"\\r\\n")
        if not line.strip():
            continue
        value = json.loads(line)
        if type(value) is not dict:
            sys.exit(f"{path}:{number}: not a JSON object")
        ident = value.get("id")
        if type(ident) is not str or not ident:
            sys.exit(f"{path}:{number}: id: not a string")
        if ident in seen:
            sys.exit(f"{path}:{number}: duplicate id {ident!r}")
        seen.add(ident)
        ids.append(ident)
        rows.append(line)  # what the case's jobs write as case.json
jobs = [(case, model) for case in ids for model in models]
print(len(jobs))
"""


def write_dataset(directory: Path, rows: int) -> None:
    with open(directory / "data.jsonl", "w", encoding="utf-8") as handle:
        for index in range(rows):
            handle.write(f'{{"id": "t{index}", "prompt": "{f"question {index} " * 8}"}}\n')
    (directory / "sweep.yaml").write_text(
        "name: plan\ncases: {jsonl: data.jsonl, id: id}\nmodels: [a, b]\ncommand: ['true']\n"
    )


def load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def measured(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, float, bytes]:
    """Wall seconds, peak RSS (MB), CPU seconds and stdout of ``argv``."""
    done = subprocess.run(
        [sys.executable, "-c", _MEASURED, *argv],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"plan_dataset: {argv[1:4]} exited {done.returncode}:\n"
                         + done.stderr.decode()[-2000:])  # fmt: skip
    seconds, rss_kb, cpu = done.stderr.split()[-3:]
    return float(seconds), int(rss_kb) / 1024, float(cpu), done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path)
    parser.add_argument("--new", type=Path, default=HERE.parent)
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    trees = {"new": args.new.resolve()}
    if args.old is not None:
        trees = {"old": args.old.resolve(), **trees}
    root = Path(tempfile.mkdtemp(prefix="plan-dataset-"))
    identical = True
    try:
        data = root / "data"
        data.mkdir()
        write_dataset(data, args.rows)
        envs = {}
        for label, tree in trees.items():
            env = dict(os.environ, PYTHONPATH=str(tree))
            env["PYTHONPYCACHEPREFIX"] = str(root / f"pyc-{label}")
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            subprocess.run(
                [sys.executable, "-m", "compileall", "-q", str(tree / "batch"),
                 str(tree / "run_support")],
                env=env, check=True, stdout=subprocess.DEVNULL,
            )  # fmt: skip
            envs[label] = env
        plan = [sys.executable, "-m", "batch.cli", "plan", "sweep.yaml"]
        figures: dict[str, list[tuple[float, float, float]]] = {"floor": []}
        figures.update((label, []) for label in trees)
        print(f"plan_dataset: {2 * args.rows:,} jobs from {args.rows:,} rows; {trees}", flush=True)
        for turn in range(1, args.repeat + 1):
            wall, rss, cpu, out = measured(
                [sys.executable, "-c", FLOOR, "data.jsonl"], data, dict(os.environ)
            )
            if int(out) != 2 * args.rows:
                raise SystemExit(f"plan_dataset: the floor made {int(out)} jobs")
            figures["floor"].append((wall, rss, cpu))
            print(f"{turn} floor: {wall:.2f} s, CPU {cpu:.2f} s, {rss:.0f} MB (load {load()})")
            tables = set()
            for label in trees:
                # A fresh dir each time: nothing a run leaves can help the next.
                fresh = root / f"{label}-{turn}"
                fresh.mkdir()
                for name in ("data.jsonl", "sweep.yaml"):
                    os.link(data / name, fresh / name)
                wall, rss, cpu, out = measured(plan, fresh, envs[label])
                tables.add(hashlib.sha256(out.replace(bytes(fresh), b"DIR")).hexdigest())
                figures[label].append((wall, rss, cpu))
                print(f"{turn} {label}: {wall:.2f} s, CPU {cpu:.2f} s, {rss:.0f} MB "
                      f"(load {load()})", flush=True)  # fmt: skip
                shutil.rmtree(fresh)
            identical = identical and len(tables) == 1
        floor_wall = min(wall for wall, _, _ in figures["floor"])
        floor_cpu = statistics.median(cpu for _, _, cpu in figures["floor"])
        floor_rss = max(rss for _, rss, _ in figures["floor"])
        for label, runs in figures.items():
            wall = min(w for w, _, _ in runs)
            cpu = statistics.median(c for _, _, c in runs)
            rss = max(r for _, r, _ in runs)
            print(f"{label}: fastest {wall:.2f} s ({wall / floor_wall:.2f}x the floor), "
                  f"median CPU {cpu:.2f} s ({cpu / floor_cpu:.2f}x), "
                  f"peak {rss:.0f} MB ({rss / floor_rss:.2f}x)")  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if len(trees) > 1:
        print(f"plan_dataset: tables {'identical' if identical else 'DIFFER'}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
