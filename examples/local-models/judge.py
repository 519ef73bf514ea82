"""The judge step: ask the judge model whether answer.json is right; write result.json.

Usage: judge.py RUN_DIR   (the judge model is $JUDGE_MODEL, default mock-judge)
A wrong answer is the evaluated model's failure (result.json: failed, model_failure); a
judge that cannot be reached exits 3, a non-model failure that --retry-failed reruns from
this step, reusing the eval step's answer.json.
"""

import json
import os
import sys
from pathlib import Path

from client import ApiError, chat, fail

run_dir = Path(sys.argv[1])
answer = json.loads((run_dir / "answer.json").read_text())
prompt = (
    "Is the answer right? Reply PASS or FAIL.\n"
    f"Question: {answer['question']}\nExpected: {answer['expected']}\nAnswer: {answer['answer']}"
)
try:
    verdict = chat(os.environ.get("JUDGE_MODEL", "mock-judge"), prompt, max_tokens=4)
except ApiError as exc:
    fail(exc)
passed = verdict.upper().startswith("PASS")
print(f"judge says {verdict}", flush=True)
result = {
    "outcome": "passed" if passed else "failed",
    "failure_category": None if passed else "model_failure",
    "score": 1.0 if passed else 0.0,
    "answer": answer["answer"],
    "expected": answer["expected"],
}
(run_dir / "result.json").write_text(json.dumps(result, indent=2))
