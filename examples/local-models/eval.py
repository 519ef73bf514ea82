"""The eval step: ask MODEL the case's question, write answer.json into the run dir.

Usage: eval.py CASE MODEL RUN_DIR
Exit 0 with answer.json written; exit 3 when the server fails (a non-model failure).
"""

import json
import sys
from pathlib import Path

from client import ApiError, chat, fail

case, model, run_dir = sys.argv[1], sys.argv[2], Path(sys.argv[3])
task = json.loads((Path(__file__).parent / "cases" / f"{case}.json").read_text())
print(f"[{model}] {task['question']}", flush=True)
try:
    reply = chat(model, f"{task['question']} Answer with the number only.")
except ApiError as exc:
    fail(exc)
print(f"[{model}] answered: {reply}", flush=True)
answer = {"question": task["question"], "expected": task["answer"], "answer": reply}
(run_dir / "answer.json").write_text(json.dumps(answer, indent=2))
