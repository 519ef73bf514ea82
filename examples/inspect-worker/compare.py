"""Run the inspect task both ways and print both times.

    python3 compare.py [--batch ../../.venv/bin/batch]

Runs ``sweep-worker.yaml`` (inspect as a warm worker) and ``sweep-process.yaml`` (one
process per sample), 40 samples each, two at a time, each into a new batch dir under
``runs/``, and prints the wall time of each and their ratio.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def timed(batch: str, sweep: str) -> float:
    began = time.monotonic()
    done = subprocess.run([batch, sweep, "--no-progress"], cwd=HERE, capture_output=True, text=True)
    took = time.monotonic() - began
    if done.returncode not in (0, 1):  # 1: some samples failed, as the mock model does
        sys.exit(f"{sweep}: exit {done.returncode}\n{done.stdout}{done.stderr}")
    print(done.stdout.strip().splitlines()[-2])
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", default=str(HERE.parent.parent / ".venv" / "bin" / "batch"))
    args = parser.parse_args()
    if not (HERE / ".venv" / "bin" / "python").exists():
        sys.exit("first: python3 -m venv .venv && .venv/bin/pip install inspect-ai")
    worker = timed(args.batch, "sweep-worker.yaml")
    process = timed(args.batch, "sweep-process.yaml")
    print(f"as a warm worker:     {worker:6.1f} s")
    print(f"one process per job:  {process:6.1f} s")
    print(f"ratio: {process / worker:.1f}x faster as a worker")


if __name__ == "__main__":
    main()
