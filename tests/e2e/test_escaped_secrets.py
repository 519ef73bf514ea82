"""A secret the driver quotes is redacted before it is escaped (issue 40, item 4).

A ``result.json`` whose outcome is a key, or a worker answer whose id or outcome is one, is
quoted in the record's reason with ``repr``. A key holding a backslash (or a quote) is
changed by the escaping — ``sk\\x`` becomes ``sk\\\\x`` — and a redaction after it no
longer finds the key: it was written in full, escaped, to the record, the summary, the
events and the driver's output. Through the real CLI, with real jobs and a real worker.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from helpers.fake_jobs import write_job_script

if TYPE_CHECKING:
    from conftest import BatchCli

KEY = "sk-esc\\aped'key\"0123456789"
#: The key as the driver would quote it escaped, and its distinctive middle either way.
FORMS = (KEY, repr(KEY)[1:-1], "aped", "0123456789")
ENV = {"MY_API_KEY": KEY}

JOB = """
    import json, os, sys
    key = os.environ["OPENAI_API_KEY"]
    with open(os.path.join(os.environ["BATCH_RUN_DIR"], "result.json"), "w") as out:
        json.dump({"outcome": key if sys.argv[1] == "outcome" else [key]}, out)
"""

#: Answers request ``a`` with an outcome that is the key, and request ``b`` with the key as
#: its id (no request has it); the worker is then replaced.
WORKER = """
    import json, os, sys
    key = os.environ["OPENAI_API_KEY"]
    for line in sys.stdin:
        request = json.loads(line)
        if request["case"] == "a":
            answer = {"id": request["id"], "outcome": key}
        else:
            answer = {"id": key, "outcome": "passed"}
        print(json.dumps(answer), flush=True)
"""


def leaks(text: str) -> list[str]:
    return [form for form in FORMS if form in text]


def files_leaking(root: Path) -> dict[str, list[str]]:
    """Every file under ``root`` that holds the key or a piece of it, but the jobs' own
    logs and what the job itself wrote (its ``result.json``)."""
    own = ("output.log", "workers.log", "result.json")
    return {
        str(path.relative_to(root)): leaks(path.read_text(errors="replace"))
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name not in own and leaks(path.read_text(errors="replace"))
    }


def write_sweep(cli: BatchCli, cases: list[str], **keys: object) -> Path:
    sweep = {
        "output": "runs",
        "cases": cases,
        "models": ["m"],
        "env": {"OPENAI_API_KEY": "${MY_API_KEY}"},
        "halt": "off",
        "summary_interval": "0s",
        **keys,
    }
    path = cli.dir / "sweep.yaml"
    path.write_text(json.dumps(sweep))
    return path


def test_a_result_outcome_holding_a_key_is_redacted_before_it_is_quoted(
    batch_cli: BatchCli,
) -> None:
    job = write_job_script(batch_cli.dir, JOB)
    sweep = write_sweep(
        batch_cli, ["outcome", "listed"], command=[sys.executable, str(job), "{case}"]
    )

    done = batch_cli.run(sweep, "--no-progress", env=ENV)

    assert done.returncode == 1, done.stdout + done.stderr
    reasons = {r["test_case"]: r["reason"] for r in batch_cli.records()}
    # Was: "invalid result.json: outcome 'sk-esc\\\\aped\\'key\"0123456789' is not one of ..."
    assert reasons["outcome"].startswith("invalid result.json: outcome '[REDACTED]' is not")
    assert reasons["listed"].startswith("invalid result.json: outcome ['[REDACTED]'] is not")
    assert leaks(done.stdout + done.stderr) == []
    assert files_leaking(batch_cli.only_batch_dir()) == {}


def test_a_worker_answer_holding_a_key_is_redacted_before_it_is_quoted(
    batch_cli: BatchCli,
) -> None:
    worker = write_job_script(batch_cli.dir, WORKER, name="worker.py")
    sweep = write_sweep(
        batch_cli, ["a", "b"], worker=[sys.executable, str(worker)], max_concurrent=1
    )

    done = batch_cli.run(sweep, "--no-progress", env=ENV)

    assert done.returncode == 1, done.stdout + done.stderr
    reasons = {r["test_case"]: r["reason"] for r in batch_cli.records()}
    assert reasons["a"].startswith("invalid the worker's answer: outcome '[REDACTED]' is not")
    assert reasons["b"].startswith("the worker answered request id '[REDACTED]', not one")
    assert leaks(done.stdout + done.stderr) == []
    assert files_leaking(batch_cli.only_batch_dir()) == {}
