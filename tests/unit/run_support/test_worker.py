"""run_support.worker in a real worker process: requests in on stdin, answers out on stdout."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

WORKER = textwrap.dedent(
    """
    from run_support.worker import answer, requests

    for request in requests():
        print("harness chatter on stdout")  # not an answer: sent to stderr
        outcome = "passed" if request["case"] == "good" else "failed"
        answer(request, outcome, score=1.0 if outcome == "passed" else 0.0)
    """
)


def _serve(lines: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WORKER],
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=True,
    )


def test_each_request_gets_one_answer_line_and_prints_go_to_stderr() -> None:
    requests = [
        json.dumps({"id": "r1", "case": "good", "model": "m", "repeat": 1, "attempt": 1}),
        json.dumps({"id": "r2", "case": "bad", "model": "m", "repeat": 1, "attempt": 1}),
    ]
    ran = _serve(requests)
    answers = [json.loads(line) for line in ran.stdout.splitlines()]
    assert answers == [
        {"id": "r1", "outcome": "passed", "score": 1.0},
        {"id": "r2", "outcome": "failed", "score": 0.0},
    ]
    assert ran.stderr.count("harness chatter on stdout") == 2


def test_a_line_that_is_not_a_request_is_reported_and_skipped() -> None:
    ran = _serve(["not json", "[1, 2]", json.dumps({"id": 7, "case": "good"})])
    assert [json.loads(line) for line in ran.stdout.splitlines()] == [
        {"id": 7, "outcome": "passed", "score": 1.0}
    ]
    assert ran.stderr.count("worker: not a request") == 2


def test_an_unknown_outcome_is_refused_before_anything_is_written() -> None:
    import io

    from run_support import worker

    out = io.StringIO()
    for request in worker.requests(io.StringIO('{"id": 1}\n'), answers=out):
        with pytest.raises(ValueError, match="'maybe' is not one of error, failed, passed"):
            worker.answer(request, "maybe")
    assert out.getvalue() == ""
