"""Loading a sweep of 10,000 case objects: the round-trip reader against ``yaml_fast``.

    .venv/bin/python bench/sweep_load.py [--cases 10000] [--repeat 3] [--no-round-trip]

Writes a sweep whose cases are ``{id, timeout, params}`` objects (as a batch dir's
``sweep.yaml`` snapshot lists them) in a fresh temporary directory and times, ``--repeat``
times each: ``load_sweep`` (what the driver does: the cases list read as plain values and
converted in one loop), ``batch.sweep.yaml_fast``'s ``read_yaml_fast`` (every value
located) and the round-trip reader alone (``batch.sweep.yaml_reader.read_yaml``). Prints
each time and the medians (wall and CPU), and exits 1 unless the fast reader took the fast
path and gave the same data with the same line and column for every value (not checked
with ``--no-round-trip``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from batch.sweep import yaml_fast
from batch.sweep.load import load_sweep
from batch.sweep.yaml_reader import read_yaml


def sweep_text(cases: int) -> str:
    lines = ["name: big", "models: [m1, m2]", "command: [echo, '{case}', '{params.prompt}']"]
    lines.append("cases:")
    for index in range(cases):
        lines += [
            f"- id: case-{index:05d}",
            "  timeout: 90",
            "  params:",
            f"    prompt: task number {index}",
            f"    seed: {index}",
            "    temperature: 0.5",
            "    strict: true",
        ]
    return "\n".join(lines) + "\n"


def located(value: Any) -> Any:
    """The value with every line and column, to compare two readers exactly."""
    if isinstance(value, CommentedMap):
        items = [(k, tuple(value.lc.data[k]), located(v)) for k, v in value.items()]
        return ("map", value.lc.line, value.lc.col, items)
    if isinstance(value, CommentedSeq):
        items = [(tuple(value.lc.data[i]), located(v)) for i, v in enumerate(value)]
        return ("seq", value.lc.line, value.lc.col, items)
    return (type(value).__name__, value)


def timed(run: Callable[[], Any], repeat: int) -> tuple[list[float], list[float], Any]:
    """Wall and CPU seconds of each run (CPU: on a shared machine, what the load leaves out)."""
    times, cpu, result = [], [], None
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = run()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return times, cpu, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--no-round-trip",
        action="store_true",
        help="leave out ruamel's round-trip reader (about a minute per run under load)",
    )
    args = parser.parse_args()
    if yaml_fast.CParser is None:
        print("ruamel.yaml.clib is not installed: no fast path to measure")
        return 1
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        path = Path(tmp, "sweep.yaml")
        path.write_text(sweep_text(args.cases))
        runs = {
            "load_sweep": lambda: load_sweep(path),
            "read_yaml_fast": lambda: yaml_fast.read_yaml_fast(path, "sweep.yaml"),
            "read_yaml (round-trip)": lambda: read_yaml(path, "sweep.yaml"),
        }
        if args.no_round_trip:
            del runs["read_yaml (round-trip)"]
        results = {}
        for name, run in runs.items():
            times, cpu, results[name] = timed(run, args.repeat)
            shown = " ".join(f"{t:.2f}" for t in times)
            print(
                f"{name}: {shown} s; median {statistics.median(times):.2f} s "
                f"(CPU {statistics.median(cpu):.2f} s)"
            )
        if args.no_round_trip:
            print(f"load average {os.getloadavg()[0]:.2f}")
            return 0
        slow, fast = results["read_yaml (round-trip)"], results["read_yaml_fast"]
        if located(slow[0]) != located(fast[0]) or slow[1] != fast[1]:
            print("read_yaml_fast differs from read_yaml")
            return 1
        try:
            yaml_fast._Builder(path.read_text()).document()
        except yaml_fast._Unhandled:
            print("read_yaml_fast fell back to the round-trip reader")
            return 1
    print(f"same data, lines and columns; load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
