"""A mock agent for the quickstart: answers a case's question as one of three mock models.

mock/oracle      always right
mock/guesser     wrong on some cases (a genuine model failure)
mock/ratelimited hits a simulated "429 rate limit" on its first attempt at each case
                 (an api_or_credit failure: --retry-failed reruns it, and it passes)

Usage: agent.py CASE MODEL ATTEMPT RUN_DIR
"""

import json
import os
import sys
import time
import zlib
from pathlib import Path

case, model, attempt, run_dir = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
task = json.loads((Path(__file__).parent / "cases" / f"{case}.json").read_text())
print(f"[{model}] question: {task['question']}", flush=True)
# The model "thinks" 0.3-1 s; QUICKSTART_PACE scales that (the test suite sets it to 0.1).
pace = float(os.environ.get("QUICKSTART_PACE", "1"))
time.sleep(pace * (0.3 + (zlib.crc32(f"{case}{model}".encode()) % 70) / 100))

if model == "mock/ratelimited" and attempt == 1:
    print("HTTP 429: rate limit exceeded, retry later", flush=True)
    sys.exit(3)

answer = task["answer"]
if model == "mock/guesser" and zlib.crc32(case.encode()) % 3 == 0:
    # A guess that differs by case, as a real model's wrong answers do (six identical
    # failure reasons would read as a crashed harness, docs/ledger.md).
    answer = f"I think {case} is 42"
print(f"[{model}] answer: {answer}", flush=True)

passed = answer == task["answer"]
details = {"answer": answer, "expected": task["answer"], "score": 1.0 if passed else 0.0}
try:  # the helper a Python job calls when batch-ledger is importable
    from run_support.results import write_result

    write_result(run_dir, "passed" if passed else "failed", **details)
except ImportError:  # the same file, written by hand
    outcome = {"outcome": "passed" if passed else "failed", "failure_category": None}
    (run_dir / "result.json").write_text(json.dumps({**outcome, **details}))
