"""A worker that floods its stdout with empty lines: the driver's time in proportion to
what it writes (issue 40, item 13).

    .venv/bin/python bench/worker_stdout.py [--mib 8 32]

For each size, one sweep of one job served by ``tests/helpers/fake_worker.py`` with
``do: blank-lines`` (that many MiB of ``\\n`` on stdout, then an answer); prints the
driver's wall time and CPU (its own and its children's, ``wait4``) and the CPU per MiB,
which stays flat when reading is linear. Exits 1 if a run did not pass.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORKER = REPO / "tests" / "helpers" / "fake_worker.py"


def run(mib: int, root: Path) -> tuple[float, float]:
    """Wall seconds and the driver's CPU seconds for one flood of ``mib`` MiB."""
    work = root / f"flood-{mib}"
    work.mkdir()
    sweep = {
        "output": "runs",
        "cases": [{"id": "flood", "params": {"do": "blank-lines", "mib": mib}}],
        "models": ["m"],
        "worker": [sys.executable, str(WORKER), str(work)],
    }
    (work / "sweep.yaml").write_text(json.dumps(sweep))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "batch.cli", "sweep.yaml", "--no-progress"],
        cwd=work,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"flood of {mib} MiB: exit {done.returncode}\n{done.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, nargs="+", default=[8, 32])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        for mib in args.mib:
            wall, cpu = run(mib, Path(root))
            load = os.getloadavg()[0]
            print(
                f"load {load:.2f}: {mib} MiB of empty lines: wall {wall:.2f} s, "
                f"CPU {cpu:.2f} s ({cpu / mib:.3f} s per MiB)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
