"""Loading a 100,000-row JSONL dataset as a sweep's cases (``batch.sweep.dataset``).

    .venv/bin/python bench/dataset_load.py [--rows 100000] [--repeat 3]

Writes a HumanEval-like dataset (``task_id``, ``prompt``, ``canonical_solution``, ``test``,
``entry_point``, a list field; about 1 KB a row) as ``data.jsonl`` and ``data.jsonl.gz`` in a
fresh temporary directory, loads each ``--repeat`` times with ``load_dataset`` (the reader
alone) and with ``load_sweep`` on a sweep naming it as ``cases: {jsonl: ..., id: task_id}``
(what the driver does: the reader, the cases, the ``{params.NAME}`` check), and prints
every time, the medians and rows per second. Exits 1 if a load returns the wrong number of
cases. The directory is deleted at the end.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from batch.sweep.dataset import load_dataset
from batch.sweep.load import load_sweep


def humaneval_like(rows: int) -> bytes:
    lines = []
    for index in range(rows):
        name = f"func_{index}"
        row = {
            "task_id": f"HumanEval/{index}",
            "prompt": f'def {name}(numbers: list[float], threshold: float) -> bool:\n    """'
            + "Check if in given list of numbers, are any two numbers closer to each other "
            "than given threshold.\n    >>> f([1.0, 2.0, 3.0], 0.5)\n    False\n" * 3 + '    """\n',
            "canonical_solution": "    for idx, elem in enumerate(numbers):\n"
            "        for idx2, elem2 in enumerate(numbers):\n"
            "            if idx != idx2 and abs(elem - elem2) < threshold:\n"
            "                return True\n    return False\n",
            "test": "def check(candidate):\n    assert candidate([1.0, 2.0, 3.9], 0.3) == True\n"
            "    assert candidate([1.0, 2.0, 5.9], 0.95) == False\n" * 2,
            "entry_point": name,
            "difficulty": index % 5,
            "tags": ["list", "math"],
        }
        lines.append(json.dumps(row))
    return ("\n".join(lines) + "\n").encode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    with tempfile.TemporaryDirectory(prefix="bench-dataset-") as tmp:
        content = humaneval_like(args.rows)
        plain = Path(tmp, "data.jsonl")
        plain.write_bytes(content)
        packed = Path(tmp, "data.jsonl.gz")
        packed.write_bytes(gzip.compress(content, compresslevel=6))
        size, packed_size = len(content) / 1e6, packed.stat().st_size / 1e6
        print(f"{args.rows} rows: {size:.1f} MB, gzip {packed_size:.1f} MB")
        for path in (plain, packed):
            sweep = Path(tmp, f"sweep-{path.name}.yaml")
            sweep.write_text(
                f"cases: {{jsonl: {path.name}, id: task_id}}\nmodels: [m]\n"
                "command: [echo, '{params.entry_point}']\n"
            )
            runs = {
                "load_dataset": lambda path=path: load_dataset(path, "task_id", path.name).cases,
                "load_sweep": lambda sweep=sweep: load_sweep(sweep).cases,
            }
            for name, run in runs.items():
                times, cpu = [], []
                for _ in range(args.repeat):
                    start, start_cpu = time.perf_counter(), time.process_time()
                    cases = run()
                    times.append(time.perf_counter() - start)
                    cpu.append(time.process_time() - start_cpu)
                    if len(cases) != args.rows:
                        print(f"{path.name}: {len(cases)} cases, not {args.rows}")
                        return 1
                    del cases
                median = statistics.median(times)
                shown = " ".join(f"{t:.2f}" for t in times)
                print(
                    f"{path.name} {name}: {shown} s; median {median:.2f} s, "
                    f"{args.rows / median:,.0f} rows/s (CPU {statistics.median(cpu):.2f} s)"
                )
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
